"""A stream-stream join: the record's row in its side's state, matched (the joined rows go on), left
unmatched (the condition rejected every pair the state held; or no row of the other side came: why,
from the other side's own records of the key), emitted null-padded by an outer join, or waiting."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from statelens.analysis.core.key_format import fmt_duration, to_ms
from statelens.analysis.core.operator_kinds import JOIN, OperatorKind
from statelens.analysis.core.state_access import key_text
from statelens.analysis.fate.model import (
    CONDITION_NOT_MET,
    EMITTED_UNMATCHED,
    EVICTED_UNMATCHED,
    MATCHED,
    NO_MATCH_IN_INPUT,
    PASSED,
    REACHED,
    REACHED_STATE,
    UNKNOWN,
    WAITING_FOR_WATERMARK,
    Cause,
    Output,
    Step,
    fmt_time,
    noun,
    record_text,
)
from statelens.analysis.fate.stage import Stage
from statelens.analysis.fate.walk import Arrival, FateWalk, Flow, OpView, StepResult, key_id, same_value
from statelens.analysis.inputs.records import InputRecord, event_time_us
from statelens.analysis.verdicts.key_verdicts import PRESERVED


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
            idx = key_id(c.get("key"))
            if c["change_type"] == "delete" or c.get("value") is None:
                at.pop(idx, None)
            else:
                at[idx] = c["value"]
        present = {key_id({k: v for k, v in (v or {}).items() if k != "matched"}): v for v in at.values()}
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


class JoinStage(Stage):
    def step(self, walk: FateWalk, view: OpView, a: Arrival) -> StepResult:
        side, flow, rec, final, t_us = a.side, a.flow, a.rec, a.final, a.t_us
        op_id, b = view.operator_id, flow.batch
        other = "right" if side == "left" else "left"
        state = self.state_of(walk, view, side, flow, rec, (side, other))
        if isinstance(state, StepResult):
            return state
        col, value, [mine_h, other_h] = state
        rows = side_rows(mine_h.changes)
        row = next((r for r in rows if r.added >= b and self._is_record(walk, r.value, flow.values)), None)
        others = side_rows(other_h.changes)
        group = f"{col.source_column or col.name} {value}"
        if row is None:
            unstored = self._not_stored(
                walk, view, side, flow, rec, col.source_column or col.name, value, others, group, final, t_us
            )
            if unstored is not None:
                return unstored
            return self.not_found(walk, view, flow, rec, f"This record ({col.source_column or col.name} {value})", side)
        evidence = [
            {"side": side, "batch_id": row.added, "value": row.value},
            *({"side": other, "batch_id": o.added, "value": o.value} for o in others[:10]),
        ]
        if "matched" not in row.value:  # join state format 1
            detail = (
                f"In the {side} side's state of {view.label} from batch {row.added}. "
                "Join state format 1 records no matched flag: whether it joined cannot be told from the state."
            )
            cause = Cause(UNKNOWN, op_id, row.added, side, rec, detail, why=detail)
            return StepResult(Step(op_id, REACHED_STATE, b, detail, side, group, evidence, cause=cause))
        semi_left = view.join_type == "left_semi" and side == "left"
        if semi_left and row.matched_at is None and any(o.added == row.removed and _may_join(view, row, o) for o in others):
            row.matched_at = row.removed  # a left semi join removes a left row once it has emitted it
        if row.matched_at is not None:
            return self._matched(walk, view, side, flow, row, others, group, evidence, final)
        preserved = bool(view.join_type and side in PRESERVED.get(view.join_type, ()))
        held = row.removed if row.removed is not None else walk.last
        overlap = [o for o in others if o.added <= held and (o.removed is None or o.removed >= row.added)]
        if overlap:
            cause = Cause(
                CONDITION_NOT_MET,
                op_id,
                max(row.added, overlap[0].added),
                side,
                rec,
                f"the condition{self._condition(view)} of operator {op_id} rejected every pair it held: "
                f"{self._pairs(side, row, overlap)}",
            )
        else:
            cause = self._other_side_cause(walk, view, side, col.source_column or col.name, value, row, rec)
        outcome = CONDITION_NOT_MET if overlap else REACHED_STATE
        why = f": {self._rejection(view, side, row, overlap)}" if overlap else f": {cause.detail}"
        if view.join_type is None and row.removed is not None:  # no event log: lost unless an outer join emitted it
            cause.unless_emitted = (
                f"the join type is not known without the query's event log: an outer join preserving the {side} side "
                f"emitted it null-padded when it was evicted in batch {row.removed}, a left semi join emitted it then if "
                f"a match had come, any other dropped it ({cause.detail})"
            )
            # no row of the other side was held with it: a row of it written then was emitted null-padded (with
            # one held, a left semi join may have emitted it matched)
            cause.emitted_in = None if overlap else row.removed
        if row.removed is not None:
            detail = f"In the {side} side's state of {view.label} from batch {row.added}, never matched, evicted by the watermark in batch {row.removed}{why}"
            outputs: list[Output] = []
            flows: list[Flow] = []
            if preserved:
                detail += f". This {(view.join_type or '').replace('_', ' ')} join emitted it null-padded in batch {row.removed}"
                outputs = [Output(op_id, group, row.removed, EMITTED_UNMATCHED, self._row_text(row.value), null_padded=True)]
                flows = [Flow(flow.values, row.removed, True, cause)]
            elif view.join_type:
                detail += f". An {view.join_type.replace('_', ' ')} join drops it"
            else:
                detail += ". The join type is not known (no event log): an outer join preserving this side emitted it null-padded, any other dropped it"
            kind = CONDITION_NOT_MET if overlap else EVICTED_UNMATCHED
            # the batch of what happened to it: the condition's rejection, or the eviction
            at = cause.batch_id if overlap else row.removed
            step = Step(op_id, kind, at, detail + ".", side, group, evidence, cause=cause)
            maybe = [Flow(flow.values, row.removed, True, cause)] if view.join_type is None else []
            return StepResult(step, flows, outputs, if_outer=maybe)
        detail = f"In the {side} side's state of {view.label} since batch {row.added}, unmatched{why}"
        # its event time: the record's, else (no time-like value, no plan) the time its state row holds, Spark's
        t = t_us // 1000 if t_us is not None else _first_time(row.value, walk.tz)
        waits = []
        if t is not None:
            what = f"the {side} row {self._row_text(row.value)}"
            waits = [
                walk.release(
                    op_id,
                    t,
                    group,
                    side,
                    what
                    + (
                        " waits for a match; without one it goes out null-padded when evicted"
                        if preserved
                        else " waits for a match; without one it is dropped when evicted"
                        if view.join_type
                        else " waits for a match; without one, when evicted, an outer join preserving its side emits it "
                        "null-padded and any other drops it (the join type is not recorded: the event log's plan tells)"
                    ),
                    # without the join type what it waits for is unknown: a match, or (an outer join) the watermark
                    cause=WAITING_FOR_WATERMARK if preserved else cause.kind if view.join_type else UNKNOWN,
                )
            ]
        return StepResult(Step(op_id, outcome, row.added, detail + ".", side, group, evidence, cause=cause), [], [], waits)

    # ---- a row Spark does not keep

    def _not_stored(
        self,
        walk: FateWalk,
        view: OpView,
        side: str,
        flow: Flow,
        rec: InputRecord,
        column: str,
        value: str,
        others: list[SideRow],
        group: str,
        final: bool,
        t_us: int | None,
    ) -> StepResult | None:
        """A row the join joined as it arrived and did not keep: a left semi join's left row that matched
        (it is emitted once, then never again), a right row already behind the right side's state
        watermark (its matches are made in its batch, then it would be evicted at once)."""
        op_id, b = view.operator_id, flow.batch
        semi = view.join_type == "left_semi"
        if side == "right" and not semi:
            marks = walk.marks.get(b, {}).get(op_id)
            bound = marks.cleanup.get("right") if marks else None
            if bound is None or t_us is None or t_us // 1000 > bound:
                return None  # not behind the state watermark: Spark kept it, so it did not get here
        elif not (semi and side == "left"):
            return None
        other = "right" if side == "left" else "left"
        held = [o for o in others if o.added <= b and (o.removed is None or o.removed >= b)]
        if held:
            why = (
                "a left semi join emits a left row that matches as it arrives and does not keep it"
                if semi and side == "left"
                else "the join does not keep a right row its state's watermark would evict in the same batch"
            )
            detail = (
                f"Joined by {view.label} as it arrived in batch {b}, with the {other} side's row(s) "
                + "; ".join(f"{self._row_text(o.value)} (from batch {o.added})" for o in held[:3])
                + f", and not kept in its state: {why}."
            )
            flows = (
                [Flow(flow.values, b)]
                if semi
                else [Flow({**{k: v for k, v in o.value.items() if k != "matched"}, **flow.values}, b) for o in held]
            )
            outputs = [Output(op_id, group, b, MATCHED, self._pair_text(side, flow.values, None if semi else held[0].value))]
            return StepResult(Step(op_id, REACHED_STATE if final else PASSED, b, detail, side, group), flows, outputs)
        if side == "right" and not semi:
            cause = self._other_side_cause(walk, view, side, column, value, SideRow(flow.values, b, None, b), rec)
            detail = (
                f"Not kept by {view.label} in batch {b}: no left row of {group} was in its state, and the join does not "
                f"keep a right row its state's watermark would evict in the same batch: {cause.detail}"
            )
            return StepResult(Step(op_id, EVICTED_UNMATCHED, b, detail + ".", side, group, cause=cause))
        return None

    # ---- matched

    def _matched(
        self,
        walk: FateWalk,
        view: OpView,
        side: str,
        flow: Flow,
        row: SideRow,
        others: list[SideRow],
        group: str,
        evidence: list[dict[str, Any]],
        final: bool,
    ) -> StepResult:
        op_id, other = view.operator_id, "right" if side == "left" else "left"
        m = row.matched_at
        assert m is not None
        # each row of the other side that was matched while both were held made a joined row, in the
        # batch the later of the two arrived
        pairs = [
            (o, max(row.added, o.added))
            for o in others
            if o.matched_at is not None
            and o.added <= (row.removed if row.removed is not None else walk.last)
            and (o.removed is None or o.removed >= row.added)
            and max(row.added, o.added) >= m
        ]
        detail = (
            f"In the {side} side's state of {view.label} from batch {row.added}; matched in batch {m}"
            + (
                f" with the {other} side's row(s) " + "; ".join(f"{self._row_text(o.value)} (batch {at})" for o, at in pairs[:3])
                if pairs
                else ""
            )
            + "."
        )
        flows = [Flow({**{k: v for k, v in o.value.items() if k != "matched"}, **flow.values}, at) for o, at in pairs]
        flows = flows or [Flow(flow.values, m)]
        outputs = [Output(op_id, group, at, MATCHED, self._pair_text(side, row.value, o.value)) for o, at in pairs] or [
            Output(op_id, group, m, MATCHED, self._pair_text(side, row.value, None))
        ]
        step = Step(op_id, REACHED_STATE if final else PASSED, row.added, detail, side, group, evidence)
        return StepResult(step, flows, outputs)

    # ---- why it never matched

    def _other_side_cause(
        self, walk: FateWalk, view: OpView, side: str, column: str, value: str, row: SideRow, rec: InputRecord
    ) -> Cause:
        """Why no row of the other side was in the state with this one: the other side's records of the
        key, each followed up to the join (filtered, late, a duplicate upstream, late at the join, or
        arriving after this row left), or none in the input at all."""
        op_id, other = view.operator_id, "right" if side == "left" else "left"
        found = view.lookup(other)
        other_col = (found[1].source_column or found[1].name) if found else column
        sources = walk.sources_of(op_id, other) or [s for s in walk.source_names.values() if s and s != rec.source]
        if walk.finder is None or not sources:
            why = (
                f"no {other} row with {column} {value} was in the join's state while this one was, and the "
                f"{other} side's input was not searched"
            )
            return Cause(UNKNOWN, op_id, row.added, side, rec, why, why=why)
        candidates: list[InputRecord] = []
        for source in sources:
            candidates += (walk.find(source, other_col, [value]) or {}).get(value, [])
        candidates = sorted(
            (r for r in candidates if r.batch_id is not None and r.batch_id <= walk.last),
            key=lambda r: (r.batch_id or 0, r.file, r.row),
        )
        own = noun(rec)
        if not candidates:
            return Cause(
                NO_MATCH_IN_INPUT,
                op_id,
                row.added,
                side,
                rec,
                f"no {' or '.join(noun_of(s) for s in sources)} with {other_col} {value} is in the input the query read",
                then=f"the {own} never matched",
            )
        for orec in candidates:
            of = walk.follow(orec, [orec], stop_at=op_id)
            if of.contribution != REACHED:  # lost on its way to the join
                lost = next((s.cause for s in reversed(of.steps) if s.cause is not None), None)
                if lost is not None:
                    lost.then = f"the {own} then never matched"
                    lost.side = other
                    return lost
                continue
            chain = [o.operator_id for o, _ in walk.chain(orec)]
            below = chain[chain.index(op_id) - 1] if op_id in chain and chain.index(op_id) > 0 else None
            arrived = Flow(dict(walk.values_made(orec)), of.at_batch if of.at_batch is not None else orec.batch_id or 0)
            checked = walk.pre_check(view, other, arrived, orec, below)
            if isinstance(checked, StepResult) and checked.step.cause is not None:
                checked.step.cause.then = f"the {own} then never matched"
                return checked.step.cause
            untimed = walk.plan is None and not isinstance(checked, StepResult) and checked[0] is None
            untold = arrived.maybe_late or (
                f"{walk.no_time(view)}: whether it was behind the join's late-row watermark cannot be told" if untimed else ""
            )
            if untold:  # whether it was late at the join cannot be told: nor why they never met
                why = f"its {noun(orec)} ({record_text(orec)}) reached operator {op_id} in batch {arrived.batch}, but {untold}"
                return Cause(UNKNOWN, op_id, arrived.batch, other, orec, why, why=why)
            if row.removed is not None and arrived.batch >= row.removed:
                ot = _first_time(walk.values_made(orec), walk.tz)
                mine = _first_time(row.value, walk.tz)
                gap = (
                    f", {fmt_duration(abs(ot - mine))} {'after' if ot >= mine else 'before'} it"
                    if ot is not None and mine is not None
                    else ""
                )
                return Cause(
                    CONDITION_NOT_MET,
                    op_id,
                    arrived.batch,
                    other,
                    orec,
                    f"its {noun(orec)} ({record_text(orec)}{gap}) reached operator {op_id} in batch "
                    f"{arrived.batch}, after the {own} was evicted in batch {row.removed}: the condition"
                    f"{self._condition(view)} bounds how far apart they may be",
                    then=f"the {own} never matched",
                )
        why = f"the {other} side's records with {other_col} {value} reached the join, yet none was in its state with this row"
        return Cause(UNKNOWN, op_id, row.added, side, rec, why, why=why)

    # ---- text

    def _is_record(self, walk: FateWalk, value: dict[str, Any], record: dict[str, Any]) -> bool:
        common = [k for k in value if k != "matched" and k in record]
        return bool(common) and all(same_value(value[k], record[k], walk.tz) for k in common)

    def _pair_text(self, side: str, mine: dict[str, Any], theirs: dict[str, Any] | None) -> str:
        """A joined output row: the left side's row and the right side's, whichever side asks."""
        pair = [self._row_text(mine), self._row_text(theirs) if theirs is not None else "(a row of the other side)"]
        return " joined with ".join(pair if side == "left" else pair[::-1])

    @staticmethod
    def _row_text(value: dict[str, Any]) -> str:
        parts = [
            f"{k} {fmt_time(to_ms(v)) if isinstance(v, dt.datetime) else key_text(v)}" for k, v in value.items() if k != "matched"
        ]
        return "(" + ", ".join(parts[:4]) + ")"

    @staticmethod
    def _condition(view: OpView) -> str:
        from statelens.analysis.plan.query_plan import readable  # a condition is the plan's: read with it

        return f" `{readable(view.condition)}`" if view.condition else " (its time range; the event log's plan states it)"

    def _pairs(self, side: str, row: SideRow, others: list[SideRow]) -> str:
        """``the right side's row at 00:25:20 is 13m after this row's 00:12:20``."""
        other = "right" if side == "left" else "left"
        mine = _first_time(row.value, "UTC")
        pairs = []
        for o in others[:3]:
            theirs = _first_time(o.value, "UTC")
            if mine is not None and theirs is not None:
                pairs.append(
                    f"the {other} side's row at {fmt_time(theirs)[:-4]} is {fmt_duration(abs(theirs - mine))} "
                    f"{'after' if theirs >= mine else 'before'} this row's {fmt_time(mine)[:-4]}"
                )
        return "; ".join(pairs) or f"the {other} side held this key too (no time to compare)"

    def _rejection(self, view: OpView, side: str, row: SideRow, others: list[SideRow]) -> str:
        return f"{self._pairs(side, row, others)}: the join condition{self._condition(view)} rejected every pair"


def _may_join(view: OpView, row: SideRow, other: SideRow) -> bool:
    """Whether the join's condition may accept a pair of rows (a left semi join's left row gone in the
    batch a right row came: matched, unless the condition rejects the pair, then it was evicted);
    True where it cannot be evaluated (no plan, a column both rows have with other values)."""
    if not view.raw_condition:
        return True
    mine = {k: v for k, v in row.value.items() if k != "matched"}
    theirs = {k: v for k, v in other.value.items() if k != "matched"}
    if any(k in theirs and theirs[k] != v for k, v in mine.items()):
        return True  # the condition names a side for such a column: not told apart here
    from statelens.analysis.plan.predicates import filter_passes  # the plan's condition, evaluated as Spark does

    return filter_passes(view.raw_condition, {**theirs, **mine}).passes is not False


def noun_of(source: str) -> str:
    return noun(InputRecord("", source, 0, None, "", 0, "", {}))


def _first_time(value: dict[str, Any] | None, tz: str) -> int | None:
    for k, v in (value or {}).items():
        if isinstance(v, dt.datetime):
            return to_ms(v)
        if isinstance(v, str) and "time" in k.lower():
            t = event_time_us(v, tz)
            if t is not None:
                return t // 1000
    return None


# a key's one-operator verdict is its two sides' (``analysis.verdicts.join_verdicts``)
KIND = OperatorKind(
    JOIN,
    ("symmetrichashjoin",),
    ("StreamingSymmetricHashJoin",),
    "stream-stream join",
    ("left", "right"),
    unmatched=True,
    watermark_evicts=True,
    stage=JoinStage(),
)
