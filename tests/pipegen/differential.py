"""State Lens's why-missing against the truth: for each designed key, its ``outcome``, ``cause`` and
``cause_at`` (operator, batch), on an engine, with or without the event log.

Scored as strictly without the event log as with it: a definite answer is compared on outcome, cause,
operator and batch. An ``unknown`` answer (a refusal) is never counted right: it is a *named limit*,
its reason listed by the wide run, unless the sink's files hold the key (then it is wrong: what the
sink holds is written, with or without the plan). A key whose truth is undetermined is not scored."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipegen.truth import NEVER, PARTLY, UNDETERMINED, UNMATCHED, WRITTEN, KeyTruth, Truth
from statelens.analysis.core.question import KeyQuestion

REACHED_OUTCOMES = (WRITTEN, PARTLY, UNMATCHED)
# what State Lens does not follow yet, and says so (its answer ``unknown``, with why): design -> why
LIMITS = {
    "not in the static table (left_outer join)": (
        "its record reaches the aggregation with a null key (the left outer join found no row for it): "
        "the state of a null key is not looked up"
    ),
    "not in the static table (right_outer join)": (
        "its record reaches the aggregation with a null key (the outer join found no row for it): "
        "the state of a null key is not looked up"
    ),
}


@dataclass
class Check:
    pipeline: str
    key: str
    design: str
    engine: str
    event_log: bool
    verdict: str  # right | wrong | crashed | limit (a named limit, answered unknown) | undetermined
    truth: str
    got: str
    problems: list[str]

    def line(self) -> str:
        how = f"{self.engine}{'' if self.event_log else ', no event log'}"
        return f"{self.pipeline} {self.key!r} ({how}) [{self.design}]: {self.verdict}: truth {self.truth}; got {self.got}" + (
            "" if not self.problems else " -- " + "; ".join(self.problems)
        )


@contextmanager
def engine(name: str) -> Iterator[None]:
    from statelens.spark_io.readers import engine as eng

    eng.configure(name)
    try:
        yield
    finally:
        eng.configure("auto")


def input_root(folder: Path) -> tuple[str, ...]:
    """Where a pipeline's input files are now (the pipeline's folder moved since Spark ran it): with
    cleanSource=archive, the files Spark read under archive/ and the rest where they were written,
    inputs/ (a file no batch read stays there); else inputs/."""
    archive, inputs = folder / "archive", folder / "inputs"
    if not archive.is_dir():
        return (str(inputs),)
    return (str(archive), str(inputs)) if inputs.is_dir() else (str(archive),)  # every file read: all archived


def ask(folder: Path, keys: list[str], key_field: str | None, with_log: bool) -> Any:
    from statelens.spark_io.gather.diagnosis import why_missing

    return why_missing(
        str(folder / "checkpoint"),
        KeyQuestion(
            tuple(keys),
            key_field=key_field,
            event_log=str(folder / "event_log") if with_log else None,
            input_root=input_root(folder),
            sink=str(folder / "sink"),
        ),
    )


def cli_args(folder: Path, keys: list[str], with_log: bool = True) -> list[str]:
    """``cli.py why-missing``'s arguments for keys of a generated pipeline's folder (native engine)."""
    log = ["--event-log", str(folder / "event_log")] if with_log else []
    paths = [*(a for root in input_root(folder) for a in ("--input-root", root)), "--sink", str(folder / "sink")]
    return ["why-missing", str(folder / "checkpoint"), *keys, *log, *paths, "--engine", "native"]


def truths(truth: Truth) -> list[KeyTruth]:
    out = []
    for k in truth.p.keys:
        t = truth.key(k["key"], k["ask"], k["design"])
        if k.get("near"):
            t.near = truth.key(k["near"], k["ask"], "its look-alike")
        out.append(t)
    return out


def check(truth: Truth, engines: list[str], logs: tuple[bool, ...] = (True, False)) -> list[Check]:
    """Every designed key, on each engine, with and without the event log."""
    folder, name = truth.folder, truth.p.name
    keyed = truths(truth)
    out: list[Check] = []
    groups: dict[str | None, list[KeyTruth]] = {}
    for t in keyed:
        groups.setdefault(t.ask, []).append(t)
    for eng in engines:
        for with_log in logs:
            for field, ts in groups.items():
                try:
                    with engine(eng):
                        report = ask(folder, [t.key for t in ts], field, with_log)
                    results = {r.key: r for r in report.results}
                except Exception as e:  # a crash of one answer: every key asked in it
                    from statelens.analysis.core.errors import StateLensError

                    refused = isinstance(e, StateLensError)
                    text = str(e) if refused else traceback.format_exc(limit=-3).strip().splitlines()[-1]
                    # without the plan, a field that is no input column nor state key may be refused, saying so:
                    # a named limit (never right), like any answer that does not tell
                    verdict = "limit" if refused and not with_log and "event log" in text else "crashed"
                    got = f"{'unknown (refused)' if refused else 'crashed'}: {text}"
                    why = [text] if verdict == "limit" else []
                    out += [Check(name, t.key, t.design, eng, with_log, verdict, t.summary(), got, why) for t in ts]
                    continue
                for t in ts:
                    out.append(_judged(name, t, eng, with_log, results.get(t.key), field, report.key_field))
    return out


def _judged(name: str, t: KeyTruth, eng: str, with_log: bool, r: Any, field: str | None, echoed: str) -> Check:
    """One key's answer against its truth."""
    truth = t.summary() + (f" ({t.why})" if t.why else "")
    if r is None:
        return Check(name, t.key, t.design, eng, with_log, "wrong", truth, "no answer", ["key missing from the results"])
    problems = compare(t, r, with_log)
    if field is not None and echoed != field:
        problems.append(f"key_field echoed {echoed!r}, asked {field!r}")
    verdict = "undetermined" if t.outcome == UNDETERMINED else ("wrong" if problems else "right")
    limit = next((why for design, why in LIMITS.items() if t.design.startswith(design)), None)
    if problems and limit and r.outcome == "unknown":
        verdict, problems = "limit", [limit]
    elif verdict == "right" and refusal(t, r):
        verdict, problems = "limit", [refusal(t, r)]
    at = r.cause_at or {}
    got = f"{r.outcome}" + (f", {r.cause} at operator {at.get('operator_id')}, batch {at.get('batch_id')}" if r.cause else "")
    return Check(name, t.key, t.design, eng, with_log, verdict, truth, got, problems)


def refusal(t: KeyTruth, r: Any) -> str:
    """An answer that does not tell (``unknown`` outcome or cause) of a key whose truth is definite: its
    reason as the answer gives it (the limit named), else ""."""
    if t.outcome == UNDETERMINED or (r.outcome != "unknown" and r.cause != "unknown"):
        return ""
    cause = r.fate.cause if r.fate else None
    why = (cause.why if cause else None) or (r.fate.headline if r.fate else "") or r.explanation
    return f"answered {r.outcome}/{r.cause}: {why}"


def compare(t: KeyTruth, r: Any, with_log: bool) -> list[str]:
    """What the answer gets wrong: its outcome, its cause, where the cause happened, a look-alike."""
    if t.outcome == UNDETERMINED:
        return []
    problems: list[str] = []
    if r.outcome == "unknown" or r.cause == "unknown":
        # a refusal: a named limit (``refusal``), unless it contradicts what it does say or the sink's files
        if r.outcome != "unknown" and (t.outcome in REACHED_OUTCOMES) != (r.outcome in REACHED_OUTCOMES):
            problems.append(f"outcome {r.outcome}, truly {t.outcome}")
        elif t.outcome in REACHED_OUTCOMES and r.outcome == "unknown" and t.in_sink:
            problems.append(f"outcome unknown, but the sink holds it: truly {t.outcome}")
        return problems
    if r.outcome != t.outcome:
        problems.append(f"outcome {r.outcome}, truly {t.outcome}")
        return problems
    at = r.cause_at or {}
    if t.cause is None:
        if r.cause is not None:
            problems.append(f"cause {r.cause}, truly none")
    elif t.outcome == NEVER:
        if r.cause != "never_in_input":
            problems.append(f"cause {r.cause}, truly never_in_input")
        said = (r.cause_at or {}).get("detail") or ""
        problems += [f"the file {f} that holds it and no batch read is not named" for f in t.unread if f not in said]
    else:
        accepted = t.causes or [t.cause]
        if t.cause not in accepted:
            accepted = [t.cause, *accepted]
        kinds = {c.kind for c in accepted}
        if r.cause not in kinds:
            problems.append(f"cause {r.cause}, truly {t.cause.kind}")
        elif r.cause in kinds:
            ok = [c for c in accepted if c.kind == r.cause]
            if not any(at.get("operator_id") == c.operator and (c.batch is None or at.get("batch_id") == c.batch) for c in ok):
                where = ", ".join(f"operator {c.operator}, batch {c.batch}" for c in ok)
                problems.append(f"cause at operator {at.get('operator_id')}, batch {at.get('batch_id')}; truly at {where}")
    if t.near is not None and t.near.outcome in REACHED_OUTCOMES:
        near = {n.key: n.outcome for n in (r.fate.near_fates if r.fate else [])}
        if near.get(t.near.key) != t.near.outcome:
            problems.append(f"look-alike {t.near.key!r}: {near.get(t.near.key, 'not named')}, truly {t.near.outcome}")
    return problems
