"""A key's fate through the whole query: each of its input records, operator by operator, to the output.

Pure: state is asked through ``StateAccess``; the records come from ``spark_io.gather.inputs`` (the files
each batch read, searched for the key). Each record is followed in plan order, from its source up
to the sink (Spark numbers stateful operators from the sink: the last is 0):

* ``walk``: what every operator shares: the path a record takes, each operator's state of a value
  (read once), the plan's filters on the way (``core.predicates``: evaluated on the record, or named
  as not evaluated), the late-row watermark Spark gave each operator per batch;
* ``stages``: one per operator kind, side by side: what the operator did with the row (dedup, join,
  aggregation, session window, group state and transformWithState) and what it sent on;
* ``outcome``: what reached the output (``written``, ``partly_written``, ``written_unmatched``,
  ``waiting``, ``lost``, ``never_in_input``), the root cause of the rest (a join row that never matched
  takes its cause from the other side's records of the key), and the sentence a user reads first;
* ``key``: one key's fate; the input columns a key may be in.
"""

from __future__ import annotations

from statelens.analysis.fate.key import StaticLookup, failed_fate, key_fate, search_columns, sink_columns, static_lookups
from statelens.analysis.fate.model import (
    CAUSES,
    CONDITION_NOT_MET,
    DROPPED_AS_DUPLICATE,
    DROPPED_AS_LATE,
    EMITTED,
    EMITTED_UNMATCHED,
    EVICTED_UNMATCHED,
    FILTERED,
    LOST,
    MATCHED,
    NEVER_IN_INPUT,
    NO_MATCH_IN_INPUT,
    NO_STATIC_MATCH,
    NOT_FOUND,
    OUTCOME_WRITTEN,
    OUTCOMES,
    PARTLY_WRITTEN,
    PASSED,
    REACHED,
    REACHED_STATE,
    STATE_REMOVED,
    UNKNOWN,
    WAITING,
    WAITING_FOR_WATERMARK,
    WRITTEN,
    WRITTEN_UNMATCHED,
    Cause,
    KeyFate,
    NearFate,
    Output,
    RecordFate,
    Step,
    Waiting,
    fmt_time,
    group_text,
)
from statelens.analysis.fate.walk import FateWalk, RecordFinder

__all__ = [
    "CAUSES",
    "CONDITION_NOT_MET",
    "DROPPED_AS_DUPLICATE",
    "DROPPED_AS_LATE",
    "EMITTED",
    "EMITTED_UNMATCHED",
    "EVICTED_UNMATCHED",
    "FILTERED",
    "LOST",
    "MATCHED",
    "NEVER_IN_INPUT",
    "NOT_FOUND",
    "NO_MATCH_IN_INPUT",
    "NO_STATIC_MATCH",
    "OUTCOMES",
    "OUTCOME_WRITTEN",
    "PARTLY_WRITTEN",
    "PASSED",
    "REACHED",
    "REACHED_STATE",
    "STATE_REMOVED",
    "UNKNOWN",
    "WAITING",
    "WAITING_FOR_WATERMARK",
    "WRITTEN",
    "WRITTEN_UNMATCHED",
    "Cause",
    "FateWalk",
    "KeyFate",
    "NearFate",
    "Output",
    "RecordFate",
    "RecordFinder",
    "StaticLookup",
    "Step",
    "Waiting",
    "failed_fate",
    "fmt_time",
    "group_text",
    "key_fate",
    "search_columns",
    "sink_columns",
    "static_lookups",
]
