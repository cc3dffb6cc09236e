"""What a run is: the options table, ``RunConfig``, the job-array shard (``--shard auto``)."""
