"""What a run exercises: the scenario matrices (toy, checkpoint, draft families, a user pair, an engine
configuration's added scenarios) and each scenario's exact law."""
