"""dropDuplicates: a record passes when its dedup key enters the operator's state with it, and is
dropped as a duplicate while an earlier record's key is held (dropDuplicatesWithinWatermark's stage
too: ``dedup_within_watermark``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statelens.analysis.core.key_format import event_time_ms, fmt_time
from statelens.analysis.core.operator_kinds import DEDUP, OperatorKind
from statelens.analysis.core.state_access import key_text
from statelens.analysis.fate.model import (
    DROPPED_AS_DUPLICATE,
    EMITTED,
    PASSED,
    REACHED_STATE,
    Cause,
    Output,
    Step,
    noun,
    record_text,
)
from statelens.analysis.fate.stage import Stage
from statelens.analysis.fate.walk import Arrival, FateWalk, Flow, OpView, StepResult, column_value, same_value
from statelens.analysis.inputs.records import InputRecord
from statelens.analysis.verdicts.key_verdicts import DROPPING_DUPLICATES, Context, KeyDiagnosis, StoreLookup

if TYPE_CHECKING:
    from statelens.analysis.plan.query_plan import Column


class DedupStage(Stage):
    def step(self, walk: FateWalk, view: OpView, a: Arrival) -> StepResult:
        side, flow, rec, records, final = a.side, a.flow, a.rec, a.records, a.final
        op_id, b = view.operator_id, flow.batch
        cols = view.keys.get("", [])
        state = self.state_of(walk, view, side, flow, rec)
        if isinstance(state, StepResult):
            return state
        col, value, [hist] = state
        wanted = {c.name: column_value(flow.values, c) for c in cols if c.name not in flow.computed}
        mine = sorted(
            (
                c
                for c in hist.changes
                if all(same_value(v, wanted[k], walk.tz) for k, v in (c.get("key") or {}).items() if k in wanted)
            ),
            key=lambda c: c["batch_id"],
        )
        dk = ", ".join(f"{k} {key_text(v)}" for k, v in wanted.items())
        present_from: int | None = None
        for c in mine:
            if c["batch_id"] > b:
                break
            if c["change_type"] == "update" and present_from is None:
                present_from = c["batch_id"]
            elif c["change_type"] == "delete" and c["batch_id"] < b:
                present_from = None  # evicted before this batch: a later record is new again
        evidence = [dict(c) for c in mine][:10]
        if present_from is not None and present_from < b:
            earlier = self._earlier(
                walk, op_id, rec, records, col.source_column or col.name, value, wanted, cols, present_from, None
            )
            return self._duplicate(walk, view, flow, rec, dk, earlier, present_from, evidence)
        if present_from == b:
            earlier = self._earlier(walk, op_id, rec, records, col.source_column or col.name, value, wanted, cols, b, rec)
            if earlier is not None:
                return self._duplicate(walk, view, flow, rec, dk, earlier, b, evidence)
            detail = f"Passed {view.label} in batch {b}: its dedup key ({dk}) entered the operator's state then."
            outputs = [Output(op_id, dk, b, EMITTED, null_padded=flow.null_padded)]
            return StepResult(
                Step(op_id, PASSED if not final else REACHED_STATE, b, detail, group=dk, evidence=evidence),
                [Flow(flow.values, b, flow.null_padded, flow.unmatched_cause)],
                outputs,
            )
        return self.not_found(walk, view, flow, rec, f"Its dedup key ({dk})")

    def _earlier(
        self,
        walk: FateWalk,
        op_id: int,
        rec: InputRecord,
        records: list[InputRecord],
        column: str,
        value: str,
        wanted: dict[str, object],
        cols: list[Column],
        batch: int,
        before: InputRecord | None,
    ) -> InputRecord | None:
        """The record whose dedup key this one repeats: read in ``batch`` (before ``before`` in it), from
        any source whose records reach the operator (a union's other source too)."""
        sources = walk.sources_of(op_id, "") or sorted({n for n in walk.source_names.values() if n} | {rec.source})
        pool = [r for r in records if r.source in sources]
        for source in sources:
            pool += (walk.find(source, column, [value]) or {}).get(value, [])

        def repeats(values: dict[str, Any]) -> bool:  # a record's dedup key, as the query holds the record, is this one's
            return all(
                (theirs := column_value(values, c)) is not None and same_value(theirs, wanted[c.name], walk.tz) for c in cols
            )

        same = sorted(
            {
                (r.source, r.file, r.row): r
                for r in pool
                if (r.source, r.file, r.row) != (rec.source, rec.file, rec.row)
                and r.batch_id == batch
                and repeats(walk.values_made(r))
            }.values(),
            key=lambda r: (r.file, r.row),
        )
        if before is not None:
            same = [r for r in same if (r.file, r.row) < (before.file, before.row)]
        return same[0] if same else None

    def _duplicate(
        self,
        walk: FateWalk,
        view: OpView,
        flow: Flow,
        rec: InputRecord,
        dk: str,
        earlier: InputRecord | None,
        entered: int,
        evidence: list[dict[str, object]],
    ) -> StepResult:
        op_id, b = view.operator_id, flow.batch
        same_batch = entered == b
        who = (
            f"the {noun(earlier)} read in batch {earlier.batch_id} ({record_text(earlier)})"
            if earlier is not None
            else f"a {noun(rec)} with the same key that entered its state in batch {entered}"
        )
        detail = (
            f"Dropped as a duplicate by {view.label} in batch {b}: {who} "
            + ("came first in the same batch with the same dedup key" if same_batch else "had the same dedup key")
            + f" ({dk})"
            + ("" if same_batch else ", still in the operator's state")
            + "."
        )
        dropped = (walk.duplicates or {}).get(b, {}).get(op_id) if walk.duplicates is not None else None
        if dropped:
            detail += f" The progress confirms it: operator {op_id} dropped {dropped:,} duplicate row(s) in batch {b}."
        values = ", ".join(dk_value.split(" ", 1)[-1] for dk_value in dk.split(", "))
        short = (
            f"its {noun(rec)} {values} ({record_text(rec)}) was dropped as a duplicate of {who} by operator {op_id} in batch {b}"
        )
        cause = Cause(DROPPED_AS_DUPLICATE, op_id, b, None, rec, short, earlier=earlier)
        return StepResult(Step(op_id, DROPPED_AS_DUPLICATE, b, detail, group=dk, evidence=evidence, cause=cause))


# ---- the one-operator verdict


def in_state(key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    times = [t for r in state_rows for _, t in [event_time_ms(r.get("key"))] if t is not None]
    until = f"until the watermark passes its event time {fmt_time(max(times))}" if times else ""
    return dropping(key, ctx, what, until, never=not ctx.watermark or not times)


def dropping(key: str, ctx: Context, what: str, until: str, never: bool) -> KeyDiagnosis:
    """A key held in a deduplication state: later rows with it are dropped ``until`` (or forever)."""
    wm = ctx.watermark
    if never:
        why = (
            "there is no watermark"
            if not wm
            else "the deduplication key has no event-time column, so the watermark cannot evict it"
        )
        tail = f" It is never removed: {why}, and this state grows with every new key."
        until = "for as long as the query runs"
    else:
        tail = f" The watermark has not passed it yet (now {fmt_time(wm)})."
    return KeyDiagnosis(
        key,
        DROPPING_DUPLICATES,
        f"{what} is in the deduplication state: the first row with it was emitted, and every later row "
        f"with it is dropped as a duplicate {until}.{tail}",
    )


def evicted(ctx: Context) -> str:
    return (
        "From then on a row with this key is not recognised as a duplicate: if it is not behind the "
        "watermark it passes through again, otherwise it is dropped as late data."
    )


KIND = OperatorKind(
    DEDUP,
    ("dedupe*",),
    ("StreamingDeduplicate",),
    "dropDuplicates",
    watermark_evicts=True,
    needs_key_time=(
        "Fix: deduplicate with dropDuplicatesWithinWatermark(keys), which keeps each key only until the watermark "
        "passes its event time plus the delay, or add the event-time column to the dropDuplicates keys (then a "
        "duplicate counts only with the same event time). Either needs a new checkpoint: the state schema changes.",
        "dropDuplicatesWithinWatermark(keys)",
    ),
    stage=DedupStage(),
    in_state=in_state,
    evicted=evicted,
)
