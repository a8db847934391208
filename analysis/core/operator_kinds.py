"""The one registry of stateful operator kinds: how Spark names each (the state metadata's
``operatorName``, the physical plan's node), and the kind State Lens knows it as. The fate walk's
stages (``analysis.fate.stages.STAGES``) and the one-operator verdicts are keyed by these kinds.

A name no kind claims is not guessed at: ``kind_of`` says it is not supported, and a key whose
records pass such an operator is answered ``unknown``, saying so. A new kind is a line here and a
stage file beside its siblings (the docs show the diff of a real one).
"""

from __future__ import annotations

from dataclasses import dataclass

from statelens.analysis.core.errors import StateLensError

JOIN, AGGREGATION, DEDUP, DEDUP_WITHIN, SESSION, GROUP_STATE, TWS, LIMIT = (
    "join",
    "aggregation",
    "dedup",
    "dedup_within_watermark",
    "session_window",
    "group_state",
    "transform_with_state",
    "limit",
)


@dataclass(frozen=True)
class OperatorKind:
    """A kind of stateful operator and what follows from it wherever State Lens reads or answers: how
    Spark names it, how an answer names it, and how it treats rows (its stage in ``analysis.fate.stages``
    and its one-operator verdict in ``analysis.verdicts`` are registered by this ``kind``)."""

    kind: str
    names: tuple[str, ...]  # the state metadata's operatorName, lower case: exact, or a prefix ending in "*"
    plan_nodes: tuple[str, ...]  # the physical plan's nodes that write its state (a restore node shares the id)
    label: str = ""  # how an answer names it ("operator 0 (aggregation)"); "": by the name Spark gives it
    sides: tuple[str, ...] = ("",)  # its inputs, each with its own key and state (a join's left and right)
    function: bool = False  # a user's function decides what it keeps and emits (its plan node names the function first)
    emits_when_evicted: bool = False  # a row the watermark evicts was emitted then (a window's, a session's result)
    unmatched: bool = False  # keys that never produced output are a question of their own: never matched, still waiting
    watermark_evicts: bool = False  # the watermark removes its state (without one it grows with every key)


# most specific first: "dedupeWithinWatermark" before "dedupe*"
KINDS: tuple[OperatorKind, ...] = (
    OperatorKind(
        JOIN,
        ("symmetrichashjoin",),
        ("StreamingSymmetricHashJoin",),
        "stream-stream join",
        ("left", "right"),
        unmatched=True,
        watermark_evicts=True,
    ),
    OperatorKind(
        TWS,
        ("transformwithstate*",),
        ("TransformWithState", "TransformWithStateInPandas", "TransformWithStateInPySpark"),
        "transformWithState",
        function=True,
    ),
    OperatorKind(
        GROUP_STATE,
        ("flatmapgroupswithstate*", "applyinpandaswithstate*", "flatmapgroupsinpandaswithstate*"),
        ("FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState"),
        "group state",
        function=True,
    ),
    OperatorKind(
        SESSION,
        ("sessionwindow*",),
        ("SessionWindowStateStoreSave",),
        "session window",
        emits_when_evicted=True,
        watermark_evicts=True,
    ),
    OperatorKind(
        DEDUP_WITHIN,
        ("dedupewithinwatermark",),
        ("StreamingDeduplicateWithinWatermark",),
        "dropDuplicatesWithinWatermark",
        watermark_evicts=True,
    ),
    OperatorKind(DEDUP, ("dedupe*",), ("StreamingDeduplicate",), "dropDuplicates", watermark_evicts=True),
    OperatorKind(
        AGGREGATION,
        ("statestoresave*",),
        ("StateStoreSave",),
        "aggregation",
        emits_when_evicted=True,
        unmatched=True,
        watermark_evicts=True,
    ),
    OperatorKind(LIMIT, ("globallimit*", "streaminggloballimit*"), ("StreamingGlobalLimit",)),
)
PLAN_NODES: dict[str, str] = {node: k.kind for k in KINDS for node in k.plan_nodes}
LABELS: dict[str, str] = {k.kind: k.label for k in KINDS if k.label}  # kind -> how an answer names it
_BY_KIND: dict[str, OperatorKind] = {k.kind: k for k in KINDS}


class UnsupportedOperator(StateLensError):
    title = "Operator kind not supported"


def _matches(pattern: str, name: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def behaviour(kind: str | None) -> OperatorKind:
    """What follows from a kind (``OperatorKind``); a kind the registry does not hold (None: an operator
    no kind claims) behaves as none: one input, no function, nothing emitted on eviction."""
    return _BY_KIND.get(kind or "", _NONE)


_NONE = OperatorKind("", (), ())


def find_kind(operator_name: str) -> str | None:
    """The kind of an operator Spark named ``operator_name``; None: no kind claims it."""
    name = operator_name.strip().lower()
    return next((k.kind for k in KINDS for p in k.names if _matches(p, name)), None)


def kind_of(operator_name: str) -> str:
    """The kind of an operator Spark named ``operator_name``; a name no kind claims is refused loudly."""
    kind = find_kind(operator_name)
    if kind is None:
        raise UnsupportedOperator(unsupported(operator_name))
    return kind


def unsupported(operator_name: str) -> str:
    """Why a key through such an operator is answered ``unknown``."""
    return f"operator kind {operator_name or '(unnamed)'} is not supported yet"
