"""How a run executes: its plan of parts, the runner (inline, a shard, Ray), the stores, the merge."""
