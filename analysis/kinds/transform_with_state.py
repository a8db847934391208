"""transformWithState (Scala, Pandas and Python rows): a user's function keeps state variables (values,
lists, maps), timers and TTLs per grouping key; a record changes its key's variables as group state
does (its stage), and the verdict tells each variable's value, timer and expiry."""

from __future__ import annotations

from statelens.analysis.core.operator_kinds import TWS, OperatorKind
from statelens.analysis.kinds.group_state import GroupStateStage
from statelens.analysis.verdicts.stateful_verdicts import holds_state

KIND = OperatorKind(
    TWS,
    ("transformwithstate*",),
    ("TransformWithState", "TransformWithStateInPandas", "TransformWithStateInPySpark"),
    "transformWithState",
    function=True,
    stage=GroupStateStage(),
    in_state=holds_state,
)
