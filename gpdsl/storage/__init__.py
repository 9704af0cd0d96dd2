"""What gpdsl keeps on disk: outputs written atomically (:mod:`~gpdsl.storage.atomic`), checkpoints of long runs
(:mod:`~gpdsl.storage.checkpoint`) and the persistent cache of compiled programs
(:mod:`~gpdsl.storage.compilation_cache`)."""
