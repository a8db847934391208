"""The walk: a key's records followed, operator by operator, from their source up to the sink.

``FateWalk`` holds what every stage shares: the operators as the plan (or the checkpoint) states
them, the order a record passes them in, each operator's state of a lookup value (read once), the
watermarks each operator had per batch, and the input records a stage may need besides the key's own
(the other side of a join, the record a duplicate repeated: ``RecordFinder``). Before an operator's
stage looks at its state, the walk applies what every operator shares: the plan's filters on the
way to it, and the late-row watermark. The stage (``analysis.fate.stage``, one per operator kind in ``analysis.kinds``)
tells what the operator did with the row and what it sends on.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from statelens.analysis.core.errors import StateLensError, StateReadError
from statelens.analysis.core.key_format import fmt_duration, jsonable, to_ms
from statelens.analysis.core.model import CheckpointInfo, OperatorInfo, StateSource, sources_of
from statelens.analysis.core.operator_kinds import AGGREGATION, JOIN, SESSION, TWS, behaviour, find_kind, label, unsupported
from statelens.analysis.core.state_access import MAX_STATE_BATCHES, KeyQuery, StateAccess, key_text, typed_values
from statelens.analysis.fate.model import (
    DROPPED_AS_LATE,
    FILTERED,
    NO_MATCH_IN_INPUT,
    NO_STATIC_MATCH,
    PASSED,
    REACHED,
    REACHED_STATE,
    UNKNOWN,
    WAITING_FOR_WATERMARK,
    Cause,
    Output,
    RecordFate,
    Step,
    Waiting,
    fmt_time,
    noun,
    record_text,
    window_text,
)
from statelens.analysis.inputs.records import InputRecord, event_time_us

if TYPE_CHECKING:  # the plan's modules are imported where a plan is read or a filter evaluated
    from statelens.analysis.plan.query_plan import Column, OperatorWatermarks, QueryPlan, Window
    from statelens.analysis.plan.static_table import StaticTable

# state key fields that are an operator's time, not an input column (a window, a session's start)
TIME_KEYS = ("window", "session_window", "sessionStartTime")


class RecordFinder(Protocol):
    """The query's input, searched on demand (``spark_io.gather.inputs.RecordSearch``)."""

    def __call__(self, source: str, column: str, values: list[str]) -> list[InputRecord]:
        """The records of a source whose column holds one of the values."""
        ...

    def columns(self, source: str | None = None) -> set[str]:
        """The columns of a source's files (every source's: None)."""
        ...


class StageLike(Protocol):
    """An operator kind's stage (``analysis.fate.stage.Stage``, declared in its kind's module)."""

    def step(self, walk: FateWalk, view: OpView, a: Arrival) -> StepResult: ...


@dataclass
class OpView:
    """One stateful operator: from the plan when there is one, else from the checkpoint."""

    op: OperatorInfo
    kind: str
    keys: dict[str, list[Column]]  # input side ("" or left/right) -> the state key's columns
    time: dict[str, Column | None]  # input side -> the column its watermark is on
    output_mode: str | None = None
    join_type: str | None = None
    condition: str | None = None
    filters: dict[int, list[str]] = field(default_factory=dict)  # the plan's scan -> filters between it and here
    upstream_filters: dict[int, list[str]] = field(default_factory=dict)  # an operator below -> filters from it to here
    batch_joins: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # scan -> joins with static tables on the way
    planned: bool = False  # from the event log's plan
    windowed: bool = False  # without the plan: its state key holds a time window (lateness is on the window's end)
    raw_condition: str | None = None  # a join's condition as the plan prints it (evaluated on a pair)

    @property
    def operator_id(self) -> int:
        return self.op.operator_id

    @property
    def label(self) -> str:
        return f"operator {self.operator_id} ({label(self.kind, self.op.operator_name)})"

    def lookup(self, side: str) -> tuple[str, Column] | None:
        """The state key field a record is looked up by, and the column whose value it takes."""
        for i, c in enumerate(self.keys.get(side, [])):
            if c.window is None and c.name not in TIME_KEYS:
                return (f"field{i}" if self.kind == JOIN else c.name), c
        return None


@dataclass
class Flow:
    """A row on its way up the plan: a record, or the row it became (joined, a window's result)."""

    values: dict[str, Any]  # by column name (a joined row: both sides' columns)
    batch: int  # the batch it reaches the next operator in
    null_padded: bool = False  # a preserved join side's row emitted without a match
    unmatched_cause: Cause | None = None  # why it was not matched
    unevaluated: list[str] = field(default_factory=list)  # filters on its way that could not be evaluated
    maybe_late: str = ""  # why it may have been dropped as late at the operator it reaches (its watermark unknown)
    late_if_absent: Step | None = None  # its drop as late, when the operator's state does not hold it
    # the operator's key columns the plan computes from the record (a function, explode...): not its values
    computed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Arrival:
    """A row reaching an operator, past its filters and late-row watermark: the side it enters by,
    the row, the input record it comes from (and the key's other records), whether the operator is
    the last on its way, and its event time (µs) and window there."""

    side: str
    flow: Flow
    rec: InputRecord
    records: list[InputRecord]
    final: bool
    t_us: int | None
    window: Window | None


@dataclass
class History:
    rows: list[dict[str, Any]]  # state rows of the lookup value at the last batch
    changes: list[dict[str, Any]]  # change-feed rows (or state replayed batch by batch)
    error: str | None = None


@dataclass
class StepResult:
    step: Step
    flows: list[Flow] = field(default_factory=list)  # rows it sends on to the next operator (or out: the last)
    outputs: list[Output] = field(default_factory=list)  # what it emitted (the last operator: the query's output)
    waiting: list[Waiting] = field(default_factory=list)
    # rows it sent on only if it is an outer join preserving the row's side (its type unknown without the
    # event log): the next operator's state tells
    if_outer: list[Flow] = field(default_factory=list)


def value_at(values: dict[str, Any], path: str) -> Any:
    """A column of a row, ``window.end`` a field of a struct column."""
    if path in values:
        return values[path]
    head, _, rest = path.partition(".")
    inner = values.get(head)
    return value_at(inner, rest) if rest and isinstance(inner, dict) else None


def column_value(values: dict[str, Any], c: Column) -> Any:
    """A row's value of an operator's key column: by the input column it comes from, else by its own
    name (the row an upstream operator emitted names it as that operator's key does)."""
    if c.source_column:
        v = value_at(values, c.source_column)
        if v is not None:
            return v
    return value_at(values, c.name)


def same_value(state_value: Any, record_value: Any, tz: str) -> bool:
    """Whether a state row's field holds what the input record's column holds."""
    if state_value is None or record_value is None:
        return state_value is None and record_value is None
    if isinstance(state_value, dt.datetime) or isinstance(record_value, dt.datetime):  # a time as either file holds it
        t = event_time_us(record_value, tz)
        return t is not None and t == event_time_us(state_value, tz)
    if isinstance(state_value, dict) and isinstance(record_value, dict):
        return all(same_value(v, record_value.get(k), tz) for k, v in state_value.items())
    if isinstance(state_value, (int, float)) and not isinstance(state_value, bool):
        try:
            return float(state_value) == float(record_value)
        except (TypeError, ValueError):
            return False
    return key_text(state_value) == key_text(record_value)


def defect(e: Exception) -> str:
    """An unexpected error as an answer says it: what failed, and where to report it."""
    first = (str(e).strip().splitlines() or [""])[0][:200]
    return f"State Lens failed on it ({type(e).__name__}: {first}); please report it (STATELENS_DEBUG=1 shows where)"


def key_id(key: Any) -> str:
    return json.dumps(jsonable(key), sort_keys=True, default=str)


class FateWalk:
    """Follows a key's records through the operators; each operator's state is read once per lookup value."""

    def __init__(
        self,
        access: StateAccess,
        info: CheckpointInfo,
        plan: QueryPlan | None,
        marks: dict[int, dict[int, OperatorWatermarks]],
        drops: dict[int, dict[int, int]] | None,
        join_type: str | None,
        source_names: dict[int, str],
        time_zone: str = "UTC",
        planned: Iterable[int] = (),
        asked: tuple[str, ...] = (),
        finder: RecordFinder | None = None,
        duplicates: dict[int, dict[int, int]] | None = None,
        static_tables: dict[int, StaticTable] | None = None,
        assume_renames: bool = False,
        strict: bool = False,
    ) -> None:
        self.access = access
        self.asked = asked  # the keys asked about (a reader of part of a store reads their partition first)
        self.info = info
        self.plan = plan
        self.marks = marks
        self.drops = drops  # batch -> operator -> rows dropped by the watermark (None: no progress read)
        self.duplicates = duplicates  # batch -> operator -> duplicate rows dropped (a dedup's custom metric)
        self.join_type = join_type
        self.source_names = source_names
        self.finder = finder
        self.tz = time_zone
        self.planned = set(planned)  # batches whose watermarks the event log's plan states
        committed = [b.batch_id for b in info.committed_batches]
        self.first, self.last = committed[0], committed[-1]
        self.watermarks = {b.batch_id: b.watermark_ms for b in info.batches}
        self._histories: dict[tuple[int, str, str], dict[str, History]] = {}
        self._views: dict[int, OpView] = {}
        self._chains: dict[tuple[str, frozenset[str], str], list[tuple[OperatorInfo, str]]] = {}
        self._found: dict[tuple[str, str], dict[str, list[InputRecord]]] = {}
        # no plan: per input column a key was found in, the operators' key columns it is taken to be, renamed
        # (a key found in another column is another rename: each record by its own column)
        self.renamed: dict[str, set[str]] = {}
        self.assume_renames = assume_renames  # no plan, and the key's column not given: a key found in another column is a rename
        self.strict = strict  # an unexpected error in a stage is raised (debugging), not the record's unknown step
        self.static_tables = static_tables or {}  # the plan's scan -> the static table it reads
        self.unsure: set[int] = set()  # no plan: operators that may be off a record's path (both join sides fit)
        self.notes: list[str] = []

    def source_columns(self) -> dict[str, set[str]]:
        """Each source's columns, as its files have them (none known without a searchable input)."""
        finder = self.finder
        return {name: finder.columns(name) for name in set(self.source_names.values()) if name} if finder else {}

    def key_columns(self) -> set[str]:
        """Every operator's key columns as they are named (a join's by the columns its fields equal)."""
        return {c.source_column or c.name for op in self.info.operators for cols in self.view(op).keys.values() for c in cols}

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ---- operators

    def view(self, op: OperatorInfo) -> OpView:
        if op.operator_id not in self._views:
            self._views[op.operator_id] = self._view(op)
        return self._views[op.operator_id]

    def _view(self, op: OperatorInfo) -> OpView:
        kind = find_kind(op.operator_name) or ""  # "": no kind claims it (its stage: none)
        planned = self.plan.operators.get(op.operator_id) if self.plan else None
        if planned is not None and self.plan is not None:
            keys = dict(zip(behaviour(kind).sides, (planned.keys, planned.right_keys), strict=False))
            filters = {scan: planned.filters.get(scan, []) for scans in planned.sources.values() for scan in scans}
            return OpView(
                op,
                kind,
                keys,
                {side: planned.watermark_columns.get(side) for side in keys},
                planned.output_mode,
                self.join_type or (planned.join.join_type if planned.join else None),
                planned.join.condition if planned.join else None,
                filters,
                dict(planned.upstream_filters),
                dict(planned.batch_joins),
                planned=True,
                raw_condition=planned.join.raw_condition if planned.join else None,
            )
        from statelens.analysis.plan import query_plan

        sides = behaviour(kind).sides
        keys = {}
        windowed = False
        for side in sides:
            src = self.source(op, side)
            fields = self.access.key_fields(src, self.last)
            named = self.access.key_columns(src, self.last, self.asked) if kind == JOIN else {}
            keys[side] = [query_plan.Column(n, named.get(n, n)) for n, _ in fields]
            windowed = windowed or (kind != JOIN and self.access.windowed(src, self.last))
        return OpView(
            op, kind, keys, dict.fromkeys(sides), behaviour(kind).output_mode, join_type=self.join_type, windowed=windowed
        )

    def scan_source(self, scan_id: int) -> str:
        """The checkpoint's source a plan's scan reads (by the folder in its Location)."""
        loc = self.plan.scans[scan_id].location if self.plan else ""
        for name in self.source_names.values():
            if name and f"/{name}/" in loc:
                return name
        return ""

    def scan_columns(self, source: str) -> set[str] | None:
        """The columns a source's scan reads (the plan's), None without a plan."""
        if self.plan is None:
            return None
        return {c for scan_id, scan in self.plan.scans.items() if self.scan_source(scan_id) == source for c in scan.columns}

    def filters(self, view: OpView, source: str) -> list[str]:
        """The plan's filters between a source and an operator, as Spark printed them."""
        return [c for scan, conds in view.filters.items() if self.scan_source(scan) == source for c in conds]

    def stateless_path(self, view: OpView, source: str) -> list[str | int]:
        """What a source's row meets on its way to an operator, from the source up: the plan's filters
        (as Spark printed them) and, as their node ids, its joins with static tables."""
        out: list[str | int] = []
        for scan, conds in view.filters.items():
            if self.scan_source(scan) != source:
                continue
            top = len(conds)
            for node, above in sorted(view.batch_joins.get(scan, []), key=lambda j: -j[1]):  # the deepest first
                out += conds[above:top]
                out.append(node)
                top = above
            out += conds[:top]
        return out

    def source(self, op: OperatorInfo, side: str) -> StateSource:
        if side:
            return StateSource(op.operator_id, store_name=op.join_rows_store(side))
        if find_kind(op.operator_name) == TWS:
            return sources_of(op)[0]
        return StateSource(op.operator_id, store_name=op.stores[0].store_name if op.stores else None)

    def chain(self, rec: InputRecord) -> list[tuple[OperatorInfo, str]]:
        """The operators a record passes, from its source up to the sink, each with the side it enters by."""
        k = (rec.source, frozenset(rec.values), rec.column)
        if k not in self._chains:
            self._chains[k] = self._chain(rec)
        return self._chains[k]

    def _chain(self, rec: InputRecord) -> list[tuple[OperatorInfo, str]]:
        if self.plan is not None:
            scan = next((s for s in self.plan.scans if self.scan_source(s) == rec.source), None)
            if scan is not None:
                return [
                    (op, side)
                    for planned, side in self.plan.chain(scan)
                    if (op := self.info.operator(planned.operator_id)) is not None
                ]
        # no plan: the operators in the order Spark numbers them (the last is 0), each one the record's
        # columns can reach: a join by the side whose columns it has, another operator when the record
        # (or the join's output before it) has its key's columns
        out: list[tuple[OperatorInfo, str]] = []
        ops = sorted(self.info.operators, key=lambda o: -o.operator_id)
        joined = False
        sources = self.source_columns() if any(o.is_join for o in ops) else {}
        for op in ops:
            side = ""
            if op.is_join:
                side = self._join_side(op, rec, sources)
                joined = True
            elif not joined:
                view = self.view(op)
                cols = [c.source_column or c.name for c in view.keys.get("", []) if c.window is None]
                cols = [c for c in cols if c not in TIME_KEYS]
                missing = [c for c in cols if c not in rec.values]
                if (
                    len(missing) == 1
                    and self.assume_renames
                    and rec.column in rec.values
                    and rec.column not in self.key_columns()
                ):
                    # the key was found in another column: taken to be the same column renamed before the state
                    self.renamed.setdefault(rec.column, set()).add(missing[0])
                    self.note(
                        f"No event log: {view.label}'s key column {missing[0]} is not in the {rec.source or 'input'} files; "
                        f"their {rec.column} column, which holds the key, was taken to be it renamed (give the event log to know)."
                    )
                elif cols and missing and len(ops) > 1:
                    self.note(
                        f"No event log: {view.label} was taken to be off the path of the {rec.source or 'input'} records "
                        f"(they have no {', '.join(c for c in cols if c not in rec.values)} column); give the event log to know."
                    )
                    continue
                elif cols and sum(all(c in have for c in cols) for have in sources.values()) > 1:
                    self.unsure.add(op.operator_id)  # the sources of both sides of the join after it have its key's columns
                    self.note(
                        f"No event log: both sides of the join have {view.label}'s key columns ({', '.join(cols)}): which "
                        "side's records it sees cannot be told, so what it did with a record it does not hold is unknown."
                    )
            out.append((op, side))
        return out

    def _join_side(self, op: OperatorInfo, rec: InputRecord, columns: dict[str, set[str]]) -> str:
        """Without a plan, the side of a join a record enters by: the side whose state columns it has
        most of. Where two streams are all the query reads, one is each side: the pairing whose columns
        fit the sides' best, and on a tie Spark's order (it numbers the sources left subtree first)."""
        fields = {s: set(self.access.value_fields(self.source(op, s), self.last)) for s in ("left", "right")}
        names = [n for _, n in sorted(self.source_names.items()) if n]
        if len(names) == 2 and rec.source in names and all(n in columns for n in names):
            first, second = (columns[n] for n in names)
            straight = len(fields["left"] & first) + len(fields["right"] & second)
            crossed = len(fields["right"] & first) + len(fields["left"] & second)
            left = names[0] if straight >= crossed else names[1]
            return "left" if rec.source == left else "right"
        fit = {s: len(f & set(rec.values)) for s, f in fields.items()}
        return max(fit, key=lambda s: fit[s])

    # ---- state

    def prefetch(self, records: list[InputRecord]) -> None:
        """Read each operator's state of every record at once (through Spark, a read per lookup value
        would be a job each)."""
        wanted: dict[tuple[int, str, str], set[str]] = {}
        for rec in records:
            for op, side in self.chain(rec):  # every operator whose key column the record carries
                view = self.view(op)
                found = view.lookup(side)
                value = key_text(value_at(rec.values, found[1].source_column or found[1].name)) if found else None
                if found is None or value is None:
                    continue
                for s in [side, *(["right" if side == "left" else "left"] if view.kind == JOIN else [])]:
                    wanted.setdefault((op.operator_id, s, found[0]), set()).add(value)
        for (op_id, side, field_name), values in wanted.items():
            found_op = self.info.operator(op_id)
            if found_op is not None:
                self.history(found_op, side, field_name, values)

    def history(self, op: OperatorInfo, side: str, field_name: str, values: Iterable[str]) -> dict[str, History]:
        """The state rows (last batch) and change feed of each lookup value, read once per value."""
        values = list(values)
        cache = self._histories.setdefault((op.operator_id, side, field_name), {})
        wanted = sorted({v for v in values if v not in cache})
        if wanted:
            src = self.source(op, side)
            try:
                types = dict(self.access.key_fields(src, self.last))
                _, typed = typed_values(types.get(field_name, "string"), wanted)
                query = KeyQuery(field_name, tuple(wanted), tuple(typed.items()))
                rows = query.by_owner(self.access.rows(src, self.last, query))
                changes = query.by_owner(self._changes(op, src, query))
                for v in wanted:
                    cache[v] = History(rows.get(v, []), changes.get(v, []))
            except StateReadError as e:
                for v in wanted:
                    cache[v] = History([], [], f"the read of {src.describe()} failed: {e.message}")
        return {v: cache[v] for v in values}

    def _changes(self, op: OperatorInfo, src: StateSource, query: KeyQuery) -> list[dict[str, Any]]:
        if self.access.has_change_feed(op.operator_id):
            return self.access.changes(src, self.first, self.last, query)
        from statelens.analysis.verdicts.diagnose import replay_states

        batches = [b.batch_id for b in self.info.committed_batches][-MAX_STATE_BATCHES:]
        self.note(
            f"Operator {op.operator_id} has no change feed: its history is its state at batches {batches[0]}-{batches[-1]}."
        )
        history = replay_states(self.access, src, batches, query)
        out: list[dict[str, Any]] = []
        for k in query.keys:  # each key's rows replayed on their own, then known by the key again
            out += [{**c, "_raw": k} for c in history[k]]
        return out

    # ---- other records of the input

    def find(self, source: str, column: str, values: list[str]) -> dict[str, list[InputRecord]] | None:
        """The input records of a source whose column holds each value (None: the input is not searched)."""
        if self.finder is None or not source:
            return None
        cache = self._found.setdefault((source, column), {})
        wanted = sorted({v for v in values if v not in cache})
        if wanted:
            for v in wanted:
                cache[v] = []
            for r in self.finder(source, column, wanted):
                cache.setdefault(r.key, []).append(r)
        return {v: cache.get(v, []) for v in values}

    def sources_of(self, op_id: int, side: str) -> list[str]:
        """The input sources whose records reach an operator's side (through the operators below it)."""
        if self.plan is None or op_id not in self.plan.operators:
            return []
        planned = self.plan.operators[op_id]
        out = [self.scan_source(s) for s in planned.sources.get(side, [])]
        for below in planned.upstream.get(side, []):
            for s in self.plan.operators[below].sides if below in self.plan.operators else []:
                out += self.sources_of(below, s)
        return [s for s in dict.fromkeys(out) if s]

    # ---- watermarks

    def late_mark(self, operator_id: int, batch: int) -> int | None:
        m = self.marks.get(batch, {}).get(operator_id)
        return m.late if m else None

    def trail(self, operator_id: int, side: str | None = None) -> int | None:
        """How far an operator's eviction watermark (a join side's: its state watermark) trails the query's."""
        for b in sorted(self.marks, reverse=True):
            m = self.marks[b].get(operator_id)
            g = self.watermarks.get(b)
            if not m or not g or (not side and self.behind_a_join(operator_id, b)):
                continue
            if side:
                if side in m.cleanup:
                    return g - m.cleanup[side]
            elif m.eviction is not None:
                return g - m.eviction
        return None if side or self.behind_a_join(operator_id, None) else 0

    def release(
        self,
        operator_id: int,
        at_ms: int,
        group: str,
        side: str | None = None,
        what: str = "",
        cause: str = WAITING_FOR_WATERMARK,
    ) -> Waiting:
        """A row waiting in state until the operator's watermark passes ``at_ms`` (its window's end, its
        event time...): the query's watermark that releases it, and the event time that moves it there."""
        trail = self.trail(operator_id, side)
        if trail is None:
            return Waiting(
                operator_id,
                group,
                None,
                None,
                f"{what}: when the watermark evicts it cannot be told without the event log's plan",
                cause,
            )
        wm = at_ms + trail
        delays = dict(self.plan.watermark_delays) if self.plan else {}
        policy = str(self.info.conf.get("spark.sql.streaming.multipleWatermarkPolicy") or "min").lower()
        # several watermarks: the query's is the minimum of theirs (Spark's default), or the maximum
        needs = wm + (max(delays.values()) if policy == "min" else min(delays.values())) if delays else None
        verb = "evicted" if side else "released"  # a join's row leaves the state, a window or group goes out
        text = f"{what}: {verb} once the query's watermark passes {fmt_time(wm)}"
        if trail:
            text += f" (operator {operator_id}'s own watermark, which trails the query's by {fmt_duration(trail)}, then passes {fmt_time(at_ms)})"
        if len(delays) > 1:
            each = ", ".join(f"{c} {fmt_time(wm + d)}" for c, d in sorted(delays.items()))
            text += (
                f", that is once every source's newest event time reaches its own ({each}): the query's watermark is "
                "the minimum of the sources' (spark.sql.streaming.multipleWatermarkPolicy min, as the checkpoint records)"
                if policy == "min"
                else f", that is once any source's newest event time reaches its own ({each}): the query's watermark is "
                "the maximum of the sources' (spark.sql.streaming.multipleWatermarkPolicy max, as the checkpoint records)"
            )
        elif needs is not None:
            (delay,) = delays.values()
            text += f", that is once an event time of {fmt_time(needs)} or later arrives (the watermark trails the newest event time by {fmt_duration(delay)})"
        return Waiting(operator_id, group, wm, needs, text, cause)

    def progress_drops(self, operator_id: int, batch: int) -> int | None:
        if self.drops is None or batch not in self.drops:
            return None
        return self.drops[batch].get(operator_id, 0)

    # ---- one record

    def event_time(self, view: OpView, side: str, values: dict[str, Any]) -> tuple[int | None, Window | None, str | None]:
        """The row's event time at an operator (µs), the window its watermark is on, and the column."""
        col = view.time.get(side)
        if col is not None:
            if col.window is not None:
                if not col.window.column:  # the window's spec without the time it is over
                    return None, col.window, None
                t = event_time_us(value_at(values, col.window.column), self.tz)
                return (t + col.window.shift_us if t is not None else None), col.window, col.window.column
            name = col.source_column or (col.name if col.epoch else None)  # a made time: the record holds it (follow)
            if name:
                t = event_time_us(value_at(values, name), self.tz)
                return (t + col.shift_us if t is not None else None), None, name
        if view.planned:
            return None, None, None  # the plan says this input carries no watermark
        timed = [(k, event_time_us(v, self.tz)) for k, v in values.items() if isinstance(v, (str, dt.datetime))]
        timed = [(k, t) for k, t in timed if t is not None]
        if not timed:
            return None, None, None
        k, t = next(((k, t) for k, t in timed if "time" in k.lower()), timed[0])
        return t, None, k

    def follow(self, rec: InputRecord, records: list[InputRecord], stop_at: int | None = None) -> RecordFate:
        """A record followed from its source up to the sink (``stop_at``: up to that operator, not into it)."""
        chain = self.chain(rec)
        made = self.values_made(rec)
        first_time = None
        if chain:
            t, _, _ = self.event_time(self.view(chain[0][0]), chain[0][1], made)
            first_time = t // 1000 if t is not None else None
        fate = RecordFate(rec, first_time, UNKNOWN, None, rec.batch_id, None)
        fate.match_only = any(side == "right" and self.view(op).join_type == "left_semi" for op, side in chain)
        if rec.batch_id is None or rec.batch_id > self.last:
            why = (
                f"{rec.file_name} is listed by the source, but the batch that read it is no longer in the checkpoint (purged)."
                if rec.batch_id is None
                else f"It arrived in batch {rec.batch_id}, which has not committed: its state is not written yet."
            )
            fate.steps.append(Step(-1, UNKNOWN, rec.batch_id, why))
            fate.cause = Cause(UNKNOWN, None, rec.batch_id, None, rec, why, why=why)
            return fate
        col = rec.column
        aliases = {name: rec.values[col] for name in self.renamed.get(col, ()) if col in rec.values and name not in rec.values}
        computed = self._computed(chain[0]) if chain else frozenset()
        values = {k: v for k, v in {**made, **aliases}.items() if k not in computed}
        flows = [Flow(values, rec.batch_id, computed=computed)]
        last_results: list[StepResult] = []
        below: int | None = None
        probed: list[StepResult] = []  # the next operator's steps, already taken to see whether it holds the rows
        for i, (op, side) in enumerate(chain):
            if op.operator_id == stop_at:
                fate.outcome, fate.operator_id, fate.side = PASSED, op.operator_id, side or None
                fate.contribution = REACHED
                fate.at_batch = min((f.batch for f in flows), default=rec.batch_id)
                return fate
            view = self.view(op)
            stage = behaviour(view.kind).stage  # None: a kind no stage follows (its step says so)
            # the last operator of its path emits the query's output; without a plan, only operator 0 surely does
            final = i == len(chain) - 1 and (self.plan is not None or op.operator_id == 0)
            results = probed or [self.step(stage, view, side, flow, rec, records, below, final) for flow in flows]
            fate.steps += [r.step for r in results]
            fate.waiting += [w for r in results for w in r.waiting]
            if final:
                fate.outputs += [o for r in results for o in r.outputs]
            last_results = results
            flows = [f for r in results for f in r.flows]
            probed = []
            if not flows and i < len(chain) - 1:
                last_next = i + 1 == len(chain) - 1 and (self.plan is not None or chain[i + 1][0].operator_id == 0)
                flows, probed = self._emitted_if_outer(results, view, chain[i + 1], rec, records, last_next)
            below = op.operator_id
            if not flows:
                break
        if stop_at is not None:  # it never reached that operator
            last_results = last_results or []
        if last_results:
            best = min(last_results, key=lambda r: _RANK.get(r.step.outcome, 9))
            s = best.step
            fate.outcome = REACHED_STATE if s.outcome == PASSED else s.outcome
            fate.operator_id, fate.at_batch, fate.side = s.operator_id, s.batch, s.side
        return fate

    def values_made(self, rec: InputRecord) -> dict[str, Any]:
        """A record's values as the query holds them from its source on: with the times the plan makes of its
        numbers (``timestamp_millis(ts) AS ts``) under their names (its state, join condition and event time)."""
        made = self.plan.epoch_times if self.plan is not None else ()
        times = {
            name: epoch.time(value_at(rec.values, epoch.column))
            for name, epoch in made
            if epoch.scan is None or self.scan_source(epoch.scan) == rec.source
        }
        return {**rec.values, **times} if times else rec.values

    def _computed(self, first: tuple[OperatorInfo, str]) -> frozenset[str]:
        """The first operator's key columns its plan computes from the record by an expression (a
        function, ``explode``): the record's columns of those names are not what the state holds."""
        view = self.view(first[0])
        if not view.planned:
            return frozenset()
        return frozenset(
            c.name for c in view.keys.get(first[1], []) if c.source_column is None and c.window is None and c.epoch is None
        )

    def _emitted_if_outer(
        self,
        results: list[StepResult],
        view: OpView,
        nxt: tuple[OperatorInfo, str],
        rec: InputRecord,
        records: list[InputRecord],
        final: bool,
    ) -> tuple[list[Flow], list[StepResult]]:
        """A join of unknown type that evicted the row unmatched: an outer join emitted it null-padded,
        any other dropped it. Where the next operator's state holds it from that batch, it was emitted:
        the rows go on, as an outer join's, with the next operator's steps taken; else none does."""
        maybe = [f for r in results for f in r.if_outer]
        if not maybe:
            return [], []
        nview = self.view(nxt[0])
        probe = [self.step(behaviour(nview.kind).stage, nview, nxt[1], f, rec, records, view.operator_id, final) for f in maybe]
        held = [p.step for p in probe if p.step.outcome in (REACHED_STATE, PASSED)]
        if not held:
            return [], []
        for r in results:
            if r.if_outer:
                r.step.detail += (
                    f" {nview.label.capitalize()}'s state holds it from batch {held[0].batch}: this join emitted it "
                    "null-padded, as an outer join does."
                )
                if r.step.cause is not None:
                    r.step.cause.unless_emitted = ""
        return maybe, probe

    def step(
        self,
        stage: StageLike | None,
        view: OpView,
        side: str,
        flow: Flow,
        rec: InputRecord,
        records: list[InputRecord],
        below: int | None,
        final: bool,
    ) -> StepResult:
        try:
            checked = self.pre_check(view, side, flow, rec, below)
            if isinstance(checked, StepResult):
                return checked
            t_us, window = checked
            if stage is None:  # the registry knows no such kind, or no stage follows it: said, never guessed
                why = f"what {view.label} did with it cannot be told: {unsupported(view.op.operator_name)}"
                cause = Cause(UNKNOWN, view.operator_id, flow.batch, side or None, rec, why, why=why)
                return StepResult(
                    Step(view.operator_id, UNKNOWN, flow.batch, why[0].upper() + why[1:] + ".", side or None, cause=cause)
                )
            return stage.step(self, view, Arrival(side, flow, rec, records, final, t_us, window))
        except StateLensError:
            raise
        except Exception as e:  # a defect: this record's step is unknown, the other records and keys still answer
            if self.strict:
                raise
            why = f"what {view.label} did with it cannot be told: {defect(e)}"
            cause = Cause(UNKNOWN, view.operator_id, flow.batch, side or None, rec, why, why=why)
            return StepResult(
                Step(view.operator_id, UNKNOWN, flow.batch, why[0].upper() + why[1:] + ".", side or None, cause=cause)
            )

    def pre_check(
        self, view: OpView, side: str, flow: Flow, rec: InputRecord, below: int | None
    ) -> StepResult | tuple[int | None, Window | None]:
        """What every operator does before its own: the plan's filters on the way to it (from the source,
        or from the operator ``below``), then its late-row watermark. The step that dropped the row, or
        the row's event time (µs) and window at the operator."""
        op_id, b, sd = view.operator_id, flow.batch, side or None
        path = self.stateless_path(view, rec.source) if below is None else list(view.upstream_filters.get(below, []))
        columns = (self.scan_columns(rec.source) or set()) | set(flow.values) if below is None else None
        for cond in path:
            if isinstance(cond, int):  # a join with a static table
                dropped = self.static_join(view, side, flow, rec, cond)
                if dropped is not None:
                    return dropped
                if columns is not None:
                    columns |= set(flow.values)
                continue
            from statelens.analysis.plan.predicates import filter_passes
            from statelens.analysis.plan.query_plan import readable

            verdict = filter_passes(cond, flow.values, columns)
            shown = readable(cond)
            if verdict.passes is False:
                detail = f"Removed by the filter `{shown}` before {view.label} in batch {b}."
                short = f"its {noun(rec)} ({record_text(rec)}) was removed by the filter `{shown}` before operator {op_id} in batch {b}"
                cause = Cause(FILTERED, op_id, b, sd, rec, short, predicate=cond)
                return StepResult(Step(op_id, FILTERED, b, detail, sd, cause=cause))
            if verdict.passes is None and f"`{shown}` ({verdict.why})" not in flow.unevaluated:
                flow.unevaluated.append(f"`{shown}` ({verdict.why})")
        t_us, window, column = self.event_time(view, side, flow.values)
        late = self.late_mark(op_id, b)
        session_unknown = view.kind == SESSION and window is None  # its gap is the plan's: the session stage tells
        if late is not None and t_us is not None and not session_unknown:
            ends = [e for _, e in window.of(t_us // 1000)] if window else [t_us // 1000]
            behind = all(e * 1000 <= late * 1000 for e in ends) if window else t_us <= late * 1000
            if behind and op_id in self.unsure:
                why = f"it is behind {view.label}'s late-row watermark, but whether that operator is on its path cannot be told without the event log"
                return StepResult(
                    Step(
                        op_id,
                        UNKNOWN,
                        b,
                        why[0].upper() + why[1:] + ".",
                        sd,
                        cause=Cause(UNKNOWN, op_id, b, sd, rec, why, why=why),
                    )
                )
            if behind and self.keeps_closed_windows(view, side, flow):
                behind = False  # complete mode: the operator evicts nothing and drops no late row
            if behind and window is None and view.windowed:  # without the plan: its window's size is not known
                flow.maybe_late = (
                    f"its event time is behind {view.label}'s late-row watermark, but the operator groups by time windows: "
                    "a row is late only when its window's end is, and the window's size is in the query's plan (the event log)"
                )
                if self.progress_drops(op_id, b):  # the progress counts rows dropped as late then: absent from state, it was one
                    flow.late_if_absent = self._late(view, side, flow, rec, t_us, window, column, late)
            elif behind and self.behind_a_join(op_id, b):
                flow.maybe_late = (
                    f"it is behind {view.label}'s late-row watermark as the query's watermarks give it, but a "
                    "stream-stream join before it holds that watermark back by its time range, which the query's "
                    "event log tells"
                )
            elif behind:
                return StepResult(self._late(view, side, flow, rec, t_us, window, column, late))
        elif late is not None and t_us is None and column is None and (view.time.get(side) is not None or self.untimed(view)):
            # the plan puts a watermark on this input, over a time it does not trace to the record (Python
            # code or an expression computes it), or, without the plan, no value of the record is a time:
            # its lateness is not judged, unless the progress shows the operator dropped no row as late in
            # this batch (or it drops none: complete mode)
            drops = self.progress_drops(op_id, b)
            if drops != 0 and not self.keeps_closed_windows(view, side, flow):
                counted = (
                    f"; the progress counts {drops:,} row(s) operator {op_id} dropped by the watermark in batch {b}: it may be one of them"
                    if drops
                    else ""
                )
                unjudged = (
                    f"its event time at {view.label} is computed by code State Lens does not run"
                    if view.planned
                    else self.no_time(view)
                )
                flow.maybe_late = f"{unjudged}, so whether it was behind the operator's late-row watermark {fmt_time(late)} cannot be told{counted}"
        return t_us, window

    def untimed(self, view: OpView) -> bool:
        """Without the plan, the one operator a record with no time-like value reaches: its lateness is not
        judged (with several, its way through them is inferred, and a record not found says so)."""
        return not view.planned and len(self.info.operators) == 1

    def no_time(self, view: OpView) -> str:
        """Why a record none of whose values is a time has no event time at an operator, without the plan."""
        return (
            f"none of its values is a time, and how the query computes its event time at {view.label} is in the "
            "query's plan (the event log)"
        )

    def keeps_closed_windows(self, view: OpView, side: str, flow: Flow) -> bool:
        """An aggregation in complete mode (the plan's), or, without the plan, one whose state at the
        last batch still holds a window of this group its eviction watermark had passed: it evicts
        nothing (complete mode keeps every group), and drops no late row."""
        if view.kind != AGGREGATION:
            return False
        if view.output_mode is not None:
            return view.output_mode.lower() == "complete"
        found = view.lookup(side)
        mark = self.marks.get(self.last, {}).get(view.operator_id)
        value = key_text(value_at(flow.values, found[1].source_column or found[1].name)) if found else None
        if found is None or value is None or mark is None or mark.eviction is None:
            return False
        held = self.history(view.op, side, found[0], [value]).get(value)
        ends = [w[1] for r in (held.rows if held else []) if (w := window_of_key(r.get("key") or {})) is not None]
        return any(end <= mark.eviction for end in ends)

    def behind_a_join(self, operator_id: int, batch: int | None) -> bool:
        """An operator after a stream-stream join, whose watermarks in this batch were worked out without
        the plan: its late-row watermark trails the query's by the join's time range, which only the
        plan gives (Spark numbers the operators from the sink: a join after it has a larger id)."""
        return (
            batch not in self.planned
            and self.plan is None
            and any(o.is_join and o.operator_id > operator_id for o in self.info.operators)
        )

    def static_join(self, view: OpView, side: str, flow: Flow, rec: InputRecord, node: int) -> StepResult | None:
        """A row meeting a join with a static table on its way to an operator: it goes on (with the table's
        columns where the join adds them: its match's, nulls where an outer join keeps it unmatched), or
        is dropped (no match in an inner or semi join; a match in an anti join). A table that could not
        be read, or a join this walk does not follow, leaves its fate unknown."""
        assert self.plan is not None
        join = self.plan.batch_joins[node]
        mine = next((s for s, scans in join.scans.items() if any(self.scan_source(x) == rec.source for x in scans)), None)
        if mine is None:
            return None
        other = "right" if mine == "left" else "left"
        table = next((self.static_tables[x] for x in join.scans[other] if x in self.static_tables), None)
        op_id, b, sd = view.operator_id, flow.batch, side or None
        kind = (join.join_type or "").replace("_", " ")
        behaviour = join.behaviour(mine)
        why = ""
        if behaviour is None:
            why = (
                f"on the condition `{join.condition}` besides its keys, which this walk does not evaluate"
                if join.condition
                else f"which this walk does not follow (the stream on its {mine} side)"
            )
        elif table is None or table.rows is None:
            why = f"and {table.label} cannot be read: {table.why}" if table else "which is not among the plan's scans"
        if why:
            why = f"its {noun(rec)} ({record_text(rec)}) meets a {kind} join with a static table before {view.label}, {why}"
            cause = Cause(UNKNOWN, op_id, b, sd, rec, why, why=why, static_table=table.label if table else None)
            return StepResult(Step(op_id, UNKNOWN, b, why[0].upper() + why[1:] + ".", sd, cause=cause))
        assert behaviour is not None and table is not None
        values = [value_at(flow.values, k) for k in join.keys[mine]]
        found = table.matching(join.keys[other], values)
        shown = ", ".join(f"{k} {key_text(v)}" for k, v in zip(join.keys[mine], values, strict=False))
        if found and behaviour.keeps_matched:
            if len(found) > 1 and behaviour.adds_columns:
                self.note(f"{shown} has {len(found)} rows in {table.label}: the first is followed.")
            if behaviour.adds_columns:
                flow.values.update({c: v for c, v in found[0].items() if c not in flow.values or c not in join.keys[other]})
            return None
        if not found and behaviour.keeps_unmatched:
            if behaviour.adds_columns:
                flow.values.update({c: None for c in join.output[other] if c not in flow.values})
            return None
        if found:  # an anti join drops a row the table holds: the table filters it out
            detail = (
                f"its {noun(rec)} ({record_text(rec)}) has {shown}, which {table.label} holds: the {kind} join with it "
                f"before operator {op_id} removed the {noun(rec)} in batch {b}"
            )
            cause = Cause(FILTERED, op_id, b, sd, rec, detail, static_table=table.label)
            return StepResult(Step(op_id, FILTERED, b, detail[0].upper() + detail[1:] + ".", sd, cause=cause))
        detail = (
            f"its {noun(rec)} ({record_text(rec)}) has {shown}, which no row of {table.label} holds: the {kind} join "
            f"with it before operator {op_id} dropped the {noun(rec)} in batch {b}"
        )
        cause = Cause(NO_MATCH_IN_INPUT, op_id, b, sd, rec, detail, static_table=table.label)
        return StepResult(Step(op_id, NO_STATIC_MATCH, b, detail[0].upper() + detail[1:] + ".", sd, cause=cause))

    def _late(
        self,
        view: OpView,
        side: str,
        flow: Flow,
        rec: InputRecord,
        t_us: int,
        window: Window | None,
        column: str | None,
        late: int,
    ) -> Step:
        b, op_id = flow.batch, view.operator_id
        t = t_us // 1000
        what = f"its {column} {fmt_time(t)}" if column else f"its event time {fmt_time(t)}"
        if window is not None:
            s, e = window.of(t)[-1]
            kind = "session" if window.session else window_text(s, e)
            what = (
                f"its session ({fmt_time(s)[:-4]} plus the {fmt_duration(window.size_ms)} gap: it ends at {fmt_time(e)})"
                if window.session
                else f"its {kind} (from {column} {fmt_time(t)}), whose end"
            )
        drops = self.progress_drops(op_id, b)
        source = "as the event log's plan states" if b in self.planned else "as worked out from the checkpoint's watermarks"
        detail = (
            f"Dropped as late by {view.label} in batch {b}: {what} is at or before the operator's late-row watermark "
            f"{fmt_time(late)} ({source})."
        )
        evidence = [
            {"operator_id": op_id, "batch_id": b, "late_row_watermark": fmt_time(late), "rows_dropped_by_watermark": drops}
        ]
        if drops is None:
            detail += " No progress of this batch was given (an event log) to confirm the drop."
        elif drops:
            detail += f" The progress confirms it: operator {op_id} dropped {drops:,} row(s) by the watermark in batch {b}."
        else:
            detail += f" But the progress shows operator {op_id} dropped no rows by the watermark in batch {b}: the two disagree."
        short = (
            f"its {noun(rec)} ({record_text(rec)}, event time {fmt_time(t)[:-4]}) was dropped as late by "
            f"operator {op_id} in batch {b}, behind its late-row watermark {fmt_time(late)[:-4]}"
        )
        cause = Cause(DROPPED_AS_LATE, op_id, b, side or None, rec, short)
        return Step(op_id, DROPPED_AS_LATE, b, detail, side or None, evidence=evidence, cause=cause)


_RANK = {
    REACHED_STATE: 0,
    PASSED: 0,
    "evicted_unmatched": 1,
    "condition_not_met": 1,
    DROPPED_AS_LATE: 2,
    "dropped_as_duplicate": 3,
    FILTERED: 4,
    NO_STATIC_MATCH: 4,
    "not_found_in_state": 5,
    UNKNOWN: 6,
}


def window_of_key(key: dict[str, Any]) -> tuple[int, int] | None:
    """The window (or session) a state key or value holds."""
    for v in key.values():
        if isinstance(v, dict) and to_ms(v.get("start")) is not None and to_ms(v.get("end")) is not None:
            return to_ms(v["start"]) or 0, to_ms(v["end"]) or 0
    return None
