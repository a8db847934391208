"""A key's fate through the whole query: each of its input records, operator by operator, to the output.

Pure: state is asked through ``StateAccess``; the records come from ``spark_io.gather.inputs`` (the files
each batch read, searched for the key). Each record is followed in plan order, from its source up
to the sink (Spark numbers stateful operators from the sink: the last is 0):

* **filtered** before an operator when a filter of the plan between the source and it rejects the
  record (or, when none can be evaluated, when it is in the input, not late, not a duplicate and
  never in the operator's state: the filters are quoted);
* **dropped as late** by the first operator whose late-row watermark in the record's batch it is
  at or behind (the operator's own watermark, as the event log's plan states it per batch, else as
  ``PropagateWatermarkSimulator`` works it out; a window's end for a windowed aggregation), with the
  progress' ``numRowsDroppedByWatermark`` of that operator and batch as the confirmation;
* **dropped as a duplicate** by a dedup whose state held the record's dedup key (from an earlier
  batch, or an earlier record of the same batch);
* a join: **matched** (the batch its row became matched; the joined row goes on downstream),
  **condition not met** (the other side held the key, no pair passed the condition), evicted
  unmatched (**emitted** null-padded on a preserved side of an outer join), or still **waiting**;
* an aggregation or session window: the **state row** (group, window) it became, then **emitted**
  (append: the batch the watermark evicted it; update: the batch it changed; complete: every batch)
  or still **waiting** (the watermark that releases it, and the event time that moves it there).

The outcome for the key: every group or row of it that reached the output (the last operator of
the record's path), each with its batch; what still waits; and, with a file sink, the key's rows in
the files each batch wrote.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from analysis.errors import StateReadError
from analysis.inputs import InputRecord, InputSearch, event_time_us, filter_verdict
from analysis.key_format import fmt_duration, jsonable, to_ms
from analysis.key_verdicts import (
    AGGREGATION,
    DEDUP,
    DEDUP_WITHIN,
    GROUP_STATE,
    JOIN,
    PRESERVED,
    SESSION,
    TWS,
    operator_kind,
)
from analysis.model import JOIN_ROW_FIELDS, CheckpointInfo, OperatorInfo, StateSource, sources_of
from analysis.query_plan import Column, OperatorWatermarks, QueryPlan, Window
from analysis.state_access import KeyQuery, StateAccess, key_text, typed_values

DROPPED_AS_LATE = "dropped_as_late"
DROPPED_AS_DUPLICATE = "dropped_as_duplicate"
CONDITION_NOT_MET = "condition_not_met"
FILTERED = "filtered"
REACHED_STATE = "reached_state"
NOT_FOUND = "not_found_in_state"
UNKNOWN = "unknown"
PASSED = "passed"  # a step only: the operator let the row through to the next one
# where a key's rows left the query
EMITTED, EMITTED_UNMATCHED, MATCHED, WRITTEN = "emitted", "emitted_unmatched", "matched", "written"
REASONS = {
    DROPPED_AS_LATE: "late_record",
    DROPPED_AS_DUPLICATE: "duplicate",
    CONDITION_NOT_MET: "condition_not_met",
    FILTERED: "filtered",
}
KIND_WORDS = {
    JOIN: "stream-stream join",
    AGGREGATION: "aggregation",
    DEDUP: "dropDuplicates",
    DEDUP_WITHIN: "dropDuplicatesWithinWatermark",
    SESSION: "session window",
    GROUP_STATE: "group state",
    TWS: "transformWithState",
}
MAX_STATE_BATCHES = 30  # history without a change feed: the state at this many retained batches


def fmt_time(ms: int | None) -> str:
    if ms is None:
        return "no time"
    t = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S") + (f".{ms % 1000:03d}" if ms % 1000 else "") + " UTC"


def _clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S")


def window_text(start: int, end: int) -> str:
    return f"window {fmt_time(start)[:-4]}-{_clock(end)}"


def group_text(key: dict[str, Any] | None) -> str:
    """A state key as people read it: ``window 2026-01-01 00:00:00-00:05:00, user_id user-0``."""
    parts = []
    for k, v in (key or {}).items():
        if isinstance(v, dict) and to_ms(v.get("start")) is not None and to_ms(v.get("end")) is not None:
            parts.append(window_text(to_ms(v["start"]) or 0, to_ms(v["end"]) or 0))
        elif k not in JOIN_ROW_FIELDS:
            parts.append(f"{k} {key_text(v)}")
    return ", ".join(parts)


# --------------------------------------------------------------------------- results


@dataclass
class Step:
    """What one operator did with one record (or with the row it became upstream)."""

    operator_id: int
    outcome: str  # passed | reached_state | dropped_as_late | dropped_as_duplicate | condition_not_met | filtered | ...
    batch: int | None
    detail: str
    side: str | None = None
    group: str | None = None  # the state row it became (window, group, join row)
    evidence: list[dict[str, Any]] = field(default_factory=list)  # the state rows, the progress figures

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "outcome": self.outcome,
            "batch_id": self.batch,
            "side": self.side,
            "group": self.group,
            "detail": self.detail,
            "evidence": jsonable(self.evidence),
        }


@dataclass
class RecordFate:
    record: InputRecord
    event_time_ms: int | None
    outcome: str
    operator_id: int | None
    at_batch: int | None
    side: str | None
    steps: list[Step] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.record.source,
            "batch_id": self.record.batch_id,
            "file": self.record.file,
            "row": self.record.row,
            "event_time": fmt_time(self.event_time_ms) if self.event_time_ms is not None else None,
            "event_time_ms": self.event_time_ms,
            "outcome": self.outcome,
            "operator_id": self.operator_id,
            "at_batch": self.at_batch,
            "side": self.side,
            "values": jsonable(self.record.values),
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(frozen=True)
class Output:
    operator_id: int | None  # None: found in the sink's files
    group: str
    batch_id: int | None
    kind: str  # emitted | emitted_unmatched | matched | written
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "group": self.group,
            "batch_id": self.batch_id,
            "kind": self.kind,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Waiting:
    operator_id: int
    group: str
    released_at_watermark: int | None  # the query's watermark that releases it (ms); None: nothing does
    needs_event_time: int | None = None  # the newest event time that moves the watermark there (ms)
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "group": self.group,
            "released_at_watermark": self.released_at_watermark,
            "needs_event_time": self.needs_event_time,
            "detail": self.detail,
        }


@dataclass
class KeyFate:
    key: str
    input_searched: bool
    input_note: str | None
    records: list[RecordFate] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    near: list[InputRecord] = field(default_factory=list)  # input records whose key only looks like this one
    notes: list[str] = field(default_factory=list)
    verdict: str | None = None  # the key's verdict when the fate decides it (dropped_as_late, never_in_input)
    reason: str | None = None  # late_record | duplicate | condition_not_met | filtered
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_searched": self.input_searched,
            "input_note": self.input_note,
            "records": [r.to_dict() for r in self.records],
            "outputs": [o.to_dict() for o in self.outputs],
            "waiting": [w.to_dict() for w in self.waiting],
            "near_misses_in_input": [
                {"key": r.values.get(r.column), "reason": r.near, "source": r.source, "batch_id": r.batch_id, "file": r.file}
                for r in self.near
            ],
            "notes": self.notes,
            "summary": self.summary,
        }


# --------------------------------------------------------------------------- operators as the walk sees them


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

    @property
    def operator_id(self) -> int:
        return self.op.operator_id

    @property
    def label(self) -> str:
        return f"operator {self.operator_id} ({KIND_WORDS.get(self.kind, self.op.operator_name)})"

    def lookup(self, side: str) -> tuple[str, Column] | None:
        """The state key field a record is looked up by, and the column whose value it takes."""
        for i, c in enumerate(self.keys.get(side, [])):
            if c.window is None and c.name not in ("window", "session_window"):
                return (f"field{i}" if self.kind == JOIN else c.name), c
        return None


@dataclass
class Flow:
    """A row on its way up the plan: a record, or the joined row it became."""

    values: dict[str, Any]  # by column name (a joined row: both sides' columns)
    batch: int  # the batch it reaches the next operator in


@dataclass
class History:
    rows: list[dict[str, Any]]  # state rows of the lookup value at the last batch
    changes: list[dict[str, Any]]  # change-feed rows (or state replayed batch by batch)
    error: str | None = None


@dataclass
class StepResult:
    step: Step
    flows: list[Flow] = field(default_factory=list)  # rows it sends on to the next operator
    outputs: list[Output] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)


@dataclass
class SideRow:
    """One row of a join side, followed through the change feed."""

    value: dict[str, Any]
    added: int
    matched_at: int | None = None
    removed: int | None = None


def side_rows(changes: list[dict[str, Any]]) -> list[SideRow]:
    """A join side's rows of one key over the change feed: when each came, matched and left.

    Rows are known by their value (removing a row moves the last index into the freed one, so an
    index is not an identity); a delete carries no value: it removes what its index held."""
    at: dict[str, dict[str, Any]] = {}
    rows: list[SideRow] = []
    live: dict[str, SideRow] = {}
    for b in sorted({c["batch_id"] for c in changes}):
        for c in (c for c in changes if c["batch_id"] == b):
            idx = json.dumps(jsonable(c.get("key")), sort_keys=True, default=str)
            if c["change_type"] == "delete" or c.get("value") is None:
                at.pop(idx, None)
            else:
                at[idx] = c["value"]
        present = {_value_id(v): v for v in at.values()}
        for vid, v in present.items():
            r = live.get(vid)
            if r is None:
                r = live[vid] = SideRow(v, b)
                rows.append(r)
            if v.get("matched") and r.matched_at is None:
                r.matched_at = b
        for vid in [v for v in live if v not in present]:
            live.pop(vid).removed = b
    return rows


def _value_id(value: dict[str, Any] | None) -> str:
    return json.dumps(jsonable({k: v for k, v in (value or {}).items() if k != "matched"}), sort_keys=True, default=str)


def same_value(state_value: Any, record_value: Any, tz: str) -> bool:
    """Whether a state row's field holds what the input record's column holds."""
    if state_value is None or record_value is None:
        return state_value is None and record_value is None
    if isinstance(state_value, dt.datetime):
        t = event_time_us(record_value, tz)
        return t is not None and t == event_time_us(state_value, tz)
    if isinstance(state_value, (int, float)) and not isinstance(state_value, bool):
        try:
            return float(state_value) == float(record_value)
        except (TypeError, ValueError):
            return False
    return key_text(state_value) == key_text(record_value)


def covering(key: dict[str, Any], t_ms: int) -> tuple[int, int] | None:
    """The window or session of a state key that holds an event time."""
    for v in key.values():
        if isinstance(v, dict) and "start" in v and "end" in v:
            s, e = to_ms(v["start"]), to_ms(v["end"])
            if s is not None and e is not None and s <= t_ms < e:
                return s, e
    return None


def _window_of_key(key: dict[str, Any]) -> tuple[int, int] | None:
    for v in key.values():
        if isinstance(v, dict) and to_ms(v.get("start")) is not None and to_ms(v.get("end")) is not None:
            return to_ms(v["start"]) or 0, to_ms(v["end"]) or 0
    return None


# --------------------------------------------------------------------------- the walk


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
    ) -> None:
        self.access = access
        self.asked = asked  # the keys asked about (a reader of part of a store reads their partition first)
        self.info = info
        self.plan = plan
        self.marks = marks
        self.drops = drops  # batch -> operator -> rows dropped by the watermark (None: no progress read)
        self.join_type = join_type
        self.source_names = source_names
        self.tz = time_zone
        self.planned = set(planned)  # batches whose watermarks the event log's plan states
        committed = [b.batch_id for b in info.committed_batches]
        self.first, self.last = committed[0], committed[-1]
        self.watermarks = {b.batch_id: b.watermark_ms for b in info.batches}
        self._histories: dict[tuple[int, str, str], dict[str, History]] = {}
        self._views: dict[int, OpView] = {}
        self._chains: dict[tuple[str, frozenset[str]], list[tuple[OperatorInfo, str]]] = {}
        self.notes: list[str] = []

    # ---- operators

    def view(self, op: OperatorInfo) -> OpView:
        if op.operator_id not in self._views:
            self._views[op.operator_id] = self._view(op)
        return self._views[op.operator_id]

    def _view(self, op: OperatorInfo) -> OpView:
        kind = operator_kind(op.operator_name)
        planned = self.plan.operators.get(op.operator_id) if self.plan else None
        if planned is not None and self.plan is not None:
            keys = {"": planned.keys} if kind != JOIN else {"left": planned.keys, "right": planned.right_keys}
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
            )
        sides = ["left", "right"] if kind == JOIN else [""]
        keys = {}
        for side in sides:
            src = self.source(op, side)
            fields = self.access.key_fields(src, self.last)
            named = self.access.key_columns(src, self.last, self.asked) if kind == JOIN else {}
            keys[side] = [Column(n, named.get(n, n)) for n, _ in fields]
        return OpView(op, kind, keys, dict.fromkeys(sides), join_type=self.join_type)

    def scan_source(self, scan_id: int) -> str:
        """The checkpoint's source a plan's scan reads (by the folder in its Location)."""
        loc = self.plan.scans[scan_id].location if self.plan else ""
        for name in self.source_names.values():
            if name and f"/{name}/" in loc:
                return name
        return ""

    def filters(self, view: OpView, source: str) -> list[str]:
        """The plan's filters between a source and an operator."""
        return [c for scan, conds in view.filters.items() if self.scan_source(scan) == source for c in conds]

    def source(self, op: OperatorInfo, side: str) -> StateSource:
        if side:
            return StateSource(op.operator_id, store_name=op.join_rows_store(side))
        if operator_kind(op.operator_name) == TWS:
            return sources_of(op)[0]
        return StateSource(op.operator_id, store_name=op.stores[0].store_name if op.stores else None)

    def chain(self, rec: InputRecord) -> list[tuple[OperatorInfo, str]]:
        """The operators a record passes, from its source up to the sink, each with the side it enters by."""
        k = (rec.source, frozenset(rec.values))
        if k not in self._chains:
            self._chains[k] = self._chain(rec)
        return self._chains[k]

    def _chain(self, rec: InputRecord) -> list[tuple[OperatorInfo, str]]:
        if self.plan is not None:
            scan = next((s for s in self.plan.scans if self.scan_source(s) == rec.source), None)
            if scan is not None:
                out = []
                for planned, side in self.plan.chain(scan):
                    op = self.info.operator(planned.operator_id)
                    if op is not None:
                        out.append((op, side))
                return out
        out = []
        for op in sorted(self.info.operators, key=lambda o: -o.operator_id):  # no plan: a chain, last id first
            side = ""
            if op.is_join:
                fit = {
                    s: len(set(self.access.value_fields(self.source(op, s), self.last)) & set(rec.values))
                    for s in ("left", "right")
                }
                side = max(fit, key=lambda s: fit[s])
            out.append((op, side))
        return out

    # ---- state

    def prefetch(self, records: list[InputRecord]) -> None:
        """Read each operator's state of every record at once (through Spark, a read per lookup value
        would be a job each)."""
        wanted: dict[tuple[int, str, str], set[str]] = {}
        for rec in records:
            for op, side in self.chain(rec):  # every operator whose key column the record carries
                view = self.view(op)
                found = view.lookup(side)
                value = key_text(rec.values.get(found[1].source_column or found[1].name)) if found else None
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
                rows = self.access.rows(src, self.last, query)
                changes = self._changes(op, src, query)
                for v in wanted:
                    cache[v] = History(
                        [r for r in rows if v in query.owners(r["_raw"])],
                        [c for c in changes if v in query.owners(c["_raw"])],
                    )
            except StateReadError as e:
                for v in wanted:
                    cache[v] = History([], [], f"the read of {src.describe()} failed: {e.message}")
        return {v: cache[v] for v in values}

    def _changes(self, op: OperatorInfo, src: StateSource, query: KeyQuery) -> list[dict[str, Any]]:
        if self.access.has_change_feed(op.operator_id):
            return self.access.changes(src, self.first, self.last, query)
        from analysis.diagnose import replay_as_changes

        batches = [b.batch_id for b in self.info.committed_batches][-MAX_STATE_BATCHES:]
        note = f"Operator {op.operator_id} has no change feed: its history is its state at batches {batches[0]}-{batches[-1]}."
        if note not in self.notes:
            self.notes.append(note)
        return replay_as_changes([(b, self.access.rows(src, b, query)) for b in batches])

    # ---- watermarks

    def late_mark(self, operator_id: int, batch: int) -> int | None:
        m = self.marks.get(batch, {}).get(operator_id)
        return m.late if m else None

    def trail(self, operator_id: int, side: str | None = None) -> int | None:
        """How far an operator's eviction watermark (a join side's: its state watermark) trails the query's."""
        for b in sorted(self.marks, reverse=True):
            m = self.marks[b].get(operator_id)
            g = self.watermarks.get(b)
            if not m or not g:
                continue
            if side:
                if side in m.cleanup:
                    return g - m.cleanup[side]
            elif m.eviction is not None:
                return g - m.eviction
        return None if side else 0

    def delay(self) -> int | None:
        """The watermark's delay behind the newest event time (one watermark, or the largest of several)."""
        delays = list(self.plan.watermark_delays.values()) if self.plan else []
        return max(delays) if delays else None

    def release(self, operator_id: int, at_ms: int, group: str, side: str | None = None, what: str = "") -> Waiting:
        """A row waiting in state until the operator's watermark passes ``at_ms``."""
        trail = self.trail(operator_id, side)
        if trail is None:
            return Waiting(
                operator_id,
                group,
                None,
                None,
                f"{what}: when the watermark evicts it cannot be told without the event log's plan",
            )
        wm = at_ms + trail
        delay = self.delay()
        needs = wm + delay if delay is not None else None
        text = f"{what}: released once the query's watermark passes {fmt_time(wm)}"
        if needs is not None:
            text += f", that is once an event time of {fmt_time(needs)} or later arrives (the watermark trails the newest event time by {fmt_duration(delay or 0)})"
        return Waiting(operator_id, group, wm, needs, text)

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
                return event_time_us(values.get(col.window.column), self.tz), col.window, col.window.column
            if col.source_column:
                return event_time_us(values.get(col.source_column), self.tz), None, col.source_column
        if self.plan is not None and view.op.operator_id in self.plan.operators:
            return None, None, None  # the plan says this input carries no watermark
        timed = [(k, event_time_us(v, self.tz)) for k, v in values.items() if isinstance(v, (str, dt.datetime))]
        timed = [(k, t) for k, t in timed if t is not None]
        if not timed:
            return None, None, None
        k, t = next(((k, t) for k, t in timed if "time" in k.lower()), timed[0])
        return t, None, k

    def follow(self, rec: InputRecord, records: list[InputRecord]) -> tuple[RecordFate, list[Output], list[Waiting]]:
        chain = self.chain(rec)
        first_time = None
        if chain:
            t, _, _ = self.event_time(self.view(chain[0][0]), chain[0][1], rec.values)
            first_time = t // 1000 if t is not None else None
        fate = RecordFate(rec, first_time, UNKNOWN, None, rec.batch_id, None)
        outputs: list[Output] = []
        waiting: list[Waiting] = []
        if rec.batch_id is None:
            fate.steps.append(
                Step(
                    -1,
                    UNKNOWN,
                    None,
                    f"{rec.file_name} is listed by the source, but the batch that read it is no longer in the checkpoint (purged).",
                )
            )
            return fate, outputs, waiting
        if rec.batch_id > self.last:
            fate.steps.append(
                Step(
                    -1,
                    UNKNOWN,
                    rec.batch_id,
                    f"It arrived in batch {rec.batch_id}, which has not committed: its state is not written yet.",
                )
            )
            return fate, outputs, waiting
        flows = [Flow(dict(rec.values), rec.batch_id)]
        last_results: list[StepResult] = []
        for i, (op, side) in enumerate(chain):
            view = self.view(op)
            results = [self.step(view, side, flow, rec, records, first=i == 0, final=i == len(chain) - 1) for flow in flows]
            fate.steps += [r.step for r in results]
            waiting += [w for r in results for w in r.waiting]
            if i == len(chain) - 1:
                outputs += [o for r in results for o in r.outputs]
            last_results = results
            flows = [f for r in results for f in r.flows]
            if not flows:
                break
        if last_results:
            best = min(last_results, key=lambda r: _RANK.get(r.step.outcome, 9))
            s = best.step
            fate.outcome = REACHED_STATE if s.outcome == PASSED else s.outcome
            fate.operator_id, fate.at_batch, fate.side = s.operator_id, s.batch, s.side
        return fate, outputs, waiting

    def step(
        self, view: OpView, side: str, flow: Flow, rec: InputRecord, records: list[InputRecord], first: bool, final: bool
    ) -> StepResult:
        op_id, b = view.operator_id, flow.batch
        sd = side or None
        # 1. the plan's filters between the source and this operator
        conditions = self.filters(view, rec.source) if first else []
        for cond in conditions:
            if filter_verdict(cond, flow.values) is False:
                return StepResult(Step(op_id, FILTERED, b, f"The filter `{cond}` before {view.label} rejects it.", sd))
        # 2. late: at or behind the operator's late-row watermark in this batch
        t_us, window, column = self.event_time(view, side, flow.values)
        late = self.late_mark(op_id, b)
        if late is not None and t_us is not None:
            ends = [e for _, e in window.of(t_us // 1000)] if window else [t_us // 1000]
            behind = all(e * 1000 <= late * 1000 for e in ends) if window else t_us <= late * 1000
            if behind:
                return StepResult(self._late(view, side, flow, t_us, window, column, late))
        kind = view.kind
        if kind in (DEDUP, DEDUP_WITHIN):
            return self._dedup(view, flow, rec, records, final)
        if kind == JOIN:
            return self._join(view, side, flow, final, t_us)
        if kind in (AGGREGATION, SESSION):
            return self._aggregate(view, flow, rec, t_us, window)
        return self._group(view, flow, rec)

    def _late(self, view: OpView, side: str, flow: Flow, t_us: int, window: Window | None, column: str | None, late: int) -> Step:
        b, op_id = flow.batch, view.operator_id
        t = t_us // 1000
        what = f"its {column} {fmt_time(t)}" if column else f"its event time {fmt_time(t)}"
        if window is not None:
            s, e = window.of(t)[-1]
            what = f"its {window_text(s, e)} (from {column} {fmt_time(t)}), whose end"
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
        return Step(op_id, DROPPED_AS_LATE, b, detail, side or None, evidence=evidence)

    def _not_found(self, view: OpView, flow: Flow, rec: InputRecord, what: str, side: str | None = None) -> StepResult:
        """Not in the operator's state, not late, not a duplicate: filtered on the way when the plan has filters."""
        conditions = [c for c in self.filters(view, rec.source) if not c.startswith("isnotnull(")]
        if conditions:
            shown = "; ".join(f"`{c}`" for c in conditions)
            return StepResult(
                Step(
                    view.operator_id,
                    FILTERED,
                    flow.batch,
                    f"{what} is not in the state of {view.label}, and it was not late: "
                    f"a filter between its source and the operator removed it ({shown}).",
                    side,
                )
            )
        return StepResult(
            Step(
                view.operator_id,
                NOT_FOUND,
                flow.batch,
                f"{what} is not in the state of {view.label} after batch {flow.batch}, and it was not late.",
                side,
            )
        )

    def _missing_history(self, view: OpView, flow: Flow, hist: History, side: str | None = None) -> StepResult | None:
        if hist.error:
            return StepResult(Step(view.operator_id, UNKNOWN, flow.batch, f"Unknown: {hist.error}", side))
        if flow.batch < self.first:
            return StepResult(
                Step(
                    view.operator_id,
                    UNKNOWN,
                    flow.batch,
                    f"Batch {flow.batch} is older than the oldest retained batch ({self.first}): its state was purged.",
                    side,
                )
            )
        return None

    def _state_of(
        self, view: OpView, side: str, flow: Flow, sides: tuple[str, ...] = ("",)
    ) -> tuple[Column, str, list[History]] | StepResult:
        """The key column an operator looks the row up by, the row's value of it, and the state (rows
        and history) of that value on each of ``sides``; or the step that says why it cannot be told."""
        op_id, b, sd = view.operator_id, flow.batch, side or None
        found = view.lookup(side)
        if not found:
            whose = f"the {side} side's key" if side else "the key"
            return StepResult(
                Step(op_id, UNKNOWN, b, f"{whose.capitalize()} of {view.label} has no column to look the row up by.", sd)
            )
        field_name, col = found
        value = key_text(flow.values.get(col.source_column or col.name))
        if value is None:
            return StepResult(Step(op_id, NOT_FOUND, b, f"The record has no {col.source_column or col.name}.", sd))
        hists = [self.history(view.op, s, field_name, [value])[value] for s in sides]
        for h in hists:
            missing = self._missing_history(view, flow, h, sd)
            if missing:
                return missing
        return col, value, hists

    # ---- dedup

    def _dedup(self, view: OpView, flow: Flow, rec: InputRecord, records: list[InputRecord], final: bool) -> StepResult:
        op_id, b = view.operator_id, flow.batch
        cols = view.keys.get("", [])
        state = self._state_of(view, "", flow)
        if isinstance(state, StepResult):
            return state
        _, _, [hist] = state
        wanted = {c.name: flow.values.get(c.source_column or c.name) for c in cols}
        mine = [
            c
            for c in hist.changes
            if all(same_value(v, wanted[k], self.tz) for k, v in (c.get("key") or {}).items() if k in wanted)
        ]
        dk = ", ".join(f"{k} {key_text(v)}" for k, v in wanted.items())
        present_from: int | None = None
        for c in sorted(mine, key=lambda c: c["batch_id"]):
            if c["batch_id"] > b:
                break
            if c["change_type"] == "update" and present_from is None:
                present_from = c["batch_id"]
            elif c["change_type"] == "delete" and c["batch_id"] < b:
                present_from = None  # evicted before this batch: a later record is new again
        evidence = [dict(c) for c in mine][:10]
        earlier = sorted(
            (
                r
                for r in records
                if r is not rec
                and r.batch_id is not None
                and all(same_value(r.values.get(c.source_column or c.name), wanted[c.name], self.tz) for c in cols)
            ),
            key=lambda r: (r.batch_id or 0, r.file, r.row),
        )
        if present_from is not None and present_from < b:
            first_rec = next((r for r in earlier if r.batch_id == present_from), None)
            who = (
                f"the record at {first_rec.where()}"
                if first_rec
                else f"a record with the same key that entered its state in batch {present_from}"
            )
            return StepResult(
                Step(
                    op_id,
                    DROPPED_AS_DUPLICATE,
                    b,
                    f"Dropped as a duplicate by {view.label} in batch {b}: {who} "
                    f"had the same dedup key ({dk}), still in the operator's state.",
                    group=dk,
                    evidence=evidence,
                )
            )
        if present_from == b:
            before = next((r for r in earlier if r.batch_id == b and (r.file, r.row) < (rec.file, rec.row)), None)
            if before is not None:
                return StepResult(
                    Step(
                        op_id,
                        DROPPED_AS_DUPLICATE,
                        b,
                        f"Dropped as a duplicate by {view.label} in batch {b}: the "
                        f"record at {before.where()} came first in the same batch with the same dedup key ({dk}).",
                        group=dk,
                        evidence=evidence,
                    )
                )
            detail = f"Passed {view.label} in batch {b}: its dedup key ({dk}) entered the operator's state then."
            outputs = [Output(op_id, dk, b, EMITTED)] if final else []
            return StepResult(
                Step(op_id, PASSED if not final else REACHED_STATE, b, detail, group=dk, evidence=evidence),
                [Flow(flow.values, b)],
                outputs,
            )
        return self._not_found(view, flow, rec, f"Its dedup key ({dk})")

    # ---- join

    def _join(self, view: OpView, side: str, flow: Flow, final: bool, t_us: int | None) -> StepResult:
        op_id, b = view.operator_id, flow.batch
        other = "right" if side == "left" else "left"
        state = self._state_of(view, side, flow, (side, other))
        if isinstance(state, StepResult):
            return state
        col, value, [mine_h, other_h] = state
        rows = side_rows(mine_h.changes)
        row = next((r for r in rows if r.added >= b and self._is_record(r.value, flow.values)), None)
        if row is None:
            return self._not_found_join(view, side, flow, col.name, value)
        others = side_rows(other_h.changes)
        group = f"{col.source_column or col.name} {value}"
        evidence = [
            {"side": side, "batch_id": row.added, "value": row.value},
            *({"side": other, "batch_id": o.added, "value": o.value} for o in others[:10]),
        ]
        join_format_1 = "matched" not in row.value
        if join_format_1:
            return StepResult(
                Step(
                    op_id,
                    REACHED_STATE,
                    b,
                    f"In the {side} side's state of {view.label} from batch {row.added}. "
                    "Join state format 1 records no matched flag: whether it joined cannot be told from the state.",
                    side,
                    group,
                    evidence,
                )
            )
        if row.matched_at is not None:
            m = row.matched_at
            # each row of the other side that was matched while both were held made a joined row, in the
            # batch the later of the two arrived
            pairs = [
                (o, max(row.added, o.added))
                for o in others
                if o.matched_at is not None
                and o.added <= (row.removed if row.removed is not None else self.last)
                and (o.removed is None or o.removed >= row.added)
                and max(row.added, o.added) >= m
            ]
            detail = (
                f"In the {side} side's state of {view.label} from batch {row.added}; matched in batch {m}"
                + (
                    f" with the {other} side's row(s) "
                    + "; ".join(f"{self._row_text(o.value)} (batch {at})" for o, at in pairs[:3])
                    if pairs
                    else ""
                )
                + "."
            )
            flows = [Flow({**{k: v for k, v in o.value.items() if k != "matched"}, **flow.values}, at) for o, at in pairs]
            flows = flows or [Flow(flow.values, m)]
            outputs = (
                [Output(op_id, group, at, MATCHED, self._pair_text(side, row.value, o.value)) for o, at in pairs]
                or [Output(op_id, group, m, MATCHED, self._pair_text(side, row.value, None))]
                if final
                else []
            )
            step = Step(op_id, REACHED_STATE if final else PASSED, row.added, detail, side, group, evidence)
            return StepResult(step, flows, outputs)
        preserved = bool(view.join_type and side in PRESERVED.get(view.join_type, ()))
        overlap = [
            o
            for o in others
            if o.added <= (row.removed if row.removed is not None else self.last)
            and (o.removed is None or o.removed >= row.added)
        ]
        rejected = self._rejection(view, side, row, overlap)
        outcome = CONDITION_NOT_MET if overlap else REACHED_STATE
        if row.removed is not None:
            detail = f"In the {side} side's state of {view.label} from batch {row.added}, never matched, evicted by the watermark in batch {row.removed}"
            detail += f": {rejected}" if overlap else f": no {other} row with this key was in the join's state meanwhile"
            outputs, flows = [], []
            if preserved:
                detail += f". This {(view.join_type or '').replace('_', ' ')} join emitted it null-padded in batch {row.removed}"
                outputs = [Output(op_id, group, row.removed, EMITTED_UNMATCHED, self._row_text(row.value))] if final else []
                flows = [Flow(flow.values, row.removed)]
            elif view.join_type:
                detail += f". An {view.join_type.replace('_', ' ')} join drops it"
            else:
                detail += ". The join type is not known (no event log): an outer join preserving this side emitted it null-padded, any other dropped it"
            return StepResult(Step(op_id, outcome, row.added, detail + ".", side, group, evidence), flows, outputs)
        detail = f"In the {side} side's state of {view.label} since batch {row.added}, unmatched"
        detail += f": {rejected}" if overlap else f", waiting for a {other} row with this key"
        t = t_us // 1000 if t_us is not None else None
        waiting = [self.release(op_id, t, group, side, f"the {side} row {self._row_text(row.value)}")] if t is not None else []
        return StepResult(Step(op_id, outcome, row.added, detail + ".", side, group, evidence), [], [], waiting)

    def _is_record(self, value: dict[str, Any], record: dict[str, Any]) -> bool:
        common = [k for k in value if k != "matched" and k in record]
        return bool(common) and all(same_value(value[k], record[k], self.tz) for k in common)

    def _pair_text(self, side: str, mine: dict[str, Any], theirs: dict[str, Any] | None) -> str:
        """A joined output row: the left side's row and the right side's, whichever side asks."""
        pair = [self._row_text(mine), self._row_text(theirs) if theirs is not None else "(a row of the other side)"]
        return " joined with ".join(pair if side == "left" else pair[::-1])

    def _row_text(self, value: dict[str, Any]) -> str:
        parts = [
            f"{k} {fmt_time(to_ms(v)) if isinstance(v, dt.datetime) else key_text(v)}" for k, v in value.items() if k != "matched"
        ]
        return "(" + ", ".join(parts[:4]) + ")"

    def _rejection(self, view: OpView, side: str, row: SideRow, others: list[SideRow]) -> str:
        other = "right" if side == "left" else "left"
        mine = _first_time(row.value)
        pairs = []
        for o in others[:3]:
            theirs = _first_time(o.value)
            if mine is not None and theirs is not None:
                pairs.append(
                    f"{other} at {fmt_time(theirs)} ({fmt_duration(abs(theirs - mine))} {'after' if theirs >= mine else 'before'} this row's {fmt_time(mine)})"
                )
        cond = f" `{view.condition}`" if view.condition else " (its time range; the event log's plan states it)"
        return f"the {other} side held this key too ({'; '.join(pairs) or 'no time to compare'}) and the join condition{cond} rejected every pair"

    def _not_found_join(self, view: OpView, side: str, flow: Flow, column: str, value: str) -> StepResult:
        step = Step(
            view.operator_id,
            NOT_FOUND,
            flow.batch,
            f"No row of the {side} side's state of {view.label} holds this record "
            f"({column} {value}) from batch {flow.batch} on, and it was not late.",
            side,
        )
        return StepResult(step)

    # ---- aggregation, session window

    def _aggregate(self, view: OpView, flow: Flow, rec: InputRecord, t_us: int | None, window: Window | None) -> StepResult:
        op_id, b = view.operator_id, flow.batch
        state = self._state_of(view, "", flow)
        if isinstance(state, StepResult):
            return state
        col, value, [hist] = state
        wanted = {
            c.name: flow.values.get(c.source_column or c.name)
            for c in view.keys.get("", [])
            if c.window is None and c.name not in ("window", "session_window")
        }
        t = t_us // 1000 if t_us is not None else None
        windows = window.of(t) if window is not None and t is not None else None
        updates = [
            c
            for c in hist.changes
            if c["change_type"] == "update" and c["batch_id"] == b and _key_has(c.get("key") or {}, wanted, self.tz)
        ]
        if t is not None:
            updates = [
                c
                for c in updates
                if (windows is None and (covering(c["key"], t) or _window_of_key(c["key"]) is None))
                or (windows and _window_of_key(c["key"]) in windows)
            ]
        if not updates:
            return self._not_found(
                view, flow, rec, f"No state row of {col.name} {value}" + (f" holding {fmt_time(t)}" if t is not None else "")
            )
        keys = {json.dumps(jsonable(c["key"]), sort_keys=True): c["key"] for c in updates}
        outputs: list[Output] = []
        waiting: list[Waiting] = []
        texts = []
        mode = (
            view.output_mode
            or ("Append" if any(_window_of_key(k) for k in keys.values()) and any(self.watermarks.values()) else "Update")
        ).lower()
        if view.output_mode is None and "output mode" not in " ".join(self.notes):
            self.notes.append(
                f"The output mode is not in the checkpoint; {mode} mode was assumed (give the query's event log to know)."
            )
        for kid, key in keys.items():
            group = group_text(key)
            later = [c for c in hist.changes if json.dumps(jsonable(c["key"]), sort_keys=True) == kid and c["batch_id"] > b]
            gone = next((c["batch_id"] for c in sorted(later, key=lambda c: c["batch_id"]) if c["change_type"] == "delete"), None)
            held = any(json.dumps(jsonable(r["key"]), sort_keys=True) == kid for r in hist.rows)
            if mode == "append":
                if gone is not None:
                    outputs.append(Output(op_id, group, gone, EMITTED, "closed: the watermark passed its end"))
                    texts.append(f"{group}: emitted in batch {gone}, when the watermark passed its end")
                elif held:
                    win = _window_of_key(key)
                    if win is not None:
                        waiting.append(self.release(op_id, win[1], group, None, group))
                    else:
                        waiting.append(Waiting(op_id, group, None, None, f"{group}: no window: append mode never emits it"))
                    texts.append(f"{group}: still in state, waiting for the watermark")
            elif mode == "update":
                outputs.append(Output(op_id, group, b, EMITTED, "updated"))
                texts.append(f"{group}: emitted updated in batch {b}")
            else:
                outputs.append(Output(op_id, group, b, EMITTED, "complete mode: in every batch's output from then on"))
                texts.append(f"{group}: in the output of batch {b} and every batch after (complete mode)")
        detail = f"Counted in {view.label} in batch {b}: " + "; ".join(texts) + "."
        evidence = [dict(c) for c in updates][:10]
        return StepResult(
            Step(op_id, REACHED_STATE, b, detail, None, "; ".join(group_text(k) for k in keys.values()), evidence),
            [],
            outputs,
            waiting,
        )

    # ---- group state, transformWithState

    def _group(self, view: OpView, flow: Flow, rec: InputRecord) -> StepResult:
        op_id, b = view.operator_id, flow.batch
        state = self._state_of(view, "", flow)
        if isinstance(state, StepResult):
            return state
        col, value, [hist] = state
        updates = [c for c in hist.changes if c["batch_id"] == b]
        group = f"{col.name} {value}"
        if not updates:
            return self._not_found(view, flow, rec, f"The state of {group}")
        return StepResult(
            Step(
                op_id,
                REACHED_STATE,
                b,
                f"Its group ({group}) state changed in {view.label} in batch {b}; what the "
                "user's function emitted is not kept in the state.",
                None,
                group,
                [dict(c) for c in updates][:10],
            )
        )


_RANK = {
    REACHED_STATE: 0,
    PASSED: 0,
    CONDITION_NOT_MET: 1,
    DROPPED_AS_LATE: 2,
    DROPPED_AS_DUPLICATE: 3,
    FILTERED: 4,
    NOT_FOUND: 5,
    UNKNOWN: 6,
}


def _key_has(key: dict[str, Any], wanted: dict[str, Any], tz: str) -> bool:
    return all(same_value(key[k], v, tz) for k, v in wanted.items() if k in key)


def _first_time(value: dict[str, Any] | None) -> int | None:
    for v in (value or {}).values():
        if isinstance(v, dt.datetime):
            return to_ms(v)
    return None


# --------------------------------------------------------------------------- one key


def key_fate(key: str, search: InputSearch, walk: FateWalk | None, written: list[Output], why_not: str | None = None) -> KeyFate:
    """The fate of one key: each record followed (``walk``), what reached the output, what waits.

    ``written``: the key's rows found in a file sink's files; ``why_not``: why the input was not
    searched at all (a Kafka source, no event log ...), then the verdict stays the state's."""
    records = search.of(key)
    fate = KeyFate(key, input_searched=why_not is None and search.files_searched > 0, input_note=why_not or search.note())
    fate.near = [r for r in search.near if r.key == key]
    outputs: list[Output] = []
    waiting: list[Waiting] = []
    if walk is not None:
        for rec in records:
            rf, o, w = walk.follow(rec, records)
            fate.records.append(rf)
            outputs += o
            waiting += w
        fate.notes = list(walk.notes)
    fate.outputs = sorted(
        dict.fromkeys(outputs + written), key=lambda o: (o.batch_id if o.batch_id is not None else -1, o.group, o.kind)
    )
    fate.waiting = list(dict.fromkeys(waiting))
    outcomes = [r.outcome for r in fate.records]
    if outcomes and all(o == DROPPED_AS_LATE for o in outcomes):
        fate.verdict = DROPPED_AS_LATE
    elif not records and fate.input_searched and search.complete:
        fate.verdict = NEVER_IN_INPUT
    fate.reason = next((REASONS[o] for o in REASONS if o in outcomes), None)
    fate.summary = _summary(key, fate, search)
    return fate


NEVER_IN_INPUT = "never_in_input"
_WORDS = {
    DROPPED_AS_LATE: "dropped as late",
    DROPPED_AS_DUPLICATE: "dropped as duplicates",
    CONDITION_NOT_MET: "rejected by the join condition",
    FILTERED: "filtered out",
    REACHED_STATE: "reached state",
    NOT_FOUND: "never found in state",
    UNKNOWN: "of unknown fate (a read failed)",
}


def _summary(key: str, fate: KeyFate, search: InputSearch) -> str:
    if fate.verdict == NEVER_IN_INPUT:
        near = "; ".join(f"{r.values.get(r.column)!r} ({r.near}) at {r.where()}" for r in fate.near[:3])
        text = f"None of the {search.files_searched:,} input files the query read holds {key!r}: it never reached the query."
        return text + (f" Similar keys are in the input: {near}. A malformed key is the usual cause." if near else "")
    if not fate.records:
        return ""
    counts: dict[str, int] = {}
    for r in fate.records:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    parts = ", ".join(f"{c} {_WORDS.get(o, o)}" for o, c in sorted(counts.items(), key=lambda x: -x[1]))
    text = f"{len(fate.records)} input record(s) of {key}: {parts}."
    out = [o for o in fate.outputs if o.kind != WRITTEN]
    if out:
        shown = "; ".join(f"{o.group} ({o.kind.replace('_', ' ')} in batch {o.batch_id})" for o in out[:4])
        text += f" Reached the output: {shown}" + (f" and {len(out) - 4} more" if len(out) > 4 else "") + "."
    written = [o for o in fate.outputs if o.kind == WRITTEN]
    if written:
        text += f" The sink's files hold {len(written)} row(s) of it."
    if fate.waiting:
        text += " Still waiting: " + "; ".join(w.group for w in fate.waiting[:3]) + "."
    return text


def search_columns(walk: FateWalk, key_field: str | None) -> list[str]:
    """The input columns a key may be in, the likeliest first: every operator's lookup column (the
    column its state key takes), operator 0's first; with ``key_field``, that column (or the
    column of that state key field: ``field0`` of a join is its key column)."""
    cols: list[str] = []
    for op in sorted(walk.info.operators, key=lambda o: o.operator_id):
        view = walk.view(op)
        for side in view.keys:
            for i, c in enumerate(view.keys[side]):
                if c.window is not None or c.name in ("window", "session_window"):
                    continue
                column = c.source_column or c.name
                if key_field is None or key_field in (column, c.name, f"field{i}"):
                    cols.append(column)
    if key_field and key_field not in cols:
        cols.insert(0, key_field)
    return list(dict.fromkeys(cols))
