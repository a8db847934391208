"""One stage per operator kind, side by side behind one interface (``base.Stage``): what the operator
did with a row that reached it, what it sends on, what it emitted, what waits. A new operator kind
is a new file here and a line in ``STAGES``."""

from __future__ import annotations

from analysis.fate.stages.aggregation import AggregationStage
from analysis.fate.stages.base import Stage
from analysis.fate.stages.dedup import DedupStage
from analysis.fate.stages.group_state import GroupStateStage
from analysis.fate.stages.join import JoinStage
from analysis.fate.stages.session import SessionStage

STAGES: dict[str, Stage] = {
    kind: stage
    for stage in (DedupStage(), JoinStage(), AggregationStage(), SessionStage(), GroupStateStage())
    for kind in stage.kinds
}
