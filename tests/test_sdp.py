"""A Spark Declarative Pipeline, run for real with ``spark-pipelines``: its flows found under the storage
root, the hops between its tables and how far each lags, against what the runs wrote.

The committed pipeline (``sample_checkpoints/sdp.py``: bronze -> silver -> gold, a full refresh of gold,
then a run of bronze and silver alone) is read without a JVM; a second, smaller one is built here with
``spark-pipelines`` itself. The truth is the runs (``runs.json``, the input files) and the tables' own
Parquet files, read with pyarrow."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from test_cli import no_java_env, run_cli

import statelens
from support import SAMPLES, tree_checksums

sys.path.insert(0, str(SAMPLES))
import sdp  # the pipeline's generator

ORDERS = SAMPLES / "sdp" / "orders"


def _input_orders(root: Path, file_name: str) -> set[str]:
    return {json.loads(line)["order_id"] for line in (root / "inputs" / "orders" / file_name).read_text().splitlines()}


def _logged_files(table: Path, batches: set[int]) -> list[Path]:
    """The files a table's file sink log says those batches wrote, at the table's folder now."""
    out = []
    for n in batches:
        for line in (table / "_spark_metadata" / str(n)).read_text().splitlines()[1:]:
            out.append(table / json.loads(line)["path"].rsplit("/", 1)[-1])
    return out


def _orders_in(files: list[Path]) -> set[str]:
    return {o for f in files for o in pq.read_table(f, columns=["order_id"]).column("order_id").to_pylist()}


def _runs(root: Path) -> list[dict[str, Any]]:
    return json.loads((root / "runs.json").read_text())


def _check_pipeline(root: Path) -> None:
    """The pipeline under ``root``'s storage root against its runs: every flow, current or superseded by
    the full refreshes that ran, the chain of tables, and gold's lag: exactly the orders of the runs
    that refreshed bronze and silver alone."""
    runs = _runs(root)
    p = statelens.open_pipeline(str(root / "storage"), data_root=str(root / "warehouse"))
    refreshed = sum(1 for r in runs if r["args"][:1] == ["--full-refresh"] and "gold" in r["args"][1])
    expected = {"bronze", "silver", "gold"} | {f"gold@v{v}" for v in range(refreshed)}
    assert {q.name for q in p.queries} == expected
    assert p.groups() == [
        [
            "bronze",
            "silver",
            "gold",
            *sorted(expected - {"bronze", "silver", "gold"}),
        ]
    ]
    assert all(q.sink == str(root / "warehouse" / q.flow.table) for q in p.queries if q.flow and q.flow.current)  # type: ignore[union-attr]
    by = {(h.upstream, h.downstream): h for h in p.hops}
    assert set(by) == {("bronze", "silver"), ("silver", "gold")} | {("silver", f"gold@v{v}") for v in range(refreshed)}
    # silver read every file bronze wrote: no lag
    assert by[("bronze", "silver")].unread == ()
    # gold's lag: the silver batches written after gold last read, holding the orders of the runs without gold
    gold = by[("silver", "gold")]
    without_gold = set().union(
        *[_input_orders(root, r["input_file"]) for r in runs if r["input_file"] and r["args"] == ["--refresh", "bronze,silver"]]
    )
    assert gold.unread, "the last run refreshed bronze and silver alone"
    assert _orders_in(_logged_files(root / "warehouse" / "silver", set(gold.unread))) == without_gold & _orders_in(
        list((root / "warehouse" / "silver").glob("*.parquet"))
    )
    # what gold read holds no order of those runs, and every order of silver's table that is not in them
    read = {n for ns in gold.read.values() for n in ns}
    silver_all = _orders_in(list((root / "warehouse" / "silver").glob("*.parquet")))
    assert _orders_in(_logged_files(root / "warehouse" / "silver", read)) == silver_all - without_gold


def test_the_committed_pipeline_is_found_with_its_hops_and_lag() -> None:
    _check_pipeline(ORDERS)


def test_ls_lists_the_flows_of_a_storage_root_current_and_superseded() -> None:
    """``ls`` of the storage root (its checkpoints under ``_checkpoints``) finds every flow; the gold
    flow's version before the full refresh is said superseded."""
    r = run_cli("ls", str(ORDERS / "storage"), "--json", env=no_java_env())
    assert r.returncode == 0, r.stderr
    rows = {
        Path(c["path"]).relative_to((ORDERS / "storage").resolve()).as_posix(): c for c in json.loads(r.stdout)["checkpoints"]
    }
    base = "_checkpoints/spark_catalog/default"
    assert {k: (c["flow"], c["superseded"]) for k, c in rows.items()} == {
        f"{base}/bronze/bronze/0": ("bronze", False),
        f"{base}/silver/silver/0": ("silver", False),
        f"{base}/gold/gold/0": ("gold@v0", True),
        f"{base}/gold/gold/1": ("gold", False),
    }
    text = run_cli("ls", str(ORDERS / "storage"), env=no_java_env())
    assert "(gold@v0, superseded by a full refresh)" in text.stdout


def test_the_pipeline_command_draws_the_chain_and_says_the_lag() -> None:
    r = run_cli("pipeline", str(ORDERS / "storage"), "--data-root", str(ORDERS / "warehouse"), env=no_java_env())
    assert r.returncode == 0, r.stderr
    assert "Pipeline 1: bronze -> silver -> gold -> gold@v0" in r.stdout
    p = statelens.open_pipeline(str(ORDERS / "storage"), data_root=str(ORDERS / "warehouse"))
    gold = next(h for h in p.hops if h.downstream == "gold")
    assert f"lag: {len(gold.unread)} batch(es) written and not read yet" in r.stdout
    assert "superseded, no longer runs" in r.stdout
    data = json.loads(
        run_cli("pipeline", str(ORDERS / "storage"), "--data-root", str(ORDERS / "warehouse"), "--json", env=no_java_env()).stdout
    )
    assert [q["name"] for q in data["queries"]][:3] == ["bronze", "silver", "gold"]


def test_a_root_without_checkpoints_is_one_line(tmp_path: Path) -> None:
    r = run_cli("pipeline", str(tmp_path), env=no_java_env())
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "No checkpoint" in r.stderr


def _progress(root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(query id, batch) -> the progress Spark reported for it, from the runs' event logs (zstd)."""
    import pyarrow as pa

    out = {}
    for f in (root / "event_log").glob("*/events_*"):
        with pa.input_stream(str(f), compression="zstd" if f.name.endswith(".zstd") else None) as s:
            for line in s.read().decode().splitlines():
                e = json.loads(line)
                if e.get("Event", "").endswith("QueryProgressEvent"):
                    out[(e["progress"]["id"], e["progress"]["batchId"])] = e["progress"]
    return out


def _truth(root: Path) -> dict[str, str]:
    """customer -> what became of it, from the input files and the tables Spark wrote: in gold's table
    (written); in silver's files gold has not read (not read yet); in bronze and not in silver
    (lost at silver); in no input file (never in the input); else in silver and not in gold."""

    def customers(files: list[Path]) -> set[str]:
        return {c for f in files for c in pq.read_table(f, columns=["customer"]).column("customer").to_pylist()}

    wh = root / "warehouse"
    inputs = {
        json.loads(line)["customer"] for f in (root / "inputs" / "orders").glob("*.json") for line in f.read_text().splitlines()
    }
    p = statelens.open_pipeline(str(root / "storage"), data_root=str(wh))
    gold_hop = next(h for h in p.hops if h.downstream == "gold")
    unread = customers(_logged_files(wh / "silver", set(gold_hop.unread)))
    out = {}
    for c in inputs | {"gina"}:
        if c in customers(list((wh / "gold").glob("*.parquet"))):
            out[c] = "written"
        elif c in unread:
            out[c] = "not_read_yet"
        elif c in customers(list((wh / "bronze").glob("*.parquet"))) - customers(list((wh / "silver").glob("*.parquet"))):
            out[c] = "lost_at_silver"
        elif c not in inputs:
            out[c] = "never_in_input"
        else:
            out[c] = "in_gold"
    return out


CUSTOMERS = ["alice", "bob", "carol", "dave", "erin", "frank", "heidi", "gina", "zed"]


def _across(root: Path, event_log: bool) -> dict[str, Any]:
    return {
        a.key: a
        for a in statelens.why_missing_across(
            str(root / "storage"),
            *CUSTOMERS,
            key_field="customer",
            data_root=str(root / "warehouse"),
            input_root=str(root / "inputs"),
            event_log=str(root / "event_log") if event_log else None,
        )
    }


def test_each_customer_across_the_pipeline_as_the_tables_and_progress_say() -> None:
    """With the event logs: each customer's outcome at gold, and where the rest was lost, against the
    tables' Parquet files and Spark's progress: a late drop is in the batch whose progress counts it."""
    truth = _truth(ORDERS)
    answers = _across(ORDERS, event_log=True)
    progress = _progress(ORDERS)
    ids = {
        q.name: json.loads((Path(q.checkpoint) / "metadata").read_text())["id"]
        for q in statelens.open_pipeline(str(ORDERS / "storage")).queries
    }
    for c, fact in truth.items():
        a = answers[c]
        assert [h.query for h in a.hops] == ["bronze", "silver", "gold"], c
        if fact == "written":
            assert (a.outcome, a.cause_at["query"]) == ("written", "gold"), (c, a.headline)
        elif fact == "not_read_yet":
            assert (a.outcome, a.cause, a.cause_at["upstream_query"]) == ("waiting", "not_read_yet", "silver"), c
            hop = next(
                h
                for h in statelens.open_pipeline(str(ORDERS / "storage"), data_root=str(ORDERS / "warehouse")).hops
                if h.downstream == "gold"
            )
            assert a.cause_at["upstream_batch_id"] in hop.unread
        elif fact == "lost_at_silver":
            assert (a.outcome, a.cause_at["query"]) == ("lost", "silver"), (c, a.headline)
            if a.cause == "dropped_as_late":  # Spark counted a row dropped by the watermark in that batch
                assert progress[(ids["silver"], a.cause_at["batch_id"])]["stateOperators"][0]["numRowsDroppedByWatermark"] >= 1
            else:  # the filter: the record Spark read has an amount the silver flow's filter removes
                assert a.cause == "filtered", (c, a.cause)
                rec = a.hops[1].answer["fate"]["records"][0]["values"]
                assert not rec["amount"] > 0
            # the upstream batch that wrote the record's file: bronze's log names that file in that batch
            assert a.cause_at["upstream_query"] == "bronze"
            logged = _logged_files(ORDERS / "warehouse" / "bronze", {a.cause_at["upstream_batch_id"]})
            assert Path(a.cause_at["file"]).name in {f.name for f in logged}
        elif fact == "never_in_input":
            assert (a.outcome, a.cause_at["query"]) == ("never_in_input", "bronze"), c
        else:  # in silver and read by gold, not in gold's table: still in gold's state, waiting for the watermark
            assert (a.outcome, a.cause, a.cause_at["query"]) == ("waiting", "waiting_for_watermark", "gold"), c
    assert set(truth.values()) == {"written", "not_read_yet", "lost_at_silver", "never_in_input", "in_gold"}


def test_without_the_event_log_an_answer_is_the_same_or_unknown() -> None:
    """A definite answer without the event log is the one the event log gives; else it says it cannot tell."""
    with_log, without = _across(ORDERS, event_log=True), _across(ORDERS, event_log=False)
    for c in CUSTOMERS:
        a, b = with_log[c], without[c]
        assert (b.outcome, b.cause) == (a.outcome, a.cause) or "unknown" in (b.outcome, b.cause), (c, a.cause, b.cause)
        assert b.cause_at["query"] == a.cause_at["query"], c


def test_why_missing_given_a_root_follows_the_key_through_every_hop() -> None:
    r = run_cli(
        "why-missing", str(ORDERS / "storage"), "dave", "heidi", "--key-field", "customer",
        "--data-root", str(ORDERS / "warehouse"), "--input-root", str(ORDERS / "inputs"),
        "--event-log", str(ORDERS / "event_log"), "--json",
        env=no_java_env(),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = {x["key"]: x for x in json.loads(r.stdout)["results"]}
    assert (got["dave"]["outcome"], got["dave"]["cause"], got["dave"]["cause_at"]["query"]) == (
        "lost",
        "dropped_as_late",
        "silver",
    )
    assert (got["heidi"]["outcome"], got["heidi"]["cause"]) == ("waiting", "not_read_yet")
    assert [h["query"] for h in got["dave"]["hops"]] == ["bronze", "silver", "gold"]


def test_a_key_field_naming_no_query_is_one_line() -> None:
    r = run_cli("why-missing", str(ORDERS / "storage"), "dave", "--key-field", "customer,platinum=cust", env=no_java_env())
    p = statelens.open_pipeline(str(ORDERS / "storage"))
    queries = ", ".join(n for n in p.order() if p.query(n).flow.current)  # type: ignore[union-attr]
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines() == [
        f"statelens: Invalid input: --key-field names platinum, which is no query under {ORDERS / 'storage'} (its queries: {queries})."
    ]


def test_a_key_field_per_query_is_used_there() -> None:
    """Naming the column for one query (here the same one) changes nothing: each query asks by its own."""
    plain = _across(ORDERS, event_log=True)
    named = {
        a.key: a
        for a in statelens.why_missing_across(
            str(ORDERS / "storage"), *CUSTOMERS, key_field="customer,gold=customer", data_root=str(ORDERS / "warehouse"),
            input_root=str(ORDERS / "inputs"), event_log=str(ORDERS / "event_log"),
        )
    }  # fmt: skip
    assert {k: a.to_dict() for k, a in named.items()} == {k: a.to_dict() for k, a in plain.items()}


@pytest.mark.jvm
def test_a_pipeline_built_here_with_spark_pipelines(tmp_path: Path) -> None:
    """A smaller pipeline of the same flows, run here: one run of every flow, then one of bronze and
    silver alone; read without writing a byte into its storage root or tables."""
    root = sdp.build(tmp_path / "orders", [sdp.FILES[0], sdp.FILES[2]], [(0, []), (1, ["--refresh", "bronze,silver"])])
    before = tree_checksums(root)
    _check_pipeline(root)
    assert tree_checksums(root) == before


def test_sql_across_the_pipeline_reads_each_querys_state_as_a_schema() -> None:
    """``sql ROOT``: gold's state is the windows of the orders gold read that its table does not hold
    yet (still open), from the Parquet files; joined with silver's state in one query; each query's own
    SQL answers the same rows."""
    root = ORDERS
    p = statelens.open_pipeline(str(root / "storage"), data_root=str(root / "warehouse"))
    gold_hop = next(h for h in p.hops if h.downstream == "gold")
    read = pq.read_table(
        _logged_files(root / "warehouse" / "silver", {n for ns in gold_hop.read.values() for n in ns})
    ).to_pylist()
    emitted = {(r["customer"], r["w"]["start"]) for r in pq.read_table(str(root / "warehouse" / "gold")).to_pylist()}

    def window_start(ts: Any) -> Any:
        return ts.replace(minute=ts.minute - ts.minute % 5, second=0)

    waiting = {(r["customer"], window_start(r["ts"])) for r in read} - emitted
    got = statelens.sql_across(
        str(root / "storage"), "SELECT key.customer AS c, key.window.start AS s FROM gold.op0 ORDER BY 1, 2"
    )
    assert {(r["c"], r["s"].replace(tzinfo=None)) for r in got.table.to_pylist()} == waiting
    own = statelens.open(p.query("gold").checkpoint).sql("SELECT key.customer AS c, key.window.start AS s FROM op0 ORDER BY 1, 2")
    assert got.table.to_pylist() == own.table.to_pylist()
    joined = statelens.sql_across(
        str(root / "storage"),
        'SELECT count(*) AS n FROM silver.op0 s JOIN gold.op0 g ON true UNION ALL SELECT count(*) FROM "gold@v0".op0',
    )
    silver_n = statelens.open(p.query("silver").checkpoint).sql("SELECT count(*) AS n FROM op0").table.to_pylist()[0]["n"]
    v0_n = statelens.open(p.query("gold@v0").checkpoint).sql("SELECT count(*) AS n FROM op0").table.to_pylist()[0]["n"]
    assert [r["n"] for r in joined.table.to_pylist()] == [silver_n * len(waiting), v0_n]
    r = run_cli("sql", str(root / "storage"), "SELECT * FROM silver.nothing", env=no_java_env())
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Each query is a schema" in r.stderr


def test_a_superseded_version_is_not_credited_with_the_rewritten_table() -> None:
    """gold's version 0 still answers from its own state; the table its full refresh rewrote is
    refused as its output in one line (its rows were written by version 1's batches, not version 0's)."""
    base = ORDERS / "storage" / "_checkpoints" / "spark_catalog" / "default" / "gold" / "gold"
    args = ["alice", "--key-field", "customer", "--input-root", str(ORDERS / "warehouse" / "silver")]
    own = run_cli("why-missing", str(base / "0"), *args, "--json", env=no_java_env())
    assert own.returncode == 0, own.stderr
    (alice,) = json.loads(own.stdout)["results"]
    assert alice["verdict"] == "evicted"  # its own state: emitted when the watermark passed its window
    r = run_cli("why-missing", str(base / "0"), *args, "--sink", str(ORDERS / "warehouse" / "gold"), env=no_java_env())
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "rewritten by the full refresh that started version 1" in r.stderr and str(base / "1") in r.stderr
    current = run_cli(
        "why-missing", str(base / "1"), *args, "--sink", str(ORDERS / "warehouse" / "gold"), "--json", env=no_java_env()
    )
    assert json.loads(current.stdout)["results"][0]["outcome"] == "written"


def test_several_pipelines_storage_roots_under_one_root_keep_their_flows_apart(tmp_path: Path) -> None:
    """Two teams' storage roots under one folder: each flow named with its storage root, the full
    refresh's superseded version told within its own pipeline."""
    import shutil

    for team in ("team-a", "team-b"):
        shutil.copytree(ORDERS / "storage", tmp_path / team / "storage")
    p = statelens.open_pipeline(str(tmp_path))
    names = {q.name for q in p.queries}
    assert names == {f"{t}/storage:{n}" for t in ("team-a", "team-b") for n in ("bronze", "silver", "gold", "gold@v0")}
    assert {q.name for q in p.queries if q.flow and not q.flow.current} == {"team-a/storage:gold@v0", "team-b/storage:gold@v0"}


def test_a_storage_root_deep_in_a_folder_is_still_found(tmp_path: Path) -> None:
    """The pipeline's own layout under _checkpoints (five folders) does not count against how deep
    ls looks: a storage root three folders down lists its flows (a plain checkpoint that deep is found
    too; one deeper than the limit is not searched for)."""
    import shutil

    shutil.copytree(ORDERS / "storage", tmp_path / "a" / "b" / "c" / "storage")
    shutil.copytree(
        ORDERS / "storage" / "_checkpoints" / "spark_catalog" / "default" / "silver" / "silver" / "0",
        tmp_path / "a" / "b" / "c" / "plain",
    )
    rows = statelens.ls(str(tmp_path))
    assert sorted(r.flow or Path(r.path).name for r in rows) == ["bronze", "gold", "gold@v0", "plain", "silver"]
