"""State readers side by side: Spark's State Data Source (``state_reader``, ``spark_state``,
``spark_stats``) and the native reader (``native/``), each behind
``analysis.state_access.StateAccess``; ``engine`` and ``access`` pick one per read, by the
engine choice (``runtime.engine_choice``), and fall back to Spark where the native reader cannot."""
