"""What a run concludes: the typed evidence (``Certificate``, ``ScenarioResult``), the acceptance-metrics and
engine-counter evidence, the verdict rules, and old documents read as new ones."""
