"""The answer a user reads first, on five pipelines none of the other samples has, against what each
query really did.

Each pipeline (``sample_checkpoints/pipelines.py``) ran for real: its input files are kept (one per
batch), ``emitted.json`` holds every row it emitted with its batch and file, ``progress.json`` what
Spark reported per batch (rows dropped by the watermark, duplicates dropped, per operator). Each
story key's ``outcome``, ``cause`` and ``cause_at`` are asserted field by field: the batches and files
against the emitted rows, the operator and batch of a drop against Spark's own counts, the record
(file and row) against the input files, a waiting key against Spark's State Data Source; on both
engines (the native reader, and Spark's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.readers import engine
from support import SAMPLES

pytestmark = pytest.mark.usefixtures("spark")
PIPELINES = SAMPLES / "pipelines"
ENGINES = ["native", "spark"]


# --------------------------------------------------------------------------- what really happened


def emitted(name: str, column: str, key: str) -> list[dict[str, Any]]:
    """The rows the query emitted for a key (with their batch and file)."""
    rows = json.loads((PIPELINES / name / "emitted.json").read_text())
    return [r for r in rows if r.get(column) == key]


def progress(name: str) -> dict[int, list[dict[str, Any]]]:
    """batch -> the stateOperators Spark reported (``stateOperators[i]`` is operator i)."""
    return {p["batchId"]: p["stateOperators"] for p in json.loads((PIPELINES / name / "progress.json").read_text())}


def late_drops(name: str, op: int, batch: int) -> int:
    return int(progress(name)[batch][op].get("numRowsDroppedByWatermark", 0))


def duplicate_drops(name: str, op: int, batch: int) -> int:
    return int(progress(name)[batch][op].get("customMetrics", {}).get("numDroppedDuplicateRows", 0))


def located(name: str, source: str, **match: Any) -> list[tuple[int, str, int]]:
    """(batch, file, row) of every input record whose columns hold these values. The batch is the
    one Spark's file source logged reading the file (``sources/<n>/<batch>`` in the checkpoint), not
    a file's modification time, which a fresh clone does not keep."""
    folder = PIPELINES / name / "inputs" / source
    batch_of: dict[str, int] = {}
    for log in (PIPELINES / name / "checkpoint" / "sources").glob("*/[0-9]*"):
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line)
            parts = entry["path"].rsplit("/", 2)
            if parts[-2] == source:
                batch_of[parts[-1]] = entry["batchId"]
    out = []
    for f in sorted(folder.iterdir(), key=lambda p: batch_of[p.name]):
        lines = f.read_text().splitlines()
        if f.suffix == ".csv":
            header, lines = lines[0].split(","), lines[1:]
            records = [dict(zip(header, line.split(","), strict=False)) for line in lines]
        else:
            records = [json.loads(line) for line in lines if line.strip()]
        for row, r in enumerate(records, 1):
            if all(r.get(k) == v for k, v in match.items()):
                out.append((batch_of[f.name], f.name, row))
    return out


def run(name: str, keys: list[str], eng: str) -> dict[str, Any]:
    folder = PIPELINES / name
    engine.configure(eng)
    try:
        report = why_missing(
            str(folder / "checkpoint"),
            KeyQuestion(
                tuple(keys),
                event_log=str(folder / "event_log"),
                input_root=str(folder / "inputs"),
                sink=str(folder / "sink") if (folder / "sink").is_dir() else None,
            ),
        )
    finally:
        engine.configure("auto")
    return {r.key: r for r in report.results}


def at(r: Any) -> tuple[Any, ...]:
    c = r.cause_at
    return (c["operator_id"], c["batch_id"], c["side"], Path(c["file"]).name if c["file"] else None, c["row"])


def written(r: Any) -> set[tuple[int | None, str | None]]:
    return {(o.batch_id, o.file) for o in r.fate.outputs if o.kind == "written"}


def first_sentence(r: Any) -> str:
    return r.explanation.split(". ")[0]


# --------------------------------------------------------------------------- clicks -> dedup -> join -> windows


ADS = "ad_campaigns"


@pytest.fixture(scope="module", params=ENGINES)
def ads(request: pytest.FixtureRequest) -> dict[str, Any]:
    keys = ["camp-a", "camp-dup", "camp-late", "camp-bot", "camp-nullbot", "camp-far", "camp-none", "camp-part"]
    return run(ADS, [*keys, "camp-wait", "camp-trail", "camp-case"], request.param)


def test_a_campaign_written_in_every_window_the_sink_holds(ads: dict[str, Any]) -> None:
    r = ads["camp-a"]
    truth = {(e["batch_id"], e["file"]) for e in emitted(ADS, "campaign", "camp-a")}
    assert (r.outcome, written(r)) == ("written", truth) and len(truth) == 3
    assert first_sentence(r).startswith("Written: 3 row(s) of it are in the sink's files")
    # the windows still open wait for the watermark, and say so: the cause of what is not out yet
    assert r.cause == "waiting_for_watermark" and len(r.fate.waiting) == 2


def test_a_click_dropped_as_a_duplicate_upstream_loses_the_impression(ads: dict[str, Any]) -> None:
    r = ads["camp-dup"]
    [(b, f, row)] = located(ADS, "clicks", click_id="c-1", ad_id="ad-dup")
    [(b0, f0, row0)] = located(ADS, "clicks", click_id="c-1", ad_id="ad-other")
    assert (r.outcome, r.cause, at(r)) == ("lost", "dropped_as_duplicate", (2, b, "right", f, row))
    assert duplicate_drops(ADS, 2, b) == 1  # Spark counted operator 2 dropping it in that batch
    e = r.cause_at["earlier"]
    assert (e["batch_id"], Path(e["file"]).name, e["row"]) == (b0, f0, row0) and b0 < b
    assert not emitted(ADS, "campaign", "camp-dup")
    assert first_sentence(r) == (
        f"Lost: its click c-1 (clicks/{f} row {row}) was dropped as a duplicate of the click read in batch {b0} "
        f"(clicks/{f0} row {row0}) by operator 2 in batch {b}; the impression then never matched"
    )
    assert r.verdict == "never_in_state"  # operator 0's own verdict stays, below the answer


def test_a_click_dropped_as_late_upstream_loses_the_impression(ads: dict[str, Any]) -> None:
    r = ads["camp-late"]
    [(b, f, row)] = located(ADS, "clicks", click_id="c-late")
    assert (r.outcome, r.cause, at(r)) == ("lost", "dropped_as_late", (2, b, "right", f, row))
    assert late_drops(ADS, 2, b) == 1
    assert not emitted(ADS, "campaign", "camp-late")


@pytest.mark.parametrize(("key", "click"), [("camp-bot", "c-bot"), ("camp-nullbot", "c-nullbot")])
def test_a_filtered_click_loses_the_impression(ads: dict[str, Any], key: str, click: str) -> None:
    r = ads[key]
    [(b, f, row)] = located(ADS, "clicks", click_id=click)
    assert (r.outcome, r.cause, at(r)) == ("lost", "filtered", (2, b, "right", f, row))
    assert "is_bot" in r.cause_at["predicate"] and "#" in r.cause_at["predicate"]  # as Spark printed it
    assert not emitted(ADS, "campaign", key)


def test_a_click_outside_the_time_range(ads: dict[str, Any]) -> None:
    r = ads["camp-far"]
    [(b, _, _)] = located(ADS, "clicks", click_id="c-far")
    assert (r.outcome, r.cause, r.cause_at["operator_id"], r.cause_at["batch_id"]) == ("lost", "condition_not_met", 1, b)
    assert "13m after" in r.explanation


def test_an_impression_no_click_ever_named(ads: dict[str, Any]) -> None:
    r = ads["camp-none"]
    assert not located(ADS, "clicks", ad_id="ad-none")
    [(b, f, row)] = located(ADS, "impressions", campaign="camp-none")
    assert (r.outcome, r.cause, at(r)) == ("lost", "no_match_in_input", (1, b, "left", f, row))


def test_one_impression_written_one_lost(ads: dict[str, Any]) -> None:
    r = ads["camp-part"]
    truth = {(e["batch_id"], e["file"]) for e in emitted(ADS, "campaign", "camp-part")}
    [(b, f, row)] = located(ADS, "impressions", ad_id="ad-part-2")
    assert (r.outcome, r.cause, written(r), at(r)) == ("partly_written", "no_match_in_input", truth, (1, b, "left", f, row))


def test_a_joined_window_still_open(ads: dict[str, Any], spark: Any) -> None:
    r = ads["camp-wait"]
    assert (r.outcome, r.cause, r.cause_at["operator_id"]) == ("waiting", "waiting_for_watermark", 0)
    assert not emitted(ADS, "campaign", "camp-wait")
    state = spark.read.format("statestore").load(str(PIPELINES / ADS / "checkpoint")).collect()  # operator 0, last batch
    assert any(row.key.campaign == "camp-wait" for row in state)
    [w] = r.fate.waiting
    assert "00:50:00" in w.detail and r.explanation.count("released once") == 1


@pytest.mark.parametrize(("asked", "typed"), [("camp-trail", "camp-trail "), ("camp-case", "CAMP-CASE")])
def test_a_mistyped_key_finds_the_spelling_that_was_written(ads: dict[str, Any], asked: str, typed: str) -> None:
    r = ads[asked]
    assert (r.outcome, r.cause) == ("never_in_input", "never_in_input")
    [near] = [n for n in r.fate.near_fates if n.key == typed]
    truth = emitted(ADS, "campaign", typed)
    assert (near.outcome, near.batches, near.files) == ("written", [e["batch_id"] for e in truth], [e["file"] for e in truth])
    assert f"was written in batch {truth[0]['batch_id']}" in first_sentence(r) + ". " + r.explanation.split(". ")[1]


# --------------------------------------------------------------------------- session windows, with and without the event log


SESSIONS = "user_sessions"


@pytest.fixture(
    scope="module",
    params=[(e, log) for e in ENGINES for log in (True, False)],
    ids=lambda p: f"{p[0]}-{'log' if p[1] else 'nolog'}",
)
def sessions(request: pytest.FixtureRequest) -> dict[str, Any]:
    eng, with_log = request.param
    folder = PIPELINES / SESSIONS
    engine.configure(eng)
    try:
        report = why_missing(
            str(folder / "checkpoint"),
            KeyQuestion(
                ("u-closed", "u-two", "u-late", "u-mixed", "u-health", "u-open"),
                event_log=str(folder / "event_log") if with_log else None,
                input_root=str(folder / "inputs"),
                sink=str(folder / "sink"),
            ),
        )
    finally:
        engine.configure("auto")
    return {r.key: r for r in report.results} | {"_log": with_log}


def test_closed_sessions_are_the_sinks(sessions: dict[str, Any]) -> None:
    for user in ("u-closed", "u-two"):
        truth = {(e["batch_id"], e["file"]) for e in emitted(SESSIONS, "user_id", user)}
        assert written(sessions[user]) == truth and truth, user
    assert sessions["u-closed"].outcome == "written" and sessions["u-closed"].cause is None
    assert (sessions["u-two"].outcome, sessions["u-two"].cause) == ("written", "waiting_for_watermark")


def test_a_view_behind_the_watermark_by_more_than_the_gap(sessions: dict[str, Any]) -> None:
    r = sessions["u-late"]
    [(b, f, row)] = located(SESSIONS, "views", user_id="u-late")
    assert (r.outcome, r.cause, at(r)) == ("lost", "dropped_as_late", (0, b, None, f, row))
    assert late_drops(SESSIONS, 0, b) == 1 and not emitted(SESSIONS, "user_id", "u-late")
    [rec] = r.fate.records
    assert rec.event_time_ms is not None  # with the event log or without it


def test_one_session_written_one_view_late(sessions: dict[str, Any]) -> None:
    r = sessions["u-mixed"]
    [(b, f, row)] = [x for x in located(SESSIONS, "views", user_id="u-mixed") if x[0] == 9]
    assert (r.outcome, r.cause, at(r)) == ("partly_written", "dropped_as_late", (0, b, None, f, row))
    assert late_drops(SESSIONS, 0, b) == 1
    assert written(r) == {(e["batch_id"], e["file"]) for e in emitted(SESSIONS, "user_id", "u-mixed")}


def test_a_health_check_filtered_out(sessions: dict[str, Any]) -> None:
    r = sessions["u-health"]
    if not sessions["_log"]:  # the filter is in the plan only: without the event log it cannot be named
        assert r.outcome == "lost" and r.cause == "unknown"
        return
    assert (r.outcome, r.cause, r.cause_at["operator_id"]) == ("lost", "filtered", 0)
    assert "StartsWith(page" in r.cause_at["predicate"]


def test_an_open_session_says_when_it_closes(sessions: dict[str, Any]) -> None:
    r = sessions["u-open"]
    assert (r.outcome, r.cause) == ("waiting", "waiting_for_watermark") and not emitted(SESSIONS, "user_id", "u-open")
    [w] = r.fate.waiting
    last = max(e for b, _, _ in located(SESSIONS, "views", user_id="u-open") for e in [b])
    assert w.released_at_watermark is not None and "00:54:40" in w.detail, (last, w)


# --------------------------------------------------------------------------- window -> window


ROLLUP = "window_rollup"


@pytest.fixture(scope="module", params=ENGINES)
def rollup(request: pytest.FixtureRequest) -> dict[str, Any]:
    return run(ROLLUP, ["u-full", "u-late", "u-second", "u-viewer", "u-wait15"], request.param)


def test_a_five_minute_window_followed_into_the_fifteen_minute_one(rollup: dict[str, Any]) -> None:
    r = rollup["u-full"]
    [truth] = emitted(ROLLUP, "user_id", "u-full")
    assert r.outcome == "written" and r.cause is None
    assert {(o.operator_id, o.batch_id) for o in r.fate.outputs} == {(0, truth["batch_id"])}
    assert all(len(rec.steps) == 2 for rec in r.fate.records)  # every record through both operators


def test_late_in_the_first_window(rollup: dict[str, Any]) -> None:
    for user, outcome in (("u-late", "lost"), ("u-second", "partly_written")):
        r = rollup[user]
        b, f, row = located(ROLLUP, "purchases", user_id=user)[-1]
        assert (r.outcome, r.cause, at(r)) == (outcome, "dropped_as_late", (1, b, None, f, row)), user
        assert late_drops(ROLLUP, 1, b) == 1


def test_in_filter_and_a_window_waiting_downstream(rollup: dict[str, Any]) -> None:
    r = rollup["u-viewer"]
    assert (r.outcome, r.cause, r.cause_at["operator_id"]) == ("lost", "filtered", 1)
    assert "IN (buy,refund)" in r.cause_at["predicate"]
    w = rollup["u-wait15"]
    assert (w.outcome, w.cause, w.cause_at["operator_id"]) == ("waiting", "waiting_for_watermark", 0)
    [rec] = w.fate.records
    assert [s.operator_id for s in rec.steps] == [1, 0]  # its five-minute window went on to operator 0


# --------------------------------------------------------------------------- a left outer join feeding windows, to Parquet


ORDERS = "orders_shipments"


@pytest.fixture(scope="module", params=ENGINES)
def orders(request: pytest.FixtureRequest) -> dict[str, Any]:
    return run(ORDERS, ["ord-0", "ord-unshipped", "ord-lateship", "ord-free", "ord-wait", "store-2"], request.param)


def test_an_order_never_shipped_is_written_null_padded(orders: dict[str, Any]) -> None:
    r = orders["ord-unshipped"]
    assert not located(ORDERS, "shipments", order_id="ord-unshipped")
    assert (r.outcome, r.cause, r.cause_at["operator_id"]) == ("written_unmatched", "no_match_in_input", 1)
    [truth] = emitted(ORDERS, "store", "store-2")
    assert truth["shipped"] == 0 and {o.batch_id for o in r.fate.outputs if o.operator_id == 0} == {truth["batch_id"]}


def test_a_shipment_too_late_for_its_order(orders: dict[str, Any]) -> None:
    r = orders["ord-lateship"]
    [(b, f, row)] = located(ORDERS, "shipments", order_id="ord-lateship")
    assert (r.outcome, r.cause, at(r)) == ("written_unmatched", "dropped_as_late", (1, b, "right", f, row))
    assert late_drops(ORDERS, 1, b) == 1


def test_a_filtered_order_and_one_still_waiting(orders: dict[str, Any]) -> None:
    r = orders["ord-free"]
    [(b, f, row)] = located(ORDERS, "orders", order_id="ord-free")
    assert (r.outcome, r.cause, at(r)) == ("lost", "filtered", (1, b, "left", f, row))
    assert "cast(amount" in r.cause_at["predicate"]
    w = orders["ord-wait"]
    assert (w.outcome, w.cause, w.cause_at["operator_id"]) == ("waiting", "waiting_for_watermark", 1)


def test_a_shipped_order_is_in_its_stores_window_in_the_sink(orders: dict[str, Any]) -> None:
    # the join's row went on into the store's window: the order's outcome is that window's row in the sink
    r = orders["ord-0"]
    assert located(ORDERS, "orders", order_id="ord-0")
    [truth] = [e for e in emitted(ORDERS, "store", "store-1") if e["window"]["start"].startswith("2026-01-01T00:00")]
    assert (r.outcome, r.cause, written(r)) == ("written", None, {(truth["batch_id"], truth["file"])})
    assert first_sentence(r).startswith("Written: 1 row(s) its records went into are in the sink's files")


def test_a_store_written_from_null_padded_orders(orders: dict[str, Any]) -> None:
    r = orders["store-2"]
    truth = {(e["batch_id"], e["file"]) for e in emitted(ORDERS, "store", "store-2")}
    assert (r.outcome, written(r)) == ("written_unmatched", truth)


# --------------------------------------------------------------------------- applyInPandasWithState to Parquet


TIMEOUTS = "user_timeouts"


@pytest.fixture(scope="module", params=ENGINES)
def timeouts(request: pytest.FixtureRequest) -> dict[str, Any]:
    return run(TIMEOUTS, ["u-done", "u-late", "u-back", "u-steady", "u-gone"], request.param)


def test_the_functions_output_comes_from_the_sink(timeouts: dict[str, Any]) -> None:
    for user in ("u-done", "u-back"):
        truth = {(e["batch_id"], e["file"]) for e in emitted(TIMEOUTS, "user_id", user)}
        assert timeouts[user].outcome == "written" and written(timeouts[user]) == truth and truth, user
    assert timeouts["u-done"].cause is None and timeouts["u-back"].cause == "waiting_for_watermark"
    s = timeouts["u-steady"]
    assert (s.outcome, s.cause) == ("waiting", "waiting_for_watermark") and not emitted(TIMEOUTS, "user_id", "u-steady")
    [w] = s.fate.waiting
    last = max(b for b, _, _ in located(TIMEOUTS, "events", user_id="u-steady"))
    assert "its timeout at" in w.detail and last == 11


def test_late_before_the_function_and_never_in_input(timeouts: dict[str, Any]) -> None:
    r = timeouts["u-late"]
    [(b, f, row)] = located(TIMEOUTS, "events", user_id="u-late")
    assert (r.outcome, r.cause, at(r)) == ("lost", "dropped_as_late", (0, b, None, f, row))
    assert late_drops(TIMEOUTS, 0, b) == 1
    assert (timeouts["u-gone"].outcome, timeouts["u-gone"].cause) == ("never_in_input", "never_in_input")


# --------------------------------------------------------------------------- the path a user takes, without pandas


def _folders(name: str) -> list[str]:
    if (PIPELINES / name).is_dir():
        folder = PIPELINES / name
        return ["--event-log", str(folder / "event_log"), "--input-root", str(folder / "inputs"), "--sink", str(folder / "sink")]
    return ["--event-log", str(SAMPLES / "event_logs" / name), "--input-root", str(SAMPLES / "inputs" / name)]


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        (ADS, ["camp-dup", "camp-a", "camp-case"]),
        (ORDERS, ["ord-0", "store-2", "ORD-9"]),
        ("outer_join_clicks", ["ad-late-click", "ad-far-click"]),  # Parquet input: DuckDB's rows, zoned times
    ],
)
def test_the_whole_query_answer_never_imports_pandas(name: str, keys: list[str]) -> None:
    """A whole process that answers in about a second cannot afford pandas' import (0.5 s): none of
    the native path imports it (pyarrow does behind ``to_pylist`` of zoned times, ``pa.table`` of a
    dict, ``schema.empty_table()``, a compute call with a Python number ...)."""
    import subprocess
    import sys

    cp = PIPELINES / name / "checkpoint" if (PIPELINES / name).is_dir() else SAMPLES / name
    args = [str(cp), *keys, *_folders(name), "--json"]
    code = (
        "import sys; sys.modules['pandas'] = None\n"  # any import of it raises ImportError
        f"sys.argv = ['cli.py', 'why-missing', *{args!r}]\n"
        "from statelens import cli; cli.run()\n"
    )
    env = {**__import__("os").environ, "STATELENS_ENGINE": "native"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SAMPLES.parent, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-1500:]
    assert [x["key"] for x in json.loads(r.stdout)["results"]] == keys


def test_without_the_event_log_a_dedup_of_clicks_is_off_the_impressions_path() -> None:
    """No plan: the operators a record passes are told from the state's key columns (the dedup keyed
    by click_id is on the clicks' path only), said once; the answers stay those of the plan."""
    folder = PIPELINES / ADS
    report = why_missing(
        str(folder / "checkpoint"),
        KeyQuestion(("camp-a", "camp-dup"), input_root=str(folder / "inputs"), sink=str(folder / "sink")),
    )
    r = {x.key: x for x in report.results}
    truth = {(e["batch_id"], e["file"]) for e in emitted(ADS, "campaign", "camp-a")}
    assert (r["camp-a"].outcome, written(r["camp-a"])) == ("written", truth)
    assert all([s.operator_id for s in rec.steps] == [1, 0] for rec in r["camp-a"].fate.records)
    [(b, f, row)] = located(ADS, "clicks", click_id="c-1", ad_id="ad-dup")
    assert (r["camp-dup"].outcome, r["camp-dup"].cause, at(r["camp-dup"])) == (
        "lost",
        "dropped_as_duplicate",
        (2, b, "right", f, row),
    )
    notes = [n for n in r["camp-a"].fate.notes if "off the path of the impressions records" in n]
    assert len(notes) == 1 and "click_id" in notes[0]


def test_the_report_answers_the_keys_asked_first(tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = PIPELINES / ADS
    out = tmp_path / "report.html"
    args = ["report", str(folder / "checkpoint"), "--out", str(out), "--event-log", str(folder / "event_log")]
    args += ["--key", "camp-dup", "--key", "camp-a", "--input-root", str(folder / "inputs"), "--sink", str(folder / "sink")]
    r = subprocess.run([sys.executable, str(SAMPLES.parent / "cli.py"), *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    [(b, f, row)] = located(ADS, "clicks", click_id="c-1", ad_id="ad-dup")
    assert (
        f"<td><code>camp-dup</code></td><td>lost</td><td>dropped_as_duplicate</td><td>operator 2, batch {b}, side right, file {f}, row {row}</td>"
        in page
    )
    assert "<td><code>camp-a</code></td><td>written</td>" in page
    assert page.index("Why these keys are missing") < page.index("<h2>Findings</h2>")
    assert len(page) < 2_500_000  # plotly.js compressed inside: it opens offline
