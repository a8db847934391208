"""How the front doors (the CLI, the pages) read and write figures and keys as text, the same everywhere."""

from __future__ import annotations

from analysis.checkpoint.health import counted_stores_text, human_bytes, key_json, rows_in_state
from analysis.checkpoint.overview import repartition_lines
from analysis.core.key_columns import columns_equal_to_key
from analysis.fate.model import fmt_time
from analysis.runs.progress import parse_event_time

__all__ = [
    "columns_equal_to_key",
    "counted_stores_text",
    "fmt_time",
    "human_bytes",
    "key_json",
    "parse_event_time",
    "repartition_lines",
    "rows_in_state",
]
