"""The attack suite at the CLI's door: ads's user, bounded by STATELENS_ALLOWED_ROOTS to their own
root under a team's policy with an audit log, tries every way into payments' query (tests/tenants.py)
that was found to work before: links below their root (a folder of links, linked state partitions,
a linked event log, sink and input folder, a linked folder in a listing), links given as the path,
a link to a missing place, ``..``, ``file://`` and ``hdfs://`` URIs, a look-alike root, logs crafted
to name payments' input files, targets outside, 28 SQL escapes, another session's spilled state.
Each is refused in one line and audited; payments' marked values and query id appear nowhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import ROOT
from tenants import MARK, Teams, build

pytestmark = pytest.mark.jvm  # payments' query runs for real


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Teams:
    return build(tmp_path_factory.getbasetemp().parent / "tenants")


@pytest.fixture(scope="module")
def door(teams: Teams, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """The CLI's environment for ads's user: their root as the allowed roots, the team's policy with an audit log."""
    here = tmp_path_factory.mktemp("ads-cli")
    audit = here / "audit.jsonl"
    (here / "policy.toml").write_text(teams.policy("proxy", audit))
    env = {**os.environ, "STATELENS_ALLOWED_ROOTS": str(teams.ads), "STATELENS_POLICY": str(here / "policy.toml")}
    yield env, audit


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )


def refused(teams: Teams, r: subprocess.CompletedProcess[str], says: str) -> str:
    """Exit 2, one line on stderr saying ``says``, nothing of payments' anywhere; the line."""
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert not teams.leaked(r.stdout + r.stderr), r.stdout + r.stderr
    return lines[0]


def audited(audit: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []


def attempts(t: Teams) -> list[tuple[str, list[str], str]]:
    """(name, command, what the refusal says) of each way in."""
    key = "cust-1"  # a key ads might ask (payments' are marked: a look-alike search must not reveal them)
    return [
        ("a folder of links", ["overview", str(t.mirror)], "Link not followed"),
        ("linked state partitions, SQL", ["sql", str(t.halfcopy), "SELECT * FROM op0"], "Link not followed"),
        ("linked state partitions, why-missing", ["why-missing", str(t.halfcopy), key, "--json"], "Link not followed"),
        ("linked state partitions, growth", ["growth", str(t.halfcopy)], "Link not followed"),
        ("linked state partitions, skew", ["skew", str(t.halfcopy)], "Link not followed"),
        ("linked state partitions, report", ["report", str(t.halfcopy), "--out", str(t.ads / "r.html")], "Link not followed"),
        (
            "linked state partitions, export",
            ["export", str(t.halfcopy), "--chart", "growth", "--out", str(t.ads / "g.csv")],
            "Link not followed",
        ),
        (
            "linked state partitions, Spark",
            ["sql", str(t.halfcopy), "SELECT * FROM op0", "--engine", "spark"],
            "Link not followed",
        ),
        ("a folder of links, doctor", ["doctor", str(t.mirror)], "Link not followed"),
        ("a link as the path", ["overview", str(t.escape)], "Checkpoint not allowed"),
        ("a link to a missing place", ["overview", str(t.dangling)], "Checkpoint not allowed"),
        ("..", ["overview", f"{t.ads}/../payments/orders"], "Checkpoint not allowed"),
        ("file://", ["overview", f"file://{t.orders}"], "Checkpoint not allowed"),
        ("hdfs://", ["overview", f"hdfs://localhost:9000{t.orders}"], "Checkpoint not allowed"),
        ("a look-alike root", ["overview", str(t.lookalike)], "Checkpoint not allowed"),
        ("a linked event log", ["progress", str(t.clicks), "--event-log", str(t.logs)], "Link not followed"),
        ("the other team's event log", ["progress", str(t.clicks), "--event-log", str(t.pay / "logs")], "Event log not allowed"),
        ("listing the parent", ["ls", str(t.base)], "Folder not allowed"),
        (
            "a rebuild into the other root",
            ["rebuild", str(t.clicks), "--to", str(t.pay / "new"), "--", "python", "x.py"],
            "Checkpoint not allowed",
        ),
        ("the other team's sink", ["why-missing", str(t.clicks), key, "--sink", str(t.pay / "sink")], "Sink not allowed"),
        (
            "a sink folder of links",
            ["why-missing", str(t.crafted), "ad-0-1", "--json", "--sink", str(t.sink)],
            "is a link to a place outside",
        ),
        (
            "the other team's inputs",
            ["why-missing", str(t.clicks), key, "--input-root", str(t.pay / "inputs")],
            "Input files not allowed",
        ),
    ]


def test_every_way_into_the_other_teams_query_is_refused_in_one_line_and_audited(
    teams: Teams, door: tuple[dict[str, str], Path]
) -> None:
    env, audit = door
    lines = {name: refused(teams, cli(env, *command), says) for name, command, says in attempts(teams)}
    a, b = (
        lines[n].replace(str(p), "X")
        for n, p in (("a link as the path", teams.escape), ("a link to a missing place", teams.dangling))
    )
    assert a == b  # whether a place outside exists is never told
    reasons = [str(x["reason"]) for x in audited(audit)]
    for name, line in lines.items():
        assert any(r in line for r in reasons), f"{name} not audited: {line}"
    assert all(x["door"] == "cli" and x["user"] for x in audited(audit))


def test_what_ads_may_read_answers_without_following_links_out(teams: Teams, door: tuple[dict[str, str], Path]) -> None:
    env, _ = door
    listing = cli(env, "ls", str(teams.ads), "--json")
    assert listing.returncode == 0 and not teams.leaked(listing.stdout), listing.stderr
    found = json.loads(listing.stdout)
    assert {Path(c["path"]).name for c in found["checkpoints"]} >= {"clicks", "crafted", "halfcopy"}
    assert str(teams.team) in found["skipped_links"] and str(teams.mirror / "metadata") in found["skipped_links"]
    for extra in (["--input-root", str(teams.inputs)], []):
        r = cli(env, "why-missing", str(teams.crafted), "ad-0-1", "--json", *extra)
        assert r.returncode == 0 and not teams.leaked(r.stdout + r.stderr), r.stderr
        answer = json.dumps(json.loads(r.stdout))
        assert "outside the folders" in answer or "is a link to a place outside" in answer, answer[:2000]


SQL_ESCAPES = [
    "SELECT * FROM read_csv_auto('{inp}')",
    "SELECT * FROM read_csv(['{inp}'])",
    "SELECT * FROM read_parquet('{sink}/*.parquet')",
    "SELECT * FROM parquet_scan('{sink}/*.parquet')",
    "SELECT * FROM '{sink}/*.parquet'",
    "SELECT * FROM read_text('{cp}/metadata')",
    "SELECT * FROM read_blob('{cp}/metadata')",
    "SELECT * FROM glob('{pay}/*')",
    "SELECT * FROM read_json_auto('{cp}/metadata')",
    "SELECT * FROM read_json_objects('{cp}/metadata')",
    "SELECT * FROM read_ndjson_objects('{cp}/metadata')",
    "SELECT * FROM sniff_csv('{inp}')",
    "SELECT * FROM parquet_metadata('{sink}/*.parquet')",
    "SELECT * FROM parquet_schema('{sink}/*.parquet')",
    "SELECT * FROM parquet_file_metadata('{sink}/*.parquet')",
    "SELECT * FROM query_table('{sink}/*.parquet')",
    "CREATE TABLE t AS SELECT * FROM read_csv('{inp}')",
    "COPY (SELECT 1 AS x) TO '{ads}/out.csv'",
    "EXPORT DATABASE '{ads}/dump'",
    "IMPORT DATABASE '{pay}'",
    "ATTACH '{pay}/x.db' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET allowed_directories = ['/']",
    "RESET enable_external_access",
    "SET lock_configuration = false",
    "PRAGMA threads=1",
]


def test_sql_escapes_are_refused_and_audited(teams: Teams, door: tuple[dict[str, str], Path]) -> None:
    """Every escape through the SQL gateway, in one process; three of them through the CLI's door too
    (one line, exit 2, audited)."""
    import statelens

    env, audit = door
    paths = {
        "inp": teams.pay / "inputs" / "orders" / "part-00000.csv",
        "sink": teams.pay / "sink",
        "cp": teams.orders,
        "pay": teams.pay,
        "ads": teams.ads,
    }
    cp = statelens.open(str(teams.clicks))
    for sql in SQL_ESCAPES:
        with pytest.raises(statelens.StateLensError) as e:
            cp.sql(sql.format(**paths))
        assert e.value.title == "SQL not allowed" and e.value.refusal and not teams.leaked(str(e.value)), sql
    assert not (teams.ads / "out.csv").exists() and not (teams.ads / "dump").exists()
    before = len(audited(audit))
    door_sql = [SQL_ESCAPES[2], SQL_ESCAPES[7], SQL_ESCAPES[17]]  # read payments' sink, list their files, write a file
    for sql in door_sql:
        refused(teams, cli(env, "sql", str(teams.clicks), sql.format(**paths)), "SQL not allowed")
    new = audited(audit)[before:]
    assert len(new) == len(door_sql) and all("State Lens SQL reads only" in str(x["reason"]) for x in new)


def test_one_sessions_spilled_state_is_out_of_anothers_sql(teams: Teams, spark: object) -> None:
    """Two users' sessions, each spilling a table past its row budget: neither's SQL reads or overwrites
    the other's spill or DuckDB folder (each session's scratch is its own; DuckDB opens no file outside
    its own session's DuckDB folder)."""
    import statelens
    from statelens.spark_io.runtime import scratch
    from statelens.spark_io.storage.gate import UserRoots, as_user

    folders = [scratch.open_session(), scratch.open_session()]
    answers = []
    for i, folder in enumerate(folders):
        scratch.bind(folder)
        with as_user(UserRoots(f"user{i}", (str(teams.ads),))):
            ws = statelens.open(str(teams.clicks)).new_workspace(row_budget=10, spill=True)
            answers.append((ws, ws.execute("SELECT count(*) AS n FROM op0_left").table.to_pylist()))
    (a, counted), (b, _) = answers
    spilled = a.loaded["op0_left"].spilled
    assert spilled and spilled.startswith(folders[0]) and counted[0]["n"] > 10
    temp = a.execute("SELECT current_setting('temp_directory') AS t").table.to_pylist()[0]["t"]
    assert temp.startswith(folders[0])
    for sql in (
        f"SELECT * FROM read_parquet('{spilled}/*.parquet')",
        f"COPY (SELECT 1 AS key) TO '{spilled}/forged.parquet'",
        f"COPY (SELECT 1 AS key) TO '{temp}/forged.csv'",
        f"SELECT * FROM glob('{folders[0]}/*')",
    ):
        with pytest.raises(statelens.StateLensError, match="State Lens SQL reads only"):
            b.execute(sql)
    assert a.execute("SELECT count(*) AS n FROM op0_left").table.to_pylist() == counted  # unchanged
    for ws in (a, b):
        ws.close()
    scratch.close_session(folders[0])
    assert not Path(folders[0]).exists()
    scratch.bind(None)


def test_the_gate_answers_payments_own_user(teams: Teams, tmp_path: Path) -> None:
    """The same paths, for the team they belong to: answered (the refusals above are the gate's, not broken reads)."""
    env = {**os.environ, "STATELENS_ALLOWED_ROOTS": str(teams.pay)}
    r = cli(env, "sql", str(teams.orders), "SELECT key.customer FROM op0 ORDER BY 1")
    assert r.returncode == 0 and f"{MARK}-cust-0" in r.stdout, r.stderr
