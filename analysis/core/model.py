"""The checkpoint model every layer shares: batches, operators, stores, state files, and which state
to read (``StateSource``), with the pure checks on them. No Spark, DuckDB or Streamlit here.

Filled by ``spark_io.logs.checkpoint`` (the log reader) and used by the readers in ``spark_io``, the
diagnoses in ``analysis`` and the pages and CLI on top.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from statelens.analysis.core.errors import BatchOutOfRange, NoState, UnknownOperator, UnknownStore
from statelens.analysis.core.operator_kinds import JOIN, TWS, behaviour, find_kind

DEFAULT_STORE = "default"
# conf keys worth showing: provider, partitions, state format versions and the like
_CONF_PREFIXES = ("spark.sql.streaming.", "spark.sql.shuffle.partitions")


def streaming_conf(conf: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(conf.items()) if k.startswith(_CONF_PREFIXES)}


@dataclass(frozen=True)
class Batch:
    batch_id: int
    committed: bool
    watermark_ms: int
    timestamp_ms: int
    next_watermark_ms: int | None = None  # from commits/<batch> of the last committed batch, when it says it
    shuffle_partitions: int | None = None  # spark.sql.shuffle.partitions in offsets/<batch>: its state partitions


@dataclass(frozen=True)
class Repartition:
    """An offline state repartition (Spark 4.2+, ``StreamingCheckpointManager.repartition``): a batch of
    its own whose offsets differ from the previous batch's in ``spark.sql.shuffle.partitions`` only;
    its state version is written as full snapshots without change logs, and changes no row."""

    batch_id: int
    before: int
    after: int
    committed: bool


@dataclass(frozen=True)
class StoreInfo:
    store_name: str
    num_partitions: int
    num_cols_prefix_key: int = 0
    # a virtual column family of this store's files (join state format 3 keeps a join's four
    # stores as column families of one RocksDB store, "default"); None: the store's own folder
    family_of: str | None = None

    @property
    def folder(self) -> str:
        """The store whose files hold this one's rows (``state/<op>/<partition>/[<folder>/]``)."""
        return self.family_of or self.store_name


# a stream-stream join's stores, as Spark names them (and as storeName reads them in formats 1-3)
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue")
# join state format 4 (Spark 4.3): per side, the rows by (key, event time) and an index by event time
JOIN_V4_ROWS = "keyWithTsToValues"
# fields of a join store's key that are not the join key: format 1-3's value index, format 4's event time
JOIN_ROW_FIELDS = ("index", "__event_time")


@dataclass
class OperatorInfo:
    operator_id: int
    operator_name: str
    stores: list[StoreInfo]
    metadata_version: int | None = None  # 1 or 2; None when no operator metadata was found
    properties: dict[str, Any] = field(default_factory=dict)  # v2 operatorPropertiesJson
    inferred_from: str | None = None  # without operator metadata (Spark < 4.0): what the name was inferred from
    key_fields: list[dict[str, Any]] = field(default_factory=list)  # from the state schema file, when read
    value_fields: list[dict[str, Any]] = field(default_factory=list)

    def join_rows_store(self, side: str) -> str:
        """The store of a join side's rows with their ``matched`` flag: keyWithTsToValues in join
        state format 4, keyWithIndexToValue before."""
        v4 = f"{side}-{JOIN_V4_ROWS}"
        return v4 if self.store(v4) else f"{side}-keyWithIndexToValue"

    @property
    def kind(self) -> str | None:
        """State Lens's kind of this operator (``analysis.core.operator_kinds``); None: not known."""
        return find_kind(self.operator_name)

    @property
    def is_join(self) -> bool:
        return self.kind == JOIN or any(s.store_name.startswith(("left-", "right-")) for s in self.stores)

    @property
    def lists_unmatched(self) -> bool:
        """Whether its keys that never produced output are a question of their own (``unmatched``): a
        join's keys never matched, an aggregation's windows still waiting."""
        return self.is_join or behaviour(self.kind).unmatched

    @property
    def sources(self) -> list[StateSource]:
        """Every readable view of the operator, in the order the pages list them (``sources_of``)."""
        return sources_of(self)

    @property
    def default_store(self) -> str:
        """The store a skew check starts on: a join's left rows, else the operator's first view."""
        if self.is_join:
            return self.join_rows_store("left")
        src = sources_of(self)[0]
        return src.state_var or src.store_name or DEFAULT_STORE

    def store(self, name: str | None) -> StoreInfo | None:
        return next((s for s in self.stores if s.store_name == (name or DEFAULT_STORE)), None)

    def folder_of(self, name: str | None) -> str:
        """The store folder of a store name (a join store in format 3 lives in "default")."""
        found = self.store(name)
        return found.folder if found else name or DEFAULT_STORE

    @property
    def folders(self) -> list[StoreInfo]:
        """The stores as they are on disk: one per folder, a format 3 join's "default" once."""
        out: dict[str, StoreInfo] = {}
        for s in self.stores:
            out.setdefault(s.folder, StoreInfo(s.folder, s.num_partitions, s.num_cols_prefix_key))
        return list(out.values())

    @property
    def state_variables(self) -> list[str]:
        """transformWithState state variable names (operator metadata v2)."""
        return [v.get("stateName", "") for v in self.properties.get("stateVariables", []) if v.get("stateName")]

    def state_variable_type(self, name: str) -> str | None:
        """``ValueState``, ``ListState``, ``MapState`` or ``TimerState`` of a transformWithState variable."""
        return next(
            (v.get("stateVariableType") for v in self.properties.get("stateVariables", []) if v.get("stateName") == name),
            None,
        )


@dataclass
class CheckpointInfo:
    path: str
    query_id: str | None
    batches: list[Batch]
    operators: list[OperatorInfo]
    conf: dict[str, str]  # streaming conf captured in the latest offsets file
    checkpoint_format_version: int = 1  # 2: state files named with unique ids, listed in the v2 commit log
    commits_without_offsets: list[int] = field(default_factory=list)

    @property
    def committed_batches(self) -> list[Batch]:
        return [b for b in self.batches if b.committed]

    @property
    def last_committed(self) -> int | None:
        c = self.committed_batches
        return c[-1].batch_id if c else None

    @property
    def uncommitted(self) -> list[int]:
        return [b.batch_id for b in self.batches if not b.committed]

    @cached_property
    def repartitions(self) -> list[Repartition]:
        """Spark's ``isRepartitionBatch``: a batch whose shuffle partitions differ from the previous batch's."""
        return [
            Repartition(b.batch_id, a.shuffle_partitions, b.shuffle_partitions, b.committed)
            for a, b in zip(self.batches, self.batches[1:], strict=False)
            if a.shuffle_partitions and b.shuffle_partitions and a.shuffle_partitions != b.shuffle_partitions
        ]

    @cached_property
    def _partitions_by_batch(self) -> dict[int, int | None]:
        """Each batch's shuffle partitions, when an offline repartition changed them (else empty)."""
        return {b.batch_id: b.shuffle_partitions for b in self.batches} if self.repartitions else {}

    def partitions_at(self, batch: int) -> int | None:
        """The state partitions of a batch when an offline repartition changed them over time (the
        batch's shuffle partitions); None: the stores' own partition count holds for every batch."""
        return self._partitions_by_batch.get(batch)

    def feed_segments(self, start: int, end: int) -> list[tuple[int, int]]:
        """``start``..``end`` without its repartition batches: a change feed over each piece. A
        repartition batch has no change log (Spark's reader fails across it) and changes no row."""
        cuts = sorted(r.batch_id for r in self.repartitions if start <= r.batch_id <= end)
        out, lo = [], start
        for cut in cuts:
            if lo <= cut - 1:
                out.append((lo, cut - 1))
            lo = cut + 1
        return out + ([(lo, end)] if lo <= end else [])

    def operator(self, operator_id: int) -> OperatorInfo | None:
        return next((o for o in self.operators if o.operator_id == operator_id), None)

    @property
    def current_partitions(self) -> int | None:
        """The partitions the state has at the last committed batch."""
        if self.last_committed is not None and self.partitions_at(self.last_committed):
            return self.partitions_at(self.last_committed)
        return max((s.num_partitions for op in self.operators for s in op.stores), default=None)

    @property
    def provider(self) -> str:
        cls = self.conf.get("spark.sql.streaming.stateStore.providerClass", "")
        return cls.rsplit(".", 1)[-1] or "HDFSBackedStateStoreProvider"


@dataclass(frozen=True)
class StateFile:
    operator_id: int
    partition_id: int
    store_name: str
    kind: str  # delta | snapshot | changelog | zip | sst | schema | other
    version: int | None  # state version (= batch id + 1) for versioned files
    size: int
    path: str  # relative to the checkpoint folder


JOIN_SIDES = ("left", "right")


@dataclass(frozen=True)
class StateSource:
    """Which state to read: an operator and at most one of store, join side or state variable."""

    operator_id: int
    store_name: str | None = None
    join_side: str | None = None
    state_var: str | None = None
    timers: bool = False  # transformWithState registered timers

    @property
    def has_change_feed(self) -> bool:
        """Spark 4.3 reads change feeds per store; join-side views and timers have none."""
        return not self.join_side and not self.timers

    def options(self) -> dict[str, str]:
        opts = {"operatorId": str(self.operator_id)}
        if self.timers:
            opts["readRegisteredTimers"] = "true"
        elif self.join_side:
            opts["joinSide"] = self.join_side
        elif self.state_var:
            opts["stateVarName"] = self.state_var
        elif self.store_name and self.store_name != DEFAULT_STORE:
            opts["storeName"] = self.store_name
        return opts

    @property
    def table_name(self) -> str:
        """The SQL page's table of this view (``op0``, ``op0_left`` ...)."""
        return table_name(self)

    def describe(self) -> str:
        what = (
            (self.timers and "registered timers")
            or (self.join_side and f"join side {self.join_side}")
            or (self.state_var and f"state variable {self.state_var}")
        )
        return f"operator {self.operator_id}, " + (what or f"store {self.store_name or DEFAULT_STORE}")


def is_tws(op: OperatorInfo) -> bool:
    return "transformwithstate" in op.operator_name.lower()


def lookup_sources(op: OperatorInfo) -> list[tuple[str, StateSource]]:
    """(name, source) of every store a diagnosis reads for this operator."""
    if op.is_join:
        return [(side, StateSource(op.operator_id, store_name=op.join_rows_store(side))) for side in ("left", "right")]
    if find_kind(op.operator_name) == TWS:
        return [("timers" if s.timers else str(s.state_var), s) for s in sources_of(op)]
    return [("state", StateSource(op.operator_id, store_name=op.stores[0].store_name if op.stores else None))]


def sources_of(op: OperatorInfo) -> list[StateSource]:
    """Every readable view of one operator, in the order the UI lists them."""
    if is_tws(op):
        out = [StateSource(op.operator_id, state_var=v) for v in op.state_variables if not v.startswith("$")]
        if any(v.startswith("$") for v in op.state_variables):
            out.append(StateSource(op.operator_id, timers=True))
        return out
    out = [StateSource(op.operator_id, store_name=s.store_name) for s in op.stores]
    if op.is_join:
        out += [StateSource(op.operator_id, join_side=side) for side in JOIN_SIDES]
    return out


def require_state(info: CheckpointInfo) -> None:
    if not info.operators:
        raise NoState(
            f"{info.path} has no state/ folder: the query has no stateful operator, or it has not "
            "committed a batch yet. Overview and batches are still available."
        )


def operator_of(info: CheckpointInfo, operator_id: int) -> OperatorInfo:
    require_state(info)
    op = info.operator(operator_id)
    if op is None:
        known = ", ".join(f"{o.operator_id} ({o.operator_name})" for o in info.operators)
        raise UnknownOperator(f"Operator {operator_id} is not in this checkpoint. Its operators are: {known}.")
    return op


def default_operator(info: CheckpointInfo) -> OperatorInfo:
    """The operator a diagnosis starts on: the join if there is one, else the first."""
    require_state(info)
    return next((o for o in info.operators if o.is_join), info.operators[0])


def validate_source(info: CheckpointInfo, source: StateSource) -> OperatorInfo:
    op = operator_of(info, source.operator_id)
    if source.join_side is not None:
        if not op.is_join:
            raise UnknownStore(
                f"Operator {op.operator_id} ({op.operator_name}) is not a stream-stream join: it has no join side."
            )
        if source.join_side not in JOIN_SIDES:
            raise UnknownStore(f"Join side must be 'left' or 'right', not '{source.join_side}'.")
    elif is_tws(op):
        if source.timers:
            return op
        if source.state_var not in op.state_variables or source.state_var.startswith("$"):
            raise UnknownStore(
                f"Operator {op.operator_id} ({op.operator_name}) keeps state variables "
                f"{', '.join(op.state_variables) or '(none)'}; '{source.state_var}' is not one of them."
            )
    else:
        names = [s.store_name for s in op.stores]
        name = source.store_name or DEFAULT_STORE
        if name not in names:
            raise UnknownStore(
                f"Operator {op.operator_id} ({op.operator_name}) has no store '{name}'. Its stores are: {', '.join(names)}."
            )
    return op


def append_only(info: CheckpointInfo) -> bool:
    """Whether the checkpoint itself tells the output mode: several stateful operators run in append
    mode only (Spark refuses any other), so the event log is not needed to know it."""
    return len(info.operators) > 1


def require_committed(info: CheckpointInfo) -> None:
    """A diagnosis reads committed batches: none yet is one clear refusal."""
    if not info.committed_batches:
        planned = (
            f": batch {min(info.uncommitted)} is in offsets/ and not committed (the query is running it, or failed in it: "
            "its error is in the driver's log)"
            if info.uncommitted
            else ""
        )
        raise BatchOutOfRange(f"{info.path} has no committed batch yet{planned}; there is no state to read.")


def resolve_batch(info: CheckpointInfo, batch_id: int | None) -> int:
    """The batch to read: the given one if it is committed and retained, else the last committed."""
    require_committed(info)
    committed = [b.batch_id for b in info.committed_batches]
    if batch_id is None:
        return committed[-1]
    if batch_id not in committed:
        pending = " (it is in offsets/ but not committed yet)" if batch_id in info.uncommitted else ""
        raise BatchOutOfRange(
            f"Batch {batch_id} is not available{pending}: the retained committed batches are {committed[0]}–{committed[-1]}."
        )
    return batch_id


def table_name(source: StateSource) -> str:
    base = f"op{source.operator_id}"
    suffix = "timers" if source.timers else source.join_side or source.state_var or source.store_name
    if not suffix or suffix == DEFAULT_STORE:
        return base
    return f"{base}_{re.sub(r'[^0-9A-Za-z_]', '_', suffix)}"
