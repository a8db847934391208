"""How the front doors (the CLI, the pages) write figures and keys as text, the same everywhere."""

from __future__ import annotations

from analysis.checkpoint.health import human_bytes, key_json
from analysis.checkpoint.overview import repartition_lines
from analysis.fate.model import fmt_time

__all__ = ["fmt_time", "human_bytes", "key_json", "repartition_lines"]
