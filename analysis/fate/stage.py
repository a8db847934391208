"""What every stage shares: the operator's state of the row's lookup value, a read that failed, a row
not in the state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statelens.analysis.core.state_access import key_text
from statelens.analysis.fate.model import NOT_FOUND, UNKNOWN, Cause, Step
from statelens.analysis.fate.walk import Arrival, FateWalk, Flow, History, OpView, StepResult, column_value, same_value
from statelens.analysis.inputs.records import InputRecord

if TYPE_CHECKING:
    from statelens.analysis.plan.query_plan import Column


class Stage:
    """One operator kind's part of the walk: what the operator did with a row that reached it (its
    filters and late-row watermark already passed), what it sends on, what it emitted, what waits."""

    def step(self, walk: FateWalk, view: OpView, a: Arrival) -> StepResult:
        raise NotImplementedError

    # ---- shared

    def state_of(
        self, walk: FateWalk, view: OpView, side: str, flow: Flow, rec: InputRecord, sides: tuple[str, ...] = ("",)
    ) -> tuple[Column, str, list[History]] | StepResult:
        """The key column an operator looks the row up by, the row's value of it, and the state (rows
        and history) of that value on each of ``sides``; or the step that says why it cannot be told."""
        found = view.lookup(side)
        if not found:
            whose = f"the {side} side's key" if side else "the key"
            return self.unknown(
                view, flow, rec, side, f"{whose.capitalize()} of {view.label} has no column to look the row up by."
            )
        field_name, col = found
        value = key_text(column_value(flow.values, col))
        if value is None and col.name in flow.computed:
            why = (
                f"Its {col.name} is computed by the query before {view.label} (a function or expression State Lens does "
                "not evaluate), so the state row it became cannot be looked up by what the record holds."
            )
            return self.unknown(view, flow, rec, side, why)
        if value is None:
            name = col.source_column or col.name
            why = (
                f"Its {name} is null here (a join that kept it unmatched gives nulls): the state of a null key is not "
                f"looked up, so what {view.label} did with it cannot be told."
                if name in flow.values
                else f"The record has no {name}."
            )
            return self.unknown(view, flow, rec, side, why)
        hists = [walk.history(view.op, s, field_name, [value])[value] for s in sides]
        for h in hists:
            missing = self.missing_history(walk, view, flow, rec, h, side)
            if missing:
                return missing
        return col, value, hists

    def missing_history(
        self, walk: FateWalk, view: OpView, flow: Flow, rec: InputRecord, hist: History, side: str
    ) -> StepResult | None:
        if hist.error:
            return self.unknown(view, flow, rec, side, f"Unknown: {hist.error}")
        if flow.batch < walk.first:
            why = f"Batch {flow.batch} is older than the oldest retained batch ({walk.first}): its state was purged."
            return self.unknown(view, flow, rec, side, why)
        return None

    def unknown(self, view: OpView, flow: Flow, rec: InputRecord, side: str, why: str) -> StepResult:
        cause = Cause(UNKNOWN, view.operator_id, flow.batch, side or None, rec, why, why=why)
        return StepResult(Step(view.operator_id, UNKNOWN, flow.batch, why, side or None, cause=cause))

    def not_found(self, walk: FateWalk, view: OpView, flow: Flow, rec: InputRecord, what: str, side: str = "") -> StepResult:
        """Not in the operator's state, not late, not a duplicate: a filter on the way that could not be
        evaluated may have removed it; else nothing here tells why."""
        op_id, b, sd = view.operator_id, flow.batch, side or None
        state = f"the {side} side's state" if side else "the state"
        if flow.late_if_absent is not None:
            return StepResult(flow.late_if_absent)
        if flow.maybe_late:
            detail = f"{what} is not in {state} of {view.label} after batch {b}: {flow.maybe_late}."
            return StepResult(Step(op_id, NOT_FOUND, b, detail, sd, cause=Cause(UNKNOWN, op_id, b, sd, rec, detail, why=detail)))
        if flow.unevaluated:
            shown = "; ".join(flow.unevaluated)
            detail = (
                f"{what} is not in {state} of {view.label} after batch {b}, and it was not late: a filter on its way "
                f"that State Lens did not evaluate may have removed it: {shown}."
            )
            return StepResult(Step(op_id, NOT_FOUND, b, detail, sd, cause=Cause(UNKNOWN, op_id, b, sd, rec, detail, why=detail)))
        detail = f"{what} is not in {state} of {view.label} after batch {b}, and it was not late."
        if walk.plan is None and len(walk.info.operators) > 1:  # its way through them is inferred: no loss told
            why = (
                f"{detail} Without the query's event log its way through the operators (which ones, which join side, "
                "which filters) is inferred, not read: whether it was lost cannot be told"
            )
            return StepResult(Step(op_id, UNKNOWN, b, why + ".", sd, cause=Cause(UNKNOWN, op_id, b, sd, rec, why, why=why)))
        why = detail + (
            " No filter on its way removed it, as far as the plan tells."
            if walk.plan is not None
            else " Without the query's event log, the filters on its way are not known."
        )
        return StepResult(Step(op_id, NOT_FOUND, b, detail, sd, cause=Cause(UNKNOWN, op_id, b, sd, rec, why, why=why)))


def key_has(key: dict[str, Any], wanted: dict[str, Any], tz: str) -> bool:
    return all(same_value(key[k], v, tz) for k, v in wanted.items() if k in key)
