"""applyInPandasWithState and flatMapGroupsWithState (transformWithState's stage too): the record
changed its group's state; what the user's function emitted is not in the state. The stage says when the state
was removed (the function may have emitted then) or what still holds it (a timeout, a timer); the
outcome comes from the sink's files (``analysis.fate.outcome``)."""

from __future__ import annotations

from typing import Any

from statelens.analysis.core.operator_kinds import GROUP_STATE, OperatorKind
from statelens.analysis.fate.model import REACHED_STATE, STATE_REMOVED, Output, Step, Waiting, fmt_time
from statelens.analysis.fate.stage import Stage
from statelens.analysis.fate.walk import Arrival, FateWalk, OpView, StepResult, key_id
from statelens.analysis.verdicts.stateful_verdicts import holds_state


def _timeout(rows: list[dict[str, Any]]) -> int | None:
    """The group's timeout (ms) in its state rows (``timeoutTimestamp``), if one is set."""
    for r in rows:
        v = r.get("value")
        t = v.get("timeoutTimestamp") if isinstance(v, dict) else None
        if isinstance(t, int) and t > 0:
            return t
    return None


class GroupStateStage(Stage):
    def step(self, walk: FateWalk, view: OpView, a: Arrival) -> StepResult:
        side, flow, rec, final = a.side, a.flow, a.rec, a.final
        op_id, b = view.operator_id, flow.batch
        state = self.state_of(walk, view, side, flow, rec)
        if isinstance(state, StepResult):
            return state
        col, value, [hist] = state
        updates = [c for c in hist.changes if c["batch_id"] == b]
        group = f"{col.name} {value}"
        if not updates:
            return self.not_found(walk, view, flow, rec, f"A change of the group {group}")
        removed = next(
            (
                c["batch_id"]
                for c in sorted(hist.changes, key=lambda c: c["batch_id"])
                if c["batch_id"] > b and c["change_type"] == "delete"
            ),
            None,
        )
        outputs: list[Output] = []
        waiting: list[Waiting] = []
        if removed is not None:
            outputs.append(Output(op_id, group, removed, STATE_REMOVED, f"its state was removed in batch {removed}"))
            text = f"its state was removed in batch {removed} (timed out, or removed by the function)"
        elif hist.rows:
            timeout = _timeout(hist.rows)
            if timeout is not None:
                waiting.append(
                    walk.release(op_id, timeout, group, None, f"the state of {group} (its timeout at {fmt_time(timeout)[:-4]})")
                )
            else:
                waiting.append(Waiting(op_id, group, None, None, f"the state of {group} is held; no timeout is set"))
            text = "its state is still held" + (f" (times out at {fmt_time(timeout)})" if timeout else "")
        else:
            text = "its state is no longer held"
        detail = (
            f"Its group ({group}) state changed in {view.label} in batch {b}; {text}. What the user's function emitted "
            "is not kept in the state: the sink's files tell."
        )
        if not final:
            walk.note(f"What {view.label} emitted is not in its state: the operators after it are not followed.")
        return StepResult(
            Step(op_id, REACHED_STATE, b, detail, None, group, [dict(c) for c in updates][:10], key=key_id(updates[0]["key"])),
            [],
            outputs,
            waiting,
        )


KIND = OperatorKind(
    GROUP_STATE,
    ("flatmapgroupswithstate*", "applyinpandaswithstate*", "flatmapgroupsinpandaswithstate*"),
    ("FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState"),
    "group state",
    function=True,
    stage=GroupStateStage(),
    in_state=holds_state,
)
