"""The simulator core: the timing engines, shared resources, statistics and ``simulate``."""
