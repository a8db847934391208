"""The whole query's answer, composed here from what the stages found: per key its outcome, root
cause and where (the fate), and the verdict of the operator nearest the output whose key holds the
key's column (one operator's diagnosis, ``analysis.verdicts.diagnose``) below it.

``spark_io.gather.fate`` fetches what this asks for (the input files' records, the sink's rows, each
operator's state through ``StateAccess``, the batches late records arrived in) and hands it here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statelens.analysis.core.errors import StateLensError, StateReadError
from statelens.analysis.core.model import CheckpointInfo, default_operator, operator_of, resolve_batch
from statelens.analysis.core.operator_kinds import UnsupportedOperator, find_kind
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.core.state_access import StateAccess
from statelens.analysis.fate.model import NEVER_IN_INPUT, UNKNOWN, KeyFate
from statelens.analysis.fate.outcome import from_state, headline
from statelens.analysis.fate.walk import FateWalk, defect
from statelens.analysis.inputs.records import ArrivalSearch, InputSearch
from statelens.analysis.runs.progress import ProgressLog
from statelens.analysis.verdicts import diagnose
from statelens.analysis.verdicts import why_missing as wm
from statelens.analysis.verdicts.diagnose import WhyMissingReport

Arrivals = Callable[[list[str], int], ArrivalSearch | None]  # (keys, operator) -> where their late records arrived


@dataclass
class WholeQueryReport(WhyMissingReport):
    """Why-missing of the whole query: each key's outcome, root cause and flow (``results[i].fate``), its
    operator's verdict below it. Its own type: the one-operator answer is a ``WhyMissingReport``."""

    whole_query: bool = True


def verdict_operator(walk: FateWalk, fate: KeyFate, key_field: str | None, info: CheckpointInfo) -> tuple[int, str | None]:
    """(operator, key field) whose single-operator verdict the key keeps: the operator nearest the
    output whose key holds the column the key was found in (else the default operator)."""
    column = fate.records[0].record.column if fate.records else None
    for op in sorted(info.operators, key=lambda o: o.operator_id):
        view = walk.view(op)
        for side in view.keys:
            found = view.lookup(side)
            if found and column and (found[1].source_column or found[1].name) == column:
                return op.operator_id, found[0]
    # no record found: the operator nearest the output whose key has the field asked for, else the
    # default operator's own key field (the fate tells the rest)
    for op in sorted(info.operators, key=lambda o: o.operator_id):
        view = walk.view(op)
        for cols in view.keys.values():
            for i, c in enumerate(cols):
                if key_field is not None and key_field in (c.name, c.source_column, f"field{i}"):
                    return op.operator_id, f"field{i}" if view.kind == "join" else c.name
    return default_operator(info).operator_id, None


def verdicts(
    walk: FateWalk,
    fates: dict[str, KeyFate],
    q: KeyQuestion,
    access: StateAccess,
    progress: ProgressLog | None,
    arrivals: Arrivals,
) -> tuple[dict[str, tuple[int, str | None]], dict[tuple[int, str | None], WhyMissingReport]]:
    """Each key's verdict operator, and each such operator's diagnosis of its keys. A verdict that
    cannot be told (its state unreadable, its kind not supported, a defect) says so; the keys keep
    their fate."""
    info = walk.info
    chosen = {k: verdict_operator(walk, fates[k], q.key_field, info) for k in q.keys}
    reports: dict[tuple[int, str | None], WhyMissingReport] = {}
    for op_id, field_name in dict.fromkeys(chosen.values()):
        asked = [k for k in q.keys if chosen[k] == (op_id, field_name)]
        try:
            one = q.but(keys=tuple(asked), operator=op_id, key_field=field_name)
            reports[(op_id, field_name)] = diagnose.why_missing(access, info, one, progress, arrivals(asked, op_id))
        except (StateReadError, UnsupportedOperator) as e:
            reports[(op_id, field_name)] = failed_verdict(info, op_id, q.batch, field_name, asked, e.message, access)
        except StateLensError:
            raise
        except Exception as e:  # a defect in the operator's verdict: its keys keep their fate, the verdict says so
            if walk.strict:
                raise
            reports[(op_id, field_name)] = failed_verdict(info, op_id, q.batch, field_name, asked, defect(e), access)
    return chosen, reports


def failed_verdict(
    info: CheckpointInfo, op_id: int, batch_id: int | None, field_name: str | None, keys: list[str], why: str, access: Any
) -> WhyMissingReport:
    """An operator's verdict that cannot be told: ``unknown`` for each of its keys, saying why."""
    op = operator_of(info, op_id)
    report = WhyMissingReport(
        info.path,
        op_id,
        op.operator_name,
        find_kind(op.operator_name) or op.operator_name,
        resolve_batch(info, batch_id),
        field_name or "",
        [],
        None,
        {},
    )
    report.results = [wm.KeyDiagnosis(k, UNKNOWN, f"It cannot be told: {why}.") for k in keys]
    report.engine = str(getattr(access, "engine", report.engine))  # what read the state the fate walked
    return report


def answer(
    q: KeyQuestion,
    fates: dict[str, KeyFate],
    chosen: dict[str, tuple[int, str | None]],
    reports: dict[tuple[int, str | None], WhyMissingReport],
    search: InputSearch,
    plan_from: str | None,
) -> WholeQueryReport:
    """The whole query's answer: each key's fate and its operator's verdict, in the order asked; a key
    never in the input whose look-alikes were followed says first what became of them."""
    results = []
    for fate in fates.values():
        if fate.near_fates:
            fate.headline = headline(fate, fate.written)
    for k in q.keys:
        report = reports[chosen[k]]
        verdict = next(r for r in report.results if r.key == k)
        results.append(key_answer(verdict, fates[k], chosen[k][0], report.kind, report.join_type, report.output_mode_assumed))
    first = reports[chosen[q.keys[0]]]
    fields = {f.name: getattr(first, f.name) for f in dataclasses.fields(WhyMissingReport)}
    fields.update(
        results=results,
        key_field=q.key_field or first.key_field,  # what the keys were asked as (an input column too)
        input_search=search,
        plan_from=plan_from,
        whole_query=True,
    )
    return WholeQueryReport(**fields)


def key_answer(
    verdict: wm.KeyDiagnosis,
    fate: KeyFate,
    operator_id: int,
    kind: str,
    join_type: str | None = None,
    mode_assumed: bool = False,
) -> wm.KeyDiagnosis:
    """One key's answer: the outcome and its root cause first, then the operator's verdict (the whole
    query's where it decides: every record dropped as late, never in the input). ``verdict`` is left
    as its operator gave it."""
    d = dataclasses.replace(verdict)
    d.fate = fate
    d.reason = fate.reason
    d.near_misses = near_misses(verdict.near_misses, fate)
    if fate.outcome == NEVER_IN_INPUT and d.verdict not in (wm.NEVER_IN_STATE, wm.UNKNOWN):
        # the key is in the state but no input column holds it: the operator's key is computed (an
        # expression of the input), so its records were not found: the state's verdict stands
        fate.outcome = UNKNOWN
        fate.cause = None
        fate.notes.append(
            "No input column holds this key as it is, yet the state does: the operator's key is computed from the input "
            "(an expression), so its records were not found; the verdict is the state's."
        )
        fate.headline = ""
    if fate.outcome == UNKNOWN and not fate.records and operator_id == 0:
        from_state(fate, d.verdict, d.was_matched, kind, d.explanation, operator_id, join_type, mode_assumed)
    d.verdict_operator = operator_id
    if fate.verdict in (wm.DROPPED_AS_LATE, NEVER_IN_INPUT):
        d.verdict = fate.verdict
        late = [s for r in fate.records for s in r.steps if s.outcome == wm.DROPPED_AS_LATE]
        d.dropped_in_batch = late[0].batch if late else None
        if late:  # the operator that dropped it gives the verdict
            d.verdict_operator = late[0].operator_id
    d.outcome = fate.outcome
    d.cause = fate.cause.kind if fate.cause else None
    d.cause_at = fate.cause.to_dict() if fate.cause else None
    d.verdict_explanation = verdict.explanation
    d.explanation = " ".join(
        t for t in (fate.headline, fate.summary, f"Operator {operator_id}'s verdict: {verdict.explanation}") if t
    )
    return d


def near_misses(in_state: list[dict[str, Any]], fate: KeyFate) -> list[dict[str, Any]]:
    """Every look-alike of the key in one shape, where it was seen with what became of it (None: not
    followed): the state's sightings and the input's, as the fate followed them."""
    followed = {n.key: n for n in fate.near_fates}
    out = {n["key"]: {**n, "outcome": None, "batches": [], "files": []} for n in in_state}
    for key, n in followed.items():
        seen = out.setdefault(key, {"key": key, "reason": n.reason, "where": n.where, "seen": n.where})
        seen.update(outcome=n.outcome, batches=n.batches, files=n.files)
    return list(out.values())
