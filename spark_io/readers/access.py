"""How a diagnosis reads a checkpoint's state: ``state_access`` picks the native reader's
``NativeState`` where the engine choice allows it, else Spark's ``SparkState``; ``load_state``
keeps one operator's state in memory for the app's many questions.
"""

from __future__ import annotations

from typing import Any

from statelens.analysis.core.errors import NativeUnsupported, StateReadError
from statelens.analysis.core.model import CheckpointInfo, StateSource, lookup_sources, operator_of
from statelens.analysis.core.state_access import ArrowState, StateAccess
from statelens.spark_io.readers import engine
from statelens.spark_io.readers.native.access import NativeState
from statelens.spark_io.readers.spark_state import SparkState
from statelens.spark_io.readers.state_reader import has_change_feed, read_changes, read_state

ROW_BUDGET = 5_000_000  # rows of state + change feed a loaded diagnosis may hold in memory


class LoadedState(ArrowState):
    """The app's state for one operator at one batch, loaded once: each store's rows and its change
    feed as Arrow, so every further key is answered in memory. The eviction delay of a join side is
    computed in Spark once per side."""

    def __init__(self, info: CheckpointInfo, state: dict[Any, Any], feeds: dict[Any, Any]) -> None:
        super().__init__(state, feeds)
        self.spark = SparkState(info)
        self._horizons: dict[Any, tuple[int, int] | None] = {}

    def eviction_horizon(self, source: StateSource, start: int, end: int, watermarks: dict[int, int]) -> tuple[int, int] | None:
        k = (source, start, end)
        if k not in self._horizons:
            self._horizons[k] = self.spark.eviction_horizon(source, start, end, watermarks)
        return self._horizons[k]


def state_access(info: CheckpointInfo) -> StateAccess:
    """How a diagnosis reads this checkpoint: the native reader where the engine choice allows it
    (``spark_io.readers.engine``), else Spark."""
    if engine.wants_native(info):
        try:
            return NativeState(info)
        except NativeUnsupported:
            if engine.current() == engine.NATIVE:
                raise
    return SparkState(info)


def between_questions(access: StateAccess) -> None:
    """After an answer, when more keys will follow (the app): the native reader reads the rest of
    the stores just asked about in the background (Spark's loaded state needs nothing)."""
    warm = getattr(access, "warm_in_background", None)
    if warm is not None:
        warm()


def load_state(info: CheckpointInfo, operator_id: int, batch: int, row_budget: int = ROW_BUDGET) -> StateAccess:
    """State to diagnose many keys with. Native: the native reader's access, which keeps what it
    reads. Spark: loaded in memory when the operator has a change feed and its stores fit the row
    budget, else read through Spark per question (``SparkState``)."""
    access = state_access(info)
    if not isinstance(access, SparkState):
        return access
    op = operator_of(info, operator_id)
    spark_state = SparkState(info)
    if not has_change_feed(info, op.operator_id):
        return spark_state
    state: dict[Any, Any] = {}
    feeds: dict[Any, Any] = {}
    used = 0
    committed = [b.batch_id for b in info.committed_batches]
    for _, src in lookup_sources(op):
        table, _ = read_state(info.path, src, batch, info=info, limit=row_budget - used + 1)
        used += table.num_rows
        if used > row_budget:
            return spark_state
        state[(src, batch)] = table
        if src.has_change_feed:
            try:
                feed, _, _ = read_changes(info.path, src, committed[0], batch, info=info, limit=row_budget - used + 1)
            except StateReadError as e:
                feeds[src] = e  # reported by the diagnosis as a failed history read
                continue
            used += feed.num_rows
            if used > row_budget:
                return spark_state
            feeds[src] = feed
    return LoadedState(info, state, feeds)
