"""Generated chains (``tests/pipegen/chains.py``): 2-4 queries, each reading the table the one before
writes (JSON, CSV, Parquet; the last through foreachBatch too), run for real; each designed key's
answer across the chain, end to end and query by query, against the files Spark wrote and the files
each query's source log says it read. A mismatch prints the chain and how to replay it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pipegen.chains import NOT_READ, ChainCheck, chain, check, truth

import statelens
from support import ROOT, tree_checksums

pytestmark = pytest.mark.jvm
# a 4-query chain through JSON and Parquet tables whose third query renames the user column (the one
# before the last, which lags), ending in a windowed count written by foreachBatch; a 3-query one
# through CSV and Parquet tables into a windowed count's Parquet
SEEDS = (163, 13)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Each seed's chain run in Spark applications of its own (its event log holds only it), one chain
    after the other in one process (one JVM)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    out = {seed: tmp_path_factory.mktemp("chains") / chain(seed).name for seed in SEEDS}
    pairs = [str(x) for seed, dest in out.items() for x in (seed, dest)]
    r = subprocess.run([sys.executable, "-m", "pipegen", "chain", *pairs], capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def replay(seed: int, checks: list[ChainCheck]) -> str:
    return "\n".join(c.line() for c in checks) + (
        f"\n\n{chain(seed).parts()}\nreplay: PYTHONPATH=tests:. python -m pipegen chain {seed} /tmp/replay"
    )


def test_the_chains_cover_each_table_format_and_foreach_batch() -> None:
    hops = [h for s in SEEDS for h in chain(s).hops]
    assert {h.fmt for h in hops} == {"json", "csv", "parquet"}
    assert any(h.foreach for h in hops) and any(h.op == "window_count" for h in hops)
    assert sorted(len(chain(s).hops) for s in SEEDS) == [3, 4]
    assert [any(h.rename for h in chain(s).hops) for s in SEEDS] == [True, False]


@pytest.mark.parametrize("seed", SEEDS)
def test_each_key_across_the_chain_as_spark_wrote_it(built: dict[int, Path], seed: int) -> None:
    dest = built[seed]
    before = tree_checksums(dest / "checked")
    checks = check(dest, event_log=True)
    t = truth(dest)
    bad = [c for c in checks if c.verdict != "right"]
    assert not bad, replay(seed, bad)
    # every designed key, end to end and at each query it reached
    assert {c.key for c in checks if c.scope == "end"} == set(t.chain.designs)
    assert {c.scope for c in checks} == {"end", *(f"q{i}" for i in range(len(t.chain.hops)))}
    # the keys of the last file reached the table the last query had not read yet: they wait there
    assert any(c.scope == "end" and c.truth.startswith(NOT_READ) for c in checks)
    assert tree_checksums(dest / "checked") == before  # nothing written into the checkpoints, tables or logs


@pytest.mark.parametrize("seed", SEEDS)
def test_without_the_event_log_a_definite_answer_is_the_same(built: dict[int, Path], seed: int) -> None:
    with_log = {(c.key, c.scope): c for c in check(built[seed], event_log=True)}
    without = check(built[seed], event_log=False)
    assert not [c for c in without if c.verdict in ("wrong", "crashed")], replay(seed, without)
    for c in without:  # a definite answer is the event log's: its outcome, and its cause where it names one
        if c.verdict == "right":
            w = with_log[(c.key, c.scope)].got
            outcome, _, rest = c.got.partition("/")
            cause, _, where = rest.partition(" at ")
            assert (outcome, where) == (w.partition("/")[0], w.partition(" at ")[2]), (c.line(), w)
            assert cause == "unknown" or c.got == w, (c.line(), w)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_chain_is_one_pipeline_lagging_by_the_last_run(built: dict[int, Path], seed: int) -> None:
    """Its queries in order, a hop between each two, and the last query's lag: the batches the one before
    it wrote in the last run (its sink log's newest entries), which the last query never ran for."""
    dest, c = built[seed] / "checked", chain(seed)
    p = statelens.open_pipeline(str(dest / "checkpoints"), data_root=str(dest / "tables"))
    n = len(c.hops)
    assert p.groups() == [[f"q{i}" for i in range(n)]] and len(p.hops) == n - 1
    before_last = dest / "tables" / f"t{n - 2}" / "_spark_metadata"
    logged = sorted(int(f.name.split(".")[0]) for f in before_last.iterdir() if f.name.split(".")[0].isdigit())
    last_hop = next(h for h in p.hops if h.downstream == f"q{n - 1}")
    # the last run: the query before the last ran its batch for the file and its no-data batch
    q = dest / "checkpoints" / f"q{n - 2}" / "commits"
    runs_before = sorted(int(x.name) for x in q.iterdir() if x.name.isdigit())
    assert set(last_hop.unread) <= set(logged[-2:]) and last_hop.unread and max(last_hop.unread) <= max(runs_before)
    for h in p.hops:
        assert h.upstream == f"q{int(h.downstream[1:]) - 1}"


def test_a_renamed_key_column_is_followed_through_the_plans(built: dict[int, Path]) -> None:
    """The chain whose query renames ``user`` to ``customer``, asked by ``user`` alone: with the event log
    each query after it is asked by ``customer`` (the renaming query's plan says so) and every answer is
    right, as with the column named per query; without it, those queries answer ``unknown``, saying how
    to name the column, never a wrong answer."""
    seed = next(s for s in SEEDS if any(h.rename for h in chain(s).hops))
    c = chain(seed)
    followed = check(built[seed], key_field="user")
    assert [k for k in followed if k.verdict != "right"] == [], replay(seed, followed)
    named = check(built[seed])  # the chain's own: user,q<i>=customer
    assert [(k.key, k.scope, k.got) for k in followed] == [(k.key, k.scope, k.got) for k in named]
    blind = [k for k in check(built[seed], event_log=False, key_field="user") if k.scope == "end"]
    assert all(k.verdict == "right" or k.got.startswith("unknown/") for k in blind), replay(seed, blind)
    assert any(k.got.startswith("unknown/") for k in blind)
    checked = built[seed] / "checked"
    where = {"data_root": str(checked / "tables"), "input_root": str(checked / "inputs")}
    a = statelens.why_missing_across(str(checked / "checkpoints"), "u00", key_field="user", **where)[0]
    assert "key_field user,q" in a.headline and "=<its column>" in a.headline  # as the API names the flag
    a = statelens.why_missing_across(
        str(checked / "checkpoints"), "u00", key_field="user", event_log=str(checked / "event_log"), **where
    )[0]
    assert [h.key_field for h in a.hops] == [c.user_column(i) for i in range(len(c.hops))]


def test_a_copy_that_lost_its_times_is_linked_by_the_event_log(built: dict[int, Path], tmp_path: Path) -> None:
    """A copy of a chain with one time for every file (a writer cannot be told by when its log was written):
    tables whose writer is not told are said so without the event log, and with it (each query's progress names its
    sink) the pipeline and every key's answer are the original's."""
    import shutil

    seed = SEEDS[-1]
    copy = tmp_path / "copy"
    checked = built[seed] / "checked"
    shutil.copytree(checked, copy)
    for f in copy.rglob("*"):  # one time for every file, as a checkout or a restore gives
        os.utime(f, (1_800_000_000, 1_800_000_000))
    original = statelens.open_pipeline(str(checked / "checkpoints"), data_root=str(checked / "tables"))
    blind = statelens.open_pipeline(str(copy / "checkpoints"), data_root=str(copy / "tables"))
    assert len(blind.hops) < len(original.hops) and any("give the event log" in n for n in blind.notes)  # said, not guessed
    assert {(h.upstream, h.downstream) for h in blind.hops} <= {(h.upstream, h.downstream) for h in original.hops}
    p = statelens.open_pipeline(str(copy / "checkpoints"), data_root=str(copy / "tables"), event_log=str(copy / "event_log"))
    assert [(h.upstream, h.downstream, dict(h.read), h.unread) for h in p.hops] == [
        (h.upstream, h.downstream, dict(h.read), h.unread) for h in original.hops
    ]
    users = sorted(chain(seed).designs)
    ask = {"key_field": chain(seed).key_field(), "event_log": None}
    want = statelens.why_missing_across(
        str(checked / "checkpoints"), *users, **ask | {"event_log": str(checked / "event_log")},
        data_root=str(checked / "tables"), input_root=str(checked / "inputs"),
    )  # fmt: skip
    got = statelens.why_missing_across(
        str(copy / "checkpoints"), *users, **ask | {"event_log": str(copy / "event_log")},
        data_root=str(copy / "tables"), input_root=str(copy / "inputs"),
    )  # fmt: skip
    assert [(a.key, a.outcome, a.cause, (a.cause_at or {}).get("query")) for a in got] == [
        (a.key, a.outcome, a.cause, (a.cause_at or {}).get("query")) for a in want
    ]
