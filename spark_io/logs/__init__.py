"""The checkpoint's own files (offsets, commits, operator metadata, schemas, checksum sidecars)
and the query's event logs, read into ``analysis.model`` without a JVM where the files are
reachable, else through Spark's file systems (``files.SparkFiles``)."""
