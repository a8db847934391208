"""The query as its plan states it: the physical plan an event log records (``query_plan``), the
plan's filters evaluated on a record as Spark would (``predicates``), and the rows a static table
gives a record it is joined with (``static_table``)."""
