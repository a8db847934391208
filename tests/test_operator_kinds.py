"""The registry of operator kinds (``analysis.kinds``, one module each, seen through
``analysis.core.operator_kinds``): every kind Spark wrote in the samples is claimed by one, every kind
declares its fate stage and its verdict, and an operator no kind claims is never
walked as another: a key through it is ``unknown``, saying so, while the other keys still answer."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from statelens.analysis.core.operator_kinds import LIMIT, UnsupportedOperator, find_kind, kind_of, plan_nodes
from statelens.analysis.kinds import KINDS
from support import SAMPLES


def test_every_kind_has_its_stage_and_its_plan_nodes() -> None:
    kinds = [k.kind for k in KINDS]
    assert len(kinds) == len(set(kinds))
    assert {k.kind for k in KINDS if k.stage is not None} == set(kinds) - {
        LIMIT
    }  # a global limit's state holds a count, no key's rows
    assert all(k.plan_nodes for k in KINDS) and len(plan_nodes()) == sum(len(k.plan_nodes) for k in KINDS)


def test_each_kind_is_one_module_of_the_registry() -> None:
    """One module per kind in ``analysis/kinds``, each declaring one kind, every one of them listed once
    in ``KINDS``: a module the registry does not list would be a kind no checkpoint is ever read as."""
    from support import ROOT

    modules = {p.stem for p in (ROOT / "analysis" / "kinds").glob("*.py") if p.stem != "__init__"}
    declared = {_module_of(k) for k in KINDS}
    assert declared == modules and len(KINDS) == len(modules)


def _module_of(kind: object) -> str:
    import statelens.analysis.kinds as pkg

    return next(m for m in pkg.__dict__ if getattr(getattr(pkg, m), "KIND", None) is kind)


def test_every_kind_has_its_verdict_and_none_is_guessed() -> None:
    """The one-operator verdict of a key in state is the kind's own (a join's: both sides, its own
    module); a kind without one is refused, never given another kind's."""
    from statelens.analysis.core.operator_kinds import JOIN
    from statelens.analysis.verdicts.stateful_verdicts import in_state_verdict

    assert {k.kind for k in KINDS if k.in_state is not None} == {k.kind for k in KINDS} - {JOIN}
    with pytest.raises(UnsupportedOperator, match="no verdict"):
        in_state_verdict("streaming_top_k")


def test_kind_strings_live_in_the_registry() -> None:
    """No module compares an operator's kind with a string of its own: what follows from a kind is
    the registry's (``OperatorKind``: its sides, a user's function, emitted when evicted, evicted by
    the watermark, unmatched keys) or its constant."""
    from support import ROOT

    kinds = "|".join(re.escape(k.kind) for k in KINDS)
    compared = re.compile(rf'(==|!=|\bin \(?)\s*"({kinds})"|"({kinds})"\s*(==|!=)|\(\s*"({kinds})",')
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for folder in ("analysis", "spark_io", "statelens", "views", "commands")
        for p in (ROOT / folder).rglob("*.py")
        if not p.is_symlink() and p.name != "operator_kinds.py" and p.parent.name != "kinds"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if compared.search(line)
    ]
    assert found == []


def test_every_operator_name_spark_wrote_in_the_samples_has_its_kind() -> None:
    names = {
        m
        for f in SAMPLES.rglob("state/*/_metadata/metadata")
        for m in re.findall(r'"operatorName":"([^"]+)"', f.read_text("utf-8", errors="replace"))
    }
    assert {"stateStoreSave", "symmetricHashJoin", "dedupe", "dedupeWithinWatermark"} <= names
    assert {n: find_kind(n) for n in names if find_kind(n) is None} == {}
    assert kind_of("dedupeWithinWatermark") == "dedup_within_watermark" and kind_of("dedupe") == "dedup"


def test_a_name_no_kind_claims_is_refused_not_guessed() -> None:
    assert find_kind("streamingTopKExec") is None
    with pytest.raises(UnsupportedOperator, match="operator kind streamingTopKExec is not supported yet"):
        kind_of("streamingTopKExec")


def _answers(checkpoint: Path, keys: list[str]) -> dict[str, dict]:
    inputs = SAMPLES / "inputs" / "dedup_window_chain"
    from statelens import cli
    from statelens.spark_io.runtime import engine_choice

    out, err = io.StringIO(), io.StringIO()
    before = engine_choice.current()  # --engine chooses for the whole process: put back after
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["why-missing", str(checkpoint), *keys, "--input-root", str(inputs), "--engine", "native", "--json"])
        finally:
            engine_choice.configure(before)
    assert code == 0, err.getvalue()
    return {a["key"]: a for a in json.loads(out.getvalue())["results"]}


def test_a_key_through_an_unsupported_operator_is_unknown_and_the_others_still_answer(tmp_path: Path) -> None:
    """The chain's window aggregation (operator 0) renamed to a kind nobody knows, in a copy: a key whose
    record reaches it is unknown there, saying why; a key dropped before it (by the dedup, operator 1)
    answers as on the real checkpoint."""
    copy = tmp_path / "cp"
    shutil.copytree(SAMPLES / "dedup_window_chain", copy)
    meta = copy / "state" / "0" / "_metadata" / "metadata"
    meta.write_text(meta.read_text().replace('"operatorName":"stateStoreSave"', '"operatorName":"streamingTopKExec"'))
    real = _answers(SAMPLES / "dedup_window_chain", ["user-late", "user-second"])
    got = _answers(copy, ["user-late", "user-second"])
    assert {k: got["user-late"][k] for k in ("outcome", "cause", "cause_at")} == {
        k: real["user-late"][k] for k in ("outcome", "cause", "cause_at")
    }
    assert real["user-late"]["outcome"] == "lost" and real["user-late"]["cause_at"]["operator_id"] == 1
    second = got["user-second"]
    assert (second["outcome"], second["cause"], second["cause_at"]["operator_id"]) == ("unknown", "unknown", 0)
    assert "operator kind streamingTopKExec is not supported yet" in second["cause_at"]["why"]
    assert second["verdict"] == "unknown" and "not supported yet" in second["explanation"]
