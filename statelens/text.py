"""How the front doors (the CLI, the pages) read and write figures and keys as text, the same everywhere."""

from __future__ import annotations

from statelens.analysis.charts.pipeline import batch_ranges, health_text
from statelens.analysis.checkpoint.health import counted_stores_text, human_bytes, key_json, rows_in_state
from statelens.analysis.checkpoint.overview import repartition_lines
from statelens.analysis.core.key_columns import columns_equal_to_key
from statelens.analysis.core.key_format import fmt_time, parse_event_time

__all__ = [
    "batch_ranges",
    "columns_equal_to_key",
    "counted_stores_text",
    "fmt_time",
    "health_text",
    "human_bytes",
    "key_json",
    "parse_event_time",
    "repartition_lines",
    "rows_in_state",
]
