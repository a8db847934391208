"""A join's key read as the user's column: ``field0`` shown as the value column it equals.

The truth is each query's own join condition: the samples join ``o.order_id = p.order_id``
(``hot_key_join``: ``k``); a query written here joins ``upper(o.order_id) = p.order_ref``, whose
left key is an expression that equals no column and whose right key is ``order_ref``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from statelens.analysis.core.model import StateSource
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.diagnosis import key_field_labels, why_missing
from statelens.spark_io.gather.unmatched import unmatched
from statelens.spark_io.readers import engine
from support import ROOT, sample

JOINED_ON = {"join_hdfs": "order_id", "join_rocksdb": "order_id", "hot_key_join": "k", "chained_join_agg": "order_id"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(params=[engine.NATIVE, pytest.param(engine.SPARK, marks=pytest.mark.jvm)])
def each_engine(request: Any) -> Any:
    before = engine.current()
    engine.configure(request.param)
    yield request.param
    engine.configure(before)


@pytest.mark.parametrize("name", sorted(JOINED_ON))
def test_join_key_reads_as_the_column_the_query_joined_on(name: str, each_engine: str) -> None:
    from statelens.spark_io.logs.checkpoint import read_checkpoint

    info = read_checkpoint(sample(name))
    join = next(o for o in info.operators if o.is_join)
    column = JOINED_ON[name]
    assert key_field_labels(info, join.operator_id) == {"field0": f"field0 ({column})"}
    report = why_missing(sample(name), KeyQuestion(("no-such-key",), operator=join.operator_id))
    assert (report.key_field, report.operator_report.key_columns) == ("field0", {"left": column, "right": column})
    assert report.engine == each_engine


def test_the_column_name_is_accepted_as_the_key_field() -> None:
    by_field = json.loads(_cli("why-missing", sample("join_hdfs"), "ord-7", "ord-5", "--operator", "0", "--json").stdout)
    p = _cli("why-missing", sample("join_hdfs"), "ord-7", "ord-5", "--operator", "0", "--key-field", "order_id", "--json")
    assert p.returncode == 0, p.stderr
    by_column = json.loads(p.stdout)
    assert by_column["key_field"] == "field0" and by_column["key_columns"] == {"left": "order_id", "right": "order_id"}
    assert by_column["results"] == by_field["results"]
    text = _cli("why-missing", sample("join_hdfs"), "ord-7", "--operator", "0")
    assert "key field field0 (order_id)" in text.stdout.splitlines()[0]
    bad = _cli("why-missing", sample("join_hdfs"), "ord-7", "--key-field", "amount")
    # the whole query takes a state key field or an input column (here the input is gone: the state's)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "no field 'amount': no state key field or input column is named so. Its key columns: order_id." in bad.stderr
    assert "give the query's event log" in bad.stderr  # no plan here: a static table's column is not known


def test_unmatched_keys_are_headed_by_the_column() -> None:
    assert unmatched(sample("join_hdfs")).key_name == "order_id"
    p = _cli("unmatched", sample("join_hdfs"))
    assert p.returncode == 0, p.stderr
    assert any(line.split()[:2] == ["order_id", "verdict"] for line in p.stdout.splitlines())


@pytest.fixture(scope="module")
def expression_key_join(tmp_path_factory: Any, spark: Any) -> Path:
    """orders ⋈ payments on upper(o.order_id) = p.order_ref: the left key is an expression."""
    root = tmp_path_factory.mktemp("expr_join")
    (root / "o").mkdir()
    (root / "p").mkdir()
    (root / "o" / "0.json").write_text("".join(json.dumps({"order_id": f"ord-{i}", "amount": i}) + "\n" for i in range(6)))
    (root / "p" / "0.json").write_text("".join(json.dumps({"order_ref": f"ORD-{i}", "paid": i}) + "\n" for i in range(3, 9)))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        o = spark.readStream.schema("order_id STRING, amount LONG").json(str(root / "o")).alias("o")
        p = spark.readStream.schema("order_ref STRING, paid LONG").json(str(root / "p")).alias("p")
        from pyspark.sql import functions as F

        q = (
            o.join(p, F.upper(F.col("o.order_id")) == F.col("p.order_ref"))
            .writeStream.format("noop")
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    return root / "checkpoint"


def test_an_expression_key_keeps_its_field_and_each_side_its_own_column(expression_key_join: Path, each_engine: str) -> None:
    report = why_missing(str(expression_key_join), KeyQuestion(("ORD-1",)))
    assert report.operator_report.key_columns == {"right": "order_ref"}  # upper(order_id) equals no left column
    assert report.operator_report.key_label == "field0 (order_ref)"
    assert report.results[0].verdict == "waiting_for_other_side" and report.results[0].side == "left"
    assert unmatched(str(expression_key_join)).key_name == "order_ref"


def test_pages_name_the_join_key_by_its_column() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["checkpoint"] = sample("join_hdfs")
    at.run()
    at.switch_page("views/browser.py").run()
    assert not at.exception
    assert any("Key `field0` is `order_id`" in c.value for c in at.caption)
    at.switch_page("views/why_missing.py").run()
    whole = at.selectbox(key="wm_field")  # the whole query: every key column, or one input column
    assert whole.value == "" and "order_id" in whole.options
    at.selectbox(key="wm_op").set_value(0).run()
    field = at.selectbox(key="wm_field")
    assert field.value == "field0" and "field0 (order_id)" in field.options
    # a link may name the column: it selects the field
    linked = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    linked.query_params.update({"checkpoint": sample("join_hdfs"), "operator": "0", "key": ["ord-7"], "key_field": "order_id"})
    linked.run()
    linked.switch_page("views/why_missing.py").run()
    assert linked.selectbox(key="wm_field").value == "field0"
    assert any("key field field0 (order_id)" in c.value for c in linked.caption)


def test_a_count_store_has_no_value_column_to_name_its_key() -> None:
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.readers.native.access import NativeState

    info = read_checkpoint(sample("join_hdfs"))
    counts = StateSource(0, store_name="left-keyToNumValues")
    assert NativeState(info).key_columns(counts, info.committed_batches[-1].batch_id) == {}
