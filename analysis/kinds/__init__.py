"""Every stateful operator kind State Lens follows, one module each: how Spark names it (the state
metadata's operator name, the plan's nodes), how an answer names it, how it treats rows, its stage of
the fate walk and its one-operator verdict on a key it holds state for (``OperatorKind``).

``KINDS`` is the registry: one line per kind, most specific first ("dedupeWithinWatermark" before
"dedupe*"). A new kind is a module here and its line below (docs/contributing.md shows a real one);
the bottom rooms see them through ``analysis.core.operator_kinds``.
"""

from __future__ import annotations

from statelens.analysis.core.operator_kinds import OperatorKind
from statelens.analysis.kinds import (
    aggregation,
    dedup,
    dedup_within_watermark,
    group_state,
    join,
    limit,
    session_window,
    streamline_aggregation,
    transform_with_state,
)

KINDS: tuple[OperatorKind, ...] = (
    join.KIND,
    transform_with_state.KIND,
    group_state.KIND,
    session_window.KIND,
    dedup_within_watermark.KIND,
    dedup.KIND,
    aggregation.KIND,
    streamline_aggregation.KIND,
    limit.KIND,
)
