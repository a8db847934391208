"""The whole query's answer, its own type (``QueryAnswer``), composed here from what the stages
found: per key (``QueryKeyAnswer``) its outcome, root cause and where (the fate), and, as a field, the
verdict of the operator nearest the output whose key holds the key's column (one operator's
diagnosis, ``analysis.verdicts.diagnose``). Each key's fate, its look-alikes' and the verdict each
gives are decided here; nothing edits an answer once built (a fate the state settles is a new one).

``spark_io.gather.fate`` fetches what this asks for (the input files' records, the sink's rows, each
operator's state through ``StateAccess``, the batches late records arrived in) and hands it here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from statelens.analysis.core.errors import StateLensError, StateReadError
from statelens.analysis.core.model import CheckpointInfo, default_operator, operator_of, resolve_batch
from statelens.analysis.core.near_miss import near_miss_reason
from statelens.analysis.core.operator_kinds import JOIN, UnsupportedOperator, find_kind
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.core.state_access import StateAccess
from statelens.analysis.fate.key import SinkSearch, failed_fate, key_fate
from statelens.analysis.fate.model import NEVER_IN_INPUT, UNKNOWN, WRITTEN, KeyFate, NearFate, Output
from statelens.analysis.fate.outcome import from_state, headline
from statelens.analysis.fate.walk import FateWalk, defect
from statelens.analysis.inputs.records import ArrivalSearch, InputSearch
from statelens.analysis.runs.progress import ProgressLog
from statelens.analysis.verdicts import diagnose
from statelens.analysis.verdicts import why_missing as wm
from statelens.analysis.verdicts.diagnose import WhyMissingReport, input_dict

Arrivals = Callable[[list[str], int], ArrivalSearch | None]  # (keys, operator) -> where their late records arrived


@dataclass(frozen=True)
class QueryKeyAnswer:
    """One key's answer through the whole query: its fate (each record to the output: the outcome and
    root cause, the first sentence), the verdict the answer gives (the whole query's where it decides:
    every record dropped as late, never in the input; else its operator's) and, as a field, the verdict
    of the operator nearest the output whose key holds the key's column, as that operator gave it."""

    key: str
    fate: KeyFate
    verdict: str
    verdict_operator: int
    dropped_in_batch: int | None
    explanation: str  # the fate's headline and summary, then the operator's verdict
    near_misses: list[dict[str, Any]]  # every look-alike: the state's sightings and the input's, as followed
    operator: wm.KeyDiagnosis  # the operator's verdict of the key, as it gave it

    whole_query: ClassVar[bool] = True

    @property
    def outcome(self) -> str:
        return self.fate.outcome

    @property
    def cause(self) -> str | None:
        return self.fate.cause.kind if self.fate.cause else None

    @property
    def cause_at(self) -> dict[str, Any] | None:
        return self.fate.cause.to_dict() if self.fate.cause else None

    @property
    def reason(self) -> str | None:
        return self.fate.reason

    @property
    def verdict_explanation(self) -> str:
        return self.operator.explanation

    # what only the operator's state tells: its side, matches, evictions, evidence and the SQL behind it
    side = property(lambda self: self.operator.side)
    side_text = property(lambda self: self.operator.side_text)
    was_matched = property(lambda self: self.operator.was_matched)
    evicted_at_batch = property(lambda self: self.operator.evicted_at_batch)
    evicted_by_side = property(lambda self: self.operator.evicted_by_side)
    matched_at_batch = property(lambda self: self.operator.matched_at_batch)
    matched_as = property(lambda self: self.operator.matched_as)
    evidence = property(lambda self: self.operator.evidence)
    timeline = property(lambda self: self.operator.timeline)
    queries = property(lambda self: self.operator.queries)

    @property
    def looks_for_near_misses(self) -> bool:
        return dataclasses.replace(self.operator, verdict=self.verdict).looks_for_near_misses

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.operator.to_dict(),
            "outcome": self.outcome,
            "cause": self.cause,
            "cause_at": self.cause_at,
            "verdict": self.verdict,
            "verdict_operator": self.verdict_operator,
            "dropped_in_batch": self.dropped_in_batch,
            "explanation": self.explanation,
            "near_misses": self.near_misses,
            "reason": self.reason,
            "fate": self.fate.to_dict(),
        }


@dataclass(frozen=True)
class QueryAnswer:
    """Why-missing of the whole query: each key's answer (``results``) in the order asked, the input
    searched, where the plan came from, and each verdict operator's report of its keys (``verdicts``;
    ``operator_report``: the first key's, whose operator, join and history the answer shows)."""

    checkpoint: str
    batch: int
    key_field: str  # what the keys were asked as (an input column too)
    engine: str
    input_search: InputSearch
    plan_from: str | None
    results: list[QueryKeyAnswer]
    verdicts: dict[tuple[int, str | None], WhyMissingReport]
    shown: tuple[int, str | None]  # the first key's verdict operator and key field

    whole_query: ClassVar[bool] = True

    @property
    def operator_report(self) -> WhyMissingReport:
        return self.verdicts[self.shown]

    @property
    def engine_notes(self) -> list[str]:
        return self.operator_report.engine_notes

    def to_dict(self) -> dict[str, Any]:
        first = self.operator_report.to_dict()
        return {
            **first,
            "engine": self.engine,
            "batch_id": self.batch,
            "key_field": self.key_field,
            "whole_query": True,
            "plan_from": self.plan_from,
            "input": input_dict(self.input_search),
            "results": [r.to_dict() for r in self.results],
        }


def key_fates(
    keys: list[str],
    search: InputSearch,
    walk: FateWalk,
    written: dict[str, list[Output]],
    why_not: str | None,
    sink_searched: bool,
    downstream: SinkSearch | None,
    held: frozenset[str] | None,
) -> dict[str, KeyFate]:
    """Each key's fate; a defect in one key's says so in that key's answer, the other keys still answer."""
    fates = {}
    for k in keys:
        try:
            fates[k] = key_fate(k, search, walk, written.get(k, []), why_not, sink_searched, downstream, held)
        except StateLensError:
            raise
        except Exception as e:
            if walk.strict:
                raise
            fates[k] = failed_fate(k, e)
    return fates


def look_alikes(in_state: list[wm.KeyDiagnosis], fates: dict[str, KeyFate], most: int) -> dict[str, list[tuple[str, str, str]]]:
    """Each key's look-alikes to follow (at most ``most``): (look-alike, why it looks alike, where it was
    seen), the input's sightings first, then its operator's state's."""
    wanted: dict[str, list[tuple[str, str, str]]] = {}
    for d in in_state:
        seen: dict[str, tuple[str, str, str]] = {}
        for r in fates[d.key].near:
            value = str(r.values.get(r.column))
            seen.setdefault(value, (value, r.near or near_miss_reason(d.key, value) or "looks alike", f"input: {r.where()}"))
        for n in d.near_misses:
            seen.setdefault(n["key"], (n["key"], n["reason"], f"{n['where']} store: {n['seen']}"))
        wanted[d.key] = list(seen.values())[:most]
    return wanted


def with_near_fates(
    fates: dict[str, KeyFate],
    wanted: dict[str, list[tuple[str, str, str]]],
    search: InputSearch,
    walk: FateWalk,
    written: dict[str, list[Output]],
    sink_searched: bool,
) -> dict[str, KeyFate]:
    """The fates with what became of each key's look-alikes, followed as keys of their own (the
    actual answer to a mistyped key); a look-alike whose input was not searched either is left out
    (the store's sighting says it all). New fates: the ones given are left as they are."""
    out = dict(fates)
    for key, found in wanted.items():
        near = []
        for near_key, reason, where in found:
            f = key_fate(near_key, search, walk, written.get(near_key, []), None, sink_searched)
            if f.outcome == UNKNOWN:
                continue
            shown = [o for o in f.outputs if o.kind == WRITTEN] or f.outputs
            batches = sorted({o.batch_id for o in shown if o.batch_id is not None})
            near.append(
                NearFate(near_key, reason, where, f.outcome, batches, sorted({o.file for o in shown if o.file}), f.headline)
            )
        if near:
            out[key] = dataclasses.replace(fates[key], near_fates=[*fates[key].near_fates, *near])
    return out


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
                    return op.operator_id, f"field{i}" if view.kind == JOIN else c.name
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
        keys = walk.view(operator_of(info, op_id)).keys
        if field_name is None and q.key_field is not None and keys:
            # no operator's key holds the column asked: its value is no key of this operator's (looking
            # it up in the operator's own key field would answer for another field); the records tell
            held = ", ".join(dict.fromkeys(c.name for cols in keys.values() for c in cols))
            why = f"its key ({held}) does not hold {q.key_field}; the input records followed through it tell what became of them"
            reports[(op_id, field_name)] = failed_verdict(info, op_id, q.batch, field_name, asked, why, access)
            continue
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
) -> QueryAnswer:
    """The whole query's answer: each key's fate and its operator's verdict, in the order asked; a key
    never in the input whose look-alikes were followed says first what became of them."""
    results = []
    for k in q.keys:
        report = reports[chosen[k]]
        verdict = next(r for r in report.results if r.key == k)
        fate = fates[k]
        if fate.near_fates:
            fate = dataclasses.replace(fate, headline=headline(fate, fate.written))
        results.append(key_answer(verdict, fate, chosen[k][0], report.kind, report.join_type, report.output_mode_assumed))
    first = reports[chosen[q.keys[0]]]
    return QueryAnswer(
        first.checkpoint,
        first.batch,
        q.key_field or first.key_field,
        first.engine,
        search,
        plan_from,
        results,
        reports,
        chosen[q.keys[0]],
    )


def key_answer(
    verdict: wm.KeyDiagnosis,
    fate: KeyFate,
    operator_id: int,
    kind: str,
    join_type: str | None = None,
    mode_assumed: bool = False,
) -> QueryKeyAnswer:
    """One key's answer: the outcome and its root cause first, then the operator's verdict (the whole
    query's where it decides: every record dropped as late, never in the input)."""
    fate = settled(fate, verdict, operator_id, kind, join_type, mode_assumed)
    said, at, dropped = verdict.verdict, operator_id, verdict.dropped_in_batch
    if fate.verdict in (wm.DROPPED_AS_LATE, NEVER_IN_INPUT):
        said = fate.verdict
        late = [s for r in fate.records for s in r.steps if s.outcome == wm.DROPPED_AS_LATE]
        dropped = late[0].batch if late else None
        if late:  # the operator that dropped it gives the verdict
            at = late[0].operator_id
    explanation = " ".join(
        t for t in (fate.headline, fate.summary, f"Operator {operator_id}'s verdict: {verdict.explanation}") if t
    )
    return QueryKeyAnswer(verdict.key, fate, said, at, dropped, explanation, near_misses(verdict.near_misses, fate), verdict)


def settled(
    fate: KeyFate, verdict: wm.KeyDiagnosis, operator_id: int, kind: str, join_type: str | None, mode_assumed: bool
) -> KeyFate:
    """The fate as the operator's state settles it: a key the state holds that no input column holds
    is the state's to answer (its operator's key is computed); a key whose records were not followed
    takes its outcome from the state. A new fate: the one given is left as it is."""
    if fate.outcome == NEVER_IN_INPUT and verdict.verdict not in (wm.NEVER_IN_STATE, wm.UNKNOWN):
        # the key is in the state but no input column holds it: the operator's key is computed (an
        # expression of the input), so its records were not found: the state's verdict stands
        fate = dataclasses.replace(
            fate,
            outcome=UNKNOWN,
            cause=None,
            headline="",
            notes=[
                *fate.notes,
                "No input column holds this key as it is, yet the state does: the operator's key is computed from the "
                "input (an expression), so its records were not found; the verdict is the state's.",
            ],
        )
    if fate.outcome == UNKNOWN and not fate.records and operator_id == 0:
        fate = from_state(
            fate, verdict.verdict, verdict.was_matched, kind, verdict.explanation, operator_id, join_type, mode_assumed
        )
    return fate


def near_misses(in_state: list[dict[str, Any]], fate: KeyFate) -> list[dict[str, Any]]:
    """Every look-alike of the key in one shape, where it was seen with what became of it (None: not
    followed): the state's sightings and the input's, as the fate followed them."""
    followed = {n.key: n for n in fate.near_fates}
    out = {n["key"]: {**n, "outcome": None, "batches": [], "files": []} for n in in_state}
    for key, n in followed.items():
        seen = out.setdefault(key, {"key": key, "reason": n.reason, "where": n.where, "seen": n.where})
        seen.update(outcome=n.outcome, batches=n.batches, files=n.files)
    return list(out.values())
