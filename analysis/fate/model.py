"""The fate's vocabulary: what an operator did with a record (``Step``), a record's fate, what reached
the output, what waits, the root cause of what did not, and the key's outcome."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.core.key_format import fmt_time, jsonable, to_ms
from statelens.analysis.core.model import JOIN_ROW_FIELDS
from statelens.analysis.core.state_access import key_text
from statelens.analysis.inputs.records import InputRecord

# what one operator did with one record (or with the row it became upstream): a step's outcome
PASSED = "passed"  # the operator let the row through to the next one
REACHED_STATE = "reached_state"
DROPPED_AS_LATE = "dropped_as_late"
DROPPED_AS_DUPLICATE = "dropped_as_duplicate"
CONDITION_NOT_MET = "condition_not_met"
FILTERED = "filtered"
NO_STATIC_MATCH = "no_static_match"  # a join with a static table found no row for it (an inner join drops it)
EVICTED_UNMATCHED = "evicted_unmatched"  # a join row the watermark evicted without a match
NOT_FOUND = "not_found_in_state"
UNKNOWN = "unknown"
# where a key's rows left an operator or the query
EMITTED, EMITTED_UNMATCHED, MATCHED, WRITTEN = "emitted", "emitted_unmatched", "matched", "written"
STATE_REMOVED = "state_removed"  # a group's state removed (timed out): what the user's function emitted is its own

# the key's outcome: what reached the output
OUTCOME_WRITTEN = "written"  # every record's contribution reached the output (some may still wait)
PARTLY_WRITTEN = "partly_written"  # some did, some were lost
WRITTEN_UNMATCHED = "written_unmatched"  # a preserved side of an outer join emitted it null-padded
WAITING = "waiting"  # nothing reached the output yet; a row still waits in state
LOST = "lost"  # nothing reached the output, nothing waits
NEVER_IN_INPUT = "never_in_input"
OUTCOMES = (OUTCOME_WRITTEN, PARTLY_WRITTEN, WRITTEN_UNMATCHED, WAITING, LOST, NEVER_IN_INPUT, UNKNOWN)

# the root cause of what did not reach the output
NO_MATCH_IN_INPUT = "no_match_in_input"
WAITING_FOR_WATERMARK = "waiting_for_watermark"
CAUSES = (
    DROPPED_AS_LATE,
    DROPPED_AS_DUPLICATE,
    FILTERED,
    CONDITION_NOT_MET,
    NO_MATCH_IN_INPUT,
    WAITING_FOR_WATERMARK,
    NEVER_IN_INPUT,
    UNKNOWN,
)
REASONS = {  # the cause as the single-operator diagnosis names it (``KeyDiagnosis.reason``)
    DROPPED_AS_LATE: "late_record",
    DROPPED_AS_DUPLICATE: "duplicate",
    CONDITION_NOT_MET: "condition_not_met",
    FILTERED: "filtered",
}


# --------------------------------------------------------------------------- how times and rows read


def clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S")


def window_text(start: int, end: int) -> str:
    return f"window {fmt_time(start)[:-4]}-{clock(end)}"


def group_text(key: dict[str, Any] | None) -> str:
    """A state key as people read it: ``window 2026-01-01 00:00:00-00:05:00, user_id user-0``."""
    parts = []
    for k, v in (key or {}).items():
        if isinstance(v, dict) and to_ms(v.get("start")) is not None and to_ms(v.get("end")) is not None:
            parts.append(window_text(to_ms(v["start"]) or 0, to_ms(v["end"]) or 0))
        elif k not in JOIN_ROW_FIELDS:
            parts.append(f"{k} {key_text(v)}")
    return ", ".join(parts)


def noun(rec: InputRecord | None) -> str:
    """What a record of a source is called: its folder's name in the singular (``clicks`` -> ``click``)."""
    name = (rec.source if rec else "") or "record"
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith(("sses", "xes", "ches", "shes")):
        return name[:-2]
    if name.endswith("s") and not name.endswith("ss") and len(name) > 3:
        return name[:-1]
    return name


def record_text(rec: InputRecord) -> str:
    """``clicks/part-00000.json row 1``: where a record is."""
    return f"{rec.source + '/' if rec.source else ''}{rec.file_name} row {rec.row}"


# --------------------------------------------------------------------------- what happened


@dataclass
class Cause:
    """The root cause of a record's (or a key's) missing output: what happened, by which operator, in
    which batch, to which record; a duplicate's earlier record; a filter's predicate as Spark printed it."""

    kind: str  # one of CAUSES
    operator_id: int | None
    batch_id: int | None
    side: str | None  # the join side the record it happened to enters by
    record: InputRecord | None
    detail: str  # one sentence
    earlier: InputRecord | None = None  # dropped_as_duplicate: the record it repeated
    predicate: str | None = None  # filtered: the plan's condition as Spark printed it
    why: str | None = None  # unknown: why it cannot be told
    then: str = ""  # what followed on the key's own row ("the impression then never matched")
    static_table: str | None = None  # a join with a static table: the table, and where it was read
    # a join of unknown type (no event log) evicted it unmatched: lost, unless it was emitted null-padded
    # (an outer join); why, for when the sink's files cannot tell
    unless_emitted: str = ""
    emitted_in: int | None = None  # with unless_emitted: the batch an outer join emitted it in

    def to_dict(self) -> dict[str, Any]:
        rec = self.record
        return {
            "operator_id": self.operator_id,
            "batch_id": self.batch_id,
            "side": self.side,
            "source": rec.source if rec else None,
            "file": rec.file if rec else None,
            "row": rec.row if rec else None,
            "detail": self.detail,
            "earlier": (
                {
                    "source": self.earlier.source,
                    "file": self.earlier.file,
                    "row": self.earlier.row,
                    "batch_id": self.earlier.batch_id,
                }
                if self.earlier
                else None
            ),
            "predicate": self.predicate,
            "static_table": self.static_table,
            "why": self.why,
        }


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
    cause: Cause | None = None  # what it lost the record to (a join row left unmatched: the other side's cause)
    key: str | None = None  # the state key it reached, as JSON (a user's function's group): found in a sink

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "outcome": self.outcome,
            "batch_id": self.batch,
            "side": self.side,
            "group": self.group,
            "detail": self.detail,
            "evidence": jsonable(self.evidence),
            "cause": self.cause.kind if self.cause else None,
        }


@dataclass(frozen=True)
class Output:
    operator_id: int | None  # None: found in the sink's files
    group: str
    batch_id: int | None
    kind: str  # emitted | emitted_unmatched | matched | written | state_removed
    detail: str = ""
    null_padded: bool = False  # a preserved join side's row emitted without a match (here or upstream)
    file: str | None = None  # written: the sink's file
    key: str | None = None  # the state key it was emitted for, as JSON (a window, the group's columns): found in a sink
    texts: frozenset[str] = frozenset()  # written: the sink row's text values (what tells which record it holds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "group": self.group,
            "batch_id": self.batch_id,
            "kind": self.kind,
            "detail": self.detail,
            "null_padded": self.null_padded,
            "file": self.file,
        }


# why a window still in an aggregation's state may have been written, where the output mode is not known
MODE_UNKNOWN = (
    "in append mode it waits for the watermark, in update or complete mode it was emitted when counted; the output mode "
    "is not in the checkpoint (give the query's event log, or its sink)"
)


@dataclass(frozen=True)
class Waiting:
    operator_id: int
    group: str
    released_at_watermark: int | None  # the query's watermark that releases it (ms); None: nothing does
    needs_event_time: int | None = None  # the newest event time that moves the watermark there (ms)
    detail: str = ""
    cause: str = WAITING_FOR_WATERMARK  # or no_match_in_input: a join row waiting for a match
    key: str | None = None  # the state key it waits under, as JSON (a window, the group's columns): found in a sink
    # the output mode is not known: why it may have been emitted already (update or complete mode); the sink tells
    unless_emitted: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "group": self.group,
            "released_at_watermark": self.released_at_watermark,
            "needs_event_time": self.needs_event_time,
            "detail": self.detail,
        }


# a record's contribution to the output
REACHED, HELD, DROPPED = "reached_output", "waiting", "lost"


@dataclass
class RecordFate:
    record: InputRecord
    event_time_ms: int | None
    outcome: str  # the step outcome that decided it (reached_state, dropped_as_late ...)
    operator_id: int | None
    at_batch: int | None
    side: str | None
    steps: list[Step] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)  # what it reached at the output
    waiting: list[Waiting] = field(default_factory=list)  # where it still waits
    contribution: str = UNKNOWN  # reached_output | waiting | lost | unknown
    cause: Cause | None = None  # why it (or its match) did not reach the output
    match_only: bool = False  # a left semi join's right row: never output itself, only what lets the left rows out

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.record.source,
            "batch_id": self.record.batch_id,
            "file": self.record.file,
            "row": self.record.row,
            "event_time": fmt_time(self.event_time_ms) if self.event_time_ms is not None else None,
            "event_time_ms": self.event_time_ms,
            "outcome": self.outcome,
            "contribution": self.contribution,
            "cause": self.cause.kind if self.cause else None,
            "operator_id": self.operator_id,
            "at_batch": self.at_batch,
            "side": self.side,
            "match_only": self.match_only,
            "values": jsonable(self.record.values),
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass
class NearFate:
    """A look-alike of the key, followed as a key of its own: what reached the output of it."""

    key: str
    reason: str  # why it looks like the key asked
    where: str  # where it was seen (input, a store)
    outcome: str
    batches: list[int] = field(default_factory=list)  # the batches its rows reached the output in
    files: list[str] = field(default_factory=list)  # the sink's files holding them
    headline: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "reason": self.reason,
            "where": self.where,
            "outcome": self.outcome,
            "batches": self.batches,
            "files": self.files,
            "headline": self.headline,
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
    outcome: str = UNKNOWN
    cause: Cause | None = None
    headline: str = ""  # outcome and root cause in one sentence: the answer's first sentence
    near_fates: list[NearFate] = field(default_factory=list)
    summary: str = ""  # the records by what became of them
    written: list[Output] = field(default_factory=list, repr=False)  # the sink's rows of the key it was judged with
    # a sink was searched, has the operators' key columns, and holds no row of the key
    sink_lacks_key: bool = field(default=False, repr=False)

    @property
    def verdict(self) -> str | None:
        """The verdict the whole query decides over the operator's: every record dropped as late; never in the input."""
        if self.outcome == NEVER_IN_INPUT:
            return NEVER_IN_INPUT
        if self.records and all(r.outcome == DROPPED_AS_LATE for r in self.records):
            return DROPPED_AS_LATE
        return None

    @property
    def reason(self) -> str | None:
        return REASONS.get(self.cause.kind) if self.cause else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "cause": self.cause.kind if self.cause else None,
            "cause_at": self.cause.to_dict() if self.cause else None,
            "headline": self.headline,
            "input_searched": self.input_searched,
            "input_note": self.input_note,
            "records": [r.to_dict() for r in self.records],
            "outputs": [o.to_dict() for o in self.outputs],
            "waiting": [w.to_dict() for w in self.waiting],
            "near_misses": [n.to_dict() for n in self.near_fates],
            "near_misses_in_input": [
                {"key": r.values.get(r.column), "reason": r.near, "source": r.source, "batch_id": r.batch_id, "file": r.file}
                for r in self.near
            ],
            "notes": self.notes,
            "summary": self.summary,
        }
