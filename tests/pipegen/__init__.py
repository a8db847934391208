"""A generator of real streaming pipelines, each designed key's fate checked against what Spark did.

* ``compose``: a seed -> a ``Pipeline``: a streaming query made of the parts Spark allows together
  (file sources in JSON, CSV or Parquet, unions, renames, filters, a stream-static join, watermarks,
  dedup, stream-stream joins, tumbling, sliding and session windows, chained operators,
  applyInPandasWithState and transformWithStateInPandas, file sinks; HDFS or RocksDB with or without
  changelog checkpointing), with input batches holding keys designed for each fate;
* ``build``: the pipeline as PySpark code (the streaming query, and its stateless part as a batch
  query over the same files, to let Spark say which records its filters and static join keep);
* ``run``: runs it for real (``Trigger.AvailableNow``, one file per batch) and keeps the checkpoint,
  the inputs, the static table, the sink, the event log and Spark's progress;
* ``truth``: each designed key's outcome, cause and where, derived only from what Spark did: the
  sink's files, the progress's per-operator drop counts, the checkpoint's file-source and offset
  logs, Spark's own ``statestore`` reader, Spark's evaluation of the stateless part. Never from
  State Lens;
* ``differential``: State Lens's why-missing against the truth, on both engines, with and without
  the event log.

``python -m pipegen --help`` (with ``tests/`` on the path: ``make pipelines``) runs many seeds and
prints a table; a mismatch prints the seed and the query, to replay.
"""
