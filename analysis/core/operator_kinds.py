"""The registry of stateful operator kinds: how Spark names each (the state metadata's
``operatorName``, the physical plan's node), the kind State Lens knows it as, and what follows from it.

Each kind is one module of ``analysis/kinds`` (its names, plan nodes, label, sides, its stage of the
fate walk and its one-operator verdict), listed once in that package's ``KINDS``. This module is the
bottom rooms' view of them: it loads that list the first time a kind is looked up, so a reader or a
plan parser asks ``find_kind``/``behaviour`` without importing the walk or the verdicts above it.

A name no kind claims is not guessed at: ``kind_of`` says it is not supported, and a key whose
records pass such an operator is answered ``unknown``, saying so.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from statelens.analysis.core.errors import StateLensError

# the kinds' names, for the modules that read a kind's rows (a join's sides, an aggregation's windows)
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

REMOVED = "Its state was removed: by a timeout, a timer or TTL expiry, or by the function itself (state.remove() / clear())."


@dataclass(frozen=True)
class OperatorKind:
    """A kind of stateful operator and what follows from it wherever State Lens reads or answers: how
    Spark names it, how an answer names it, how it treats rows, its stage of the fate walk and its
    one-operator verdict on a key it holds state for (both declared in the kind's module)."""

    kind: str
    names: tuple[str, ...]  # the state metadata's operatorName, lower case: exact, or a prefix ending in "*"
    plan_nodes: tuple[str, ...]  # the physical plan's nodes that write its state (a restore node shares the id)
    label: str = ""  # how an answer names it ("operator 0 (aggregation)"); "": by the name Spark gives it
    sides: tuple[str, ...] = ("",)  # its inputs, each with its own key and state (a join's left and right)
    function: bool = False  # a user's function decides what it keeps and emits (its plan node names the function first)
    emits_when_evicted: bool = False  # a row the watermark evicts was emitted then (a window's, a session's result)
    unmatched: bool = False  # keys that never produced output are a question of their own: never matched, still waiting
    watermark_evicts: bool = False  # the watermark removes its state (without one it grows with every key)
    output_mode: str | None = None  # the one output mode Spark runs it in ("update"); None: the query's
    # the watermark removes a key only by an event time its key holds (a window, a timestamp): without one,
    # its state grows with every key; and the change that gives it one (the fix, the API it names)
    needs_key_time: tuple[str, str] | None = None
    stage: Any = None  # its part of the fate walk (``analysis.fate.stage.Stage``); None: a key through it is unknown
    # its verdict on a key it holds state for: (key, context, state rows, lookups, "The key (...)") -> KeyDiagnosis;
    # None: a key it holds is answered by a verdict of its own (a join's sides) or refused
    in_state: Callable[..., Any] | None = None
    # what removing a key's state meant (a one-operator verdict's 'evicted'), given the verdict's context
    evicted: Callable[[Any], str] = lambda ctx: REMOVED


@cache
def kinds() -> tuple[OperatorKind, ...]:
    """Every kind, most specific first (``analysis.kinds.KINDS``: "dedupeWithinWatermark" before
    "dedupe*"), loaded on the first look-up."""
    found: tuple[OperatorKind, ...] = importlib.import_module("statelens.analysis.kinds").KINDS
    return found


@cache
def _by_kind() -> dict[str, OperatorKind]:
    found: dict[str, OperatorKind] = {}
    for k in kinds():
        if k.kind in found:
            raise RuntimeError(f"two modules declare the operator kind {k.kind}")
        found[k.kind] = k
    return found


@cache
def plan_nodes() -> dict[str, str]:
    """The physical plan's node -> the kind whose state it writes."""
    return {node: k.kind for k in kinds() for node in k.plan_nodes}


def label(kind: str | None, default: str) -> str:
    """How an answer names an operator of ``kind`` (``default``: Spark's name, for a kind without a label)."""
    return behaviour(kind).label or default


class UnsupportedOperator(StateLensError):
    title = "Operator kind not supported"


def _matches(pattern: str, name: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def behaviour(kind: str | None) -> OperatorKind:
    """What follows from a kind (``OperatorKind``); a kind the registry does not hold (None: an operator
    no kind claims) behaves as none: one input, no function, nothing emitted on eviction."""
    return _by_kind().get(kind or "", _NONE)


_NONE = OperatorKind("", (), ())


def find_kind(operator_name: str) -> str | None:
    """The kind of an operator Spark named ``operator_name``; None: no kind claims it."""
    name = operator_name.strip().lower()
    return next((k.kind for k in kinds() for p in k.names if _matches(p, name)), None)


def kind_of(operator_name: str) -> str:
    """The kind of an operator Spark named ``operator_name``; a name no kind claims is refused loudly."""
    kind = find_kind(operator_name)
    if kind is None:
        raise UnsupportedOperator(unsupported(operator_name))
    return kind


def unsupported(operator_name: str) -> str:
    """Why a key through such an operator is answered ``unknown``."""
    return f"operator kind {operator_name or '(unnamed)'} is not supported yet"
