"""What each question needs, gathered from the logs and the readers and handed to ``analysis``:
why-missing of one operator (``diagnosis``) and of the whole query (``fate``, ``inputs``,
``arrivals``), health (skew, growth), unmatched keys, the DuckDB workspace, every checkpoint
under a folder (``fleet``), and Check with Spark (``crosscheck``)."""
