"""The DuckDB workspace: documented table names, lazy loading, STRUCT columns, limits, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from statelens.analysis.checkpoint.examples import example_queries
from statelens.analysis.core.errors import BatchOutOfRange, SqlError
from statelens.spark_io.gather.workspace import Workspace, table_specs
from statelens.spark_io.logs.checkpoint import read_checkpoint
from support import sample, scenario

pytestmark = pytest.mark.usefixtures("spark")


def test_table_names_follow_the_documented_scheme() -> None:
    names = {s.name for s in table_specs(read_checkpoint(sample("join_hdfs"))).values()}
    assert names == {
        "op0_left_keyToNumValues",
        "op0_left_keyWithIndexToValue",
        "op0_right_keyToNumValues",
        "op0_right_keyWithIndexToValue",
        "op0_left_keyToNumValues_changes",
        "op0_left_keyWithIndexToValue_changes",
        "op0_right_keyToNumValues_changes",
        "op0_right_keyWithIndexToValue_changes",
        "op0_left",
        "op0_right",
    }
    assert {s.name for s in table_specs(read_checkpoint(sample("windowed_agg"))).values()} == {"op0", "op0_changes"}
    chained = {s.name for s in table_specs(read_checkpoint(sample("chained_join_agg"))).values()}
    assert {"op0", "op0_changes", "op1_left", "op1_right_keyWithIndexToValue"} <= chained
    tws = {s.name for s in table_specs(read_checkpoint(sample("transform_with_state"))).values()}
    assert tws == {
        "op0_count",
        "op0_per_kind",
        "op0_recent",
        "op0_timers",
        "op0_count_changes",
        "op0_per_kind_changes",
        "op0_recent_changes",
    }


def test_tables_load_lazily_and_structs_stay_structs() -> None:
    ws = Workspace(sample("join_hdfs"))
    assert ws.batch == 16 and ws.loaded == {}
    r = ws.execute("SELECT key.field0 AS k, value.order_time AS t, value.matched AS m FROM op0_left_keyWithIndexToValue")
    assert set(ws.loaded) == {"op0_left_keywithindextovalue"}  # only the named table was read
    assert r.columns == ["k", "t", "m"] and r.table.num_rows == ws.loaded["op0_left_keywithindextovalue"].rows
    # the blog's outer join of both sides works in plain SQL
    sql = example_queries(ws.info)["Join 0: left ⋈ right state, who is waiting for whom"]
    rows = ws.execute(sql).table.to_pylist()
    waiting_left = {r["join_key"] for r in rows if r["right_value"] is None}
    # orders with a late payment (n % 10 == 3) are in state and have nobody on the right
    assert any(int(k.split("-")[1]) % 10 == 3 for k in waiting_left)
    assert all(r["left_matched"] is not None or r["right_value"] is not None for r in rows)


def test_names_in_strings_and_comments_do_not_load_tables() -> None:
    ws = Workspace(sample("join_hdfs"))
    ws.execute("SELECT 'op0_left' AS s -- op0_right\n")
    assert ws.loaded == {}


def test_batch_choice_and_change_feed() -> None:
    s = scenario("unbounded_agg")
    ws = Workspace(sample("unbounded_agg"), batch_id=3)
    assert ws.execute("SELECT count(*) AS n FROM op0").table.to_pylist() == [{"n": 4 * 25}]
    per_batch = ws.execute("SELECT batch_id, count(*) AS n FROM op0_changes GROUP BY ALL ORDER BY 1").table.to_pylist()
    assert per_batch == [{"batch_id": b, "n": len(s.batches[b]["events"])} for b in range(4)]
    with pytest.raises(BatchOutOfRange):
        Workspace(sample("unbounded_agg"), batch_id=12)


def test_row_cap_and_errors() -> None:
    ws = Workspace(sample("unbounded_agg"))
    r = ws.execute("SELECT * FROM op0", max_rows=50)
    assert r.truncated and r.table.num_rows == 50
    assert not ws.execute("SELECT * FROM op0", max_rows=300).truncated
    with pytest.raises(SqlError, match=r"op9.*Tables: op0"):
        ws.execute("SELECT * FROM op9")
    with pytest.raises(SqlError, match="empty"):
        ws.execute("  -- nothing\n ;")
    with pytest.raises(SqlError, match=r"Parser Error|syntax"):
        ws.execute("SELEC * FROM op0")
    # the workspace keeps working after an error
    assert ws.execute("SELECT count(*) AS n FROM op0").table.to_pylist() == [{"n": 300}]


def test_examples_run_on_every_sample() -> None:
    from support import SAMPLE_NAMES

    for name in SAMPLE_NAMES:
        ws = Workspace(sample(name))
        examples = example_queries(ws.info)
        assert examples, name
        for _title, sql in examples.items():
            ws.execute(sql)  # raises SqlError on failure
        ws.close()


def test_row_budget_filters_and_spill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from collections import Counter

    from statelens.analysis.core.errors import RowBudgetExceeded, speaking_as
    from statelens.analysis.core.model import StateSource
    from statelens.spark_io.readers.state_reader import RowFilter, read_state

    full, _ = read_state(sample("unbounded_agg"), StateSource(0))
    per_part = Counter(full.column("partition_id").to_pylist())
    with (
        speaking_as("cli"),
        pytest.raises(RowBudgetExceeded, match=r"op0 holds more than 100 rows at batch 11.*--partitions.*--spill"),
    ):
        Workspace(sample("unbounded_agg"), row_budget=100).execute("SELECT count(*) FROM op0")
    # asked from Python, the advice names the API's arguments
    with pytest.raises(RowBudgetExceeded, match=r"\(partitions=\[0, 3\]\), raise the budget \(row_budget=N .*\(spill=True\)"):
        Workspace(sample("unbounded_agg"), row_budget=100).execute("SELECT count(*) FROM op0")
    # a partition filter, applied in Spark, brings the table under the budget
    ws = Workspace(sample("unbounded_agg"), row_budget=100, row_filter=RowFilter(partitions=(0,)))
    assert ws.execute("SELECT count(*) AS n FROM op0").table.to_pylist() == [{"n": per_part[0]}]
    # a key filter on the key field
    keyed = Workspace(sample("unbounded_agg"), row_filter=RowFilter(key_field="event_id", keys=("ev-1", "ev-7", "nope")))
    assert sorted(keyed.execute("SELECT key.event_id AS k FROM op0").table.column("k").to_pylist()) == ["ev-1", "ev-7"]
    # spilling: every row, read by DuckDB from Parquet files in a folder of State Lens's own
    spilled = Workspace(sample("unbounded_agg"), row_budget=100, spill_dir=str(tmp_path))
    r = spilled.execute("SELECT count(*) AS n, count(DISTINCT partition_id) AS p, max(value.count) AS c FROM op0")
    assert r.table.to_pylist() == [{"n": 300, "p": 4, "c": 1}]
    loaded = spilled.loaded["op0"]
    assert loaded.spilled and loaded.spilled.startswith(str(tmp_path)) and loaded.rows == 300
    assert loaded.engine == "native" and list(Path(loaded.spilled).glob("*.parquet"))  # written without Spark
    rows = spilled.execute("SELECT key, value, partition_id FROM op0").table  # every row as Spark reads it
    assert Counter(map(str, rows.to_pylist())) == Counter(map(str, full.select(["key", "value", "partition_id"]).to_pylist()))
    from statelens.spark_io.readers import engine

    engine.configure("spark")  # --engine spark: Spark's executors write the files
    try:
        by_spark = Workspace(sample("unbounded_agg"), row_budget=100, spill_dir=str(tmp_path / "spark"))
        assert by_spark.execute("SELECT count(*) AS n FROM op0").table.to_pylist() == [{"n": 300}]
        assert by_spark.loaded["op0"].engine == "spark"
    finally:
        engine.configure("auto")
    # change feeds cannot spill: the budget message says so by leaving the spill advice out
    with pytest.raises(RowBudgetExceeded) as e:
        spilled.execute("SELECT count(*) FROM op0_changes")
    assert "--spill" not in e.value.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_parquet('/etc/*.parquet')",
        "SELECT * FROM read_text('/etc/hostname')",
        "COPY op0 TO '/tmp/statelens-stolen.csv'",
        "ATTACH '/tmp/statelens-other.db' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "SET allowed_directories = ['/']",
        "PRAGMA enable_external_access",
    ],
)
def test_sql_can_read_only_the_state_tables(sql: str) -> None:
    ws = Workspace(sample("unbounded_agg"))
    with pytest.raises(SqlError) as e:
        ws.execute(sql)
    assert "disabled" in e.value.message or "Parser Error" in e.value.message or "Catalog" in e.value.message
    assert not Path("/tmp/statelens-stolen.csv").exists()
    assert ws.execute("SELECT count(*) AS n FROM op0").table.to_pylist() == [{"n": 300}]  # still works


def test_sql_time_limit() -> None:
    import time

    ws = Workspace(sample("unbounded_agg"), timeout=1)
    t0 = time.monotonic()
    with pytest.raises(SqlError, match=r"longer than 1 s, the time limit"):
        ws.execute("SELECT sum(a.range * b.range % 7) FROM range(200000) a, range(200000) b")
    assert time.monotonic() - t0 < 15
    assert ws.execute("SELECT count(*) AS n FROM op0").table.to_pylist() == [{"n": 300}]


def test_a_cancelled_query_stops_running() -> None:
    """Cancel (the app's button, through ``run_cancellable``) interrupts DuckDB too: the query's thread
    ends within seconds, long before its time limit, and says it was cancelled."""
    import threading
    import time

    from statelens.spark_io.runtime.jobs import run_cancellable

    ws = Workspace(sample("unbounded_agg"), timeout=600)
    ws.execute("SELECT count(*) FROM op0")  # the table loaded: what runs next is DuckDB alone
    outcome: dict[str, Any] = {}

    def query() -> None:
        outcome["thread"] = threading.current_thread()
        try:
            ws.execute("SELECT sum(a.range * b.range % 7) FROM range(400000) a, range(400000) b")
        except BaseException as e:
            outcome["error"] = e
            raise

    def tick(_progress: object) -> None:
        if time.monotonic() - t0 > 1.5:
            raise KeyboardInterrupt  # what a Cancel click does to the page's run

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_cancellable(query, tick, interval=0.25)
    worker = outcome["thread"]
    worker.join(20)
    assert not worker.is_alive(), "the cancelled query still runs"
    assert isinstance(outcome["error"], SqlError) and outcome["error"].message == "The query was cancelled."
    assert time.monotonic() - t0 < 25
    assert ws.execute("SELECT count(*) AS n FROM op0").table.to_pylist() == [{"n": 300}]


def _spark_rows_per_partition(name: str, source: str, batch: int) -> dict[int, int]:
    """Rows per partition of a store at a batch, as Spark read them (the sample's golden file)."""
    from collections import Counter

    import golden

    return dict(Counter(r["partition_id"] for r in golden.state_at_batches(name)[source].get(batch, [])))


@pytest.mark.parametrize("name", ["windowed_agg", "join_rocksdb", "transform_with_state", "session_window", "dedup"])
def test_a_query_that_reads_no_value_loads_keys_only_and_counts_as_spark(name: str) -> None:
    """count(*) per partition loads a store's keys alone (no value decoded) and equals Spark's
    rows per partition; a later query that reads values loads the table again, whole."""
    ws = Workspace(sample(name))
    assert ws.batch is not None
    for spec in [s for s in ws.specs.values() if not s.changes]:
        got = ws.execute(f'SELECT partition_id, count(*) AS n FROM "{spec.name}" GROUP BY 1').table.to_pylist()
        assert {r["partition_id"]: r["n"] for r in got} == _spark_rows_per_partition(name, spec.source.describe(), ws.batch)
        loaded = ws.loaded[spec.name.lower()]
        columns = ws.execute(f'SELECT * FROM "{spec.name}" LIMIT 0').columns
        # a store's values are kept apart from its keys (a join side's rows, a map's or list's entries are not)
        assert loaded.keys_only == (spec.source.join_side is None and columns == ["key", "value", "partition_id"]), spec.name
        assert not ws.loaded[spec.name.lower()].keys_only  # SELECT * read them: loaded whole
        assert ws.loaded[spec.name.lower()].rows == loaded.rows


@pytest.mark.parametrize(
    ("sql", "whole"),
    [
        ("SELECT count(*) FROM op0", False),
        ("SELECT count(DISTINCT key.user_id) FROM op0 WHERE partition_id > 0", False),
        ("SELECT count(*) FROM (SELECT * FROM op0)", False),
        ("SELECT * FROM op0", True),
        ("SELECT op0 FROM op0", True),  # the row as a struct
        ("SELECT count(*) FROM op0 WHERE hash(op0) > 0", True),
        ("SELECT count(*) FROM op0 WHERE value.count > 1", True),  # a filter's column
        ("SELECT count(COLUMNS(*)) FROM op0", True),
        ("SELECT count(value) FROM op0", True),  # counts non-null values
        ("SELECT * EXCLUDE (value) FROM op0 LIMIT 0", True),  # names value: the keys alone do not bind, loaded whole
    ],
)
def test_only_a_query_that_reads_no_value_loads_keys_only(sql: str, whole: bool) -> None:
    ws = Workspace(sample("windowed_agg"))
    ws.execute(sql)
    assert ws.loaded["op0"].keys_only is not whole


def test_a_refused_query_leaves_nothing_running_that_holds_duckdb() -> None:
    """A query's time-limit thread ends with the query: the CLI exits right after a refusal, and a
    thread still holding DuckDB's cursor then made DuckDB print "nanobind: leaked 28 instances!" on
    stderr (a second line after the refusal; seen in 2 of 8 such exits before)."""
    import threading

    ws = Workspace(sample("unbounded_agg"))
    ws.execute("SELECT count(*) FROM op0")  # the table loaded (its reader's threads started)
    before = threading.active_count()
    for _ in range(5):
        with pytest.raises(SqlError):
            ws.execute("COPY op0 TO '/tmp/statelens-stolen.csv'")
        assert threading.active_count() == before
    ws.close()
