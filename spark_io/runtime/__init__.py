"""Spark as State Lens runs it: the one SparkSession (local, a master, or Spark Connect), the
engine choice (who reads a location: this process or Spark), cancellable jobs with progress, and
the warm Connect server of ``cli.py serve``."""
