"""Everything that touches files, Spark or DuckDB, in rooms that import downwards only
(``tests/test_layout.py`` checks it):

* ``storage``  files wherever they live: local, S3, ADLS/Blob, GCS; the local cache
* ``runtime``  the one SparkSession, the engine choice, cancellable jobs, the warm Connect server
* ``logs``     the checkpoint's own files read into ``analysis.model``: offsets, commits, operator
  metadata, schemas, checksums, event logs
* ``readers``  state readers side by side, Spark's (State Data Source) and the native one, behind
  ``analysis.state_access.StateAccess`` and ``engine`` (which answers a read)
* ``gather``   what each diagnosis needs, read and handed to ``analysis``: why-missing, fate,
  health, unmatched, the DuckDB workspace, every checkpoint under a folder
"""
