"""A join's type, keys and condition from the query's physical plan (an event log's
SQLExecutionStart), against the queries that wrote the samples and a query run here."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.plan.query_plan import join_plans, readable
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.logs.event_logs import read_progress
from support import ROOT, SAMPLES, generate, sample

EVENT_LOGS = SAMPLES / "event_logs"
JOINS = {"join_hdfs": 0, "join_rocksdb": 0, "chained_join_agg": 1}


@pytest.mark.parametrize("name", sorted(JOINS))
def test_the_plan_states_the_query_s_join(name: str) -> None:
    """The samples join orders and payments on o.order_id = p.order_id, inner, with payment_time
    within 5 minutes of order_time (generate.orders_payments_join)."""
    query = inspect.getsource(generate.orders_payments_join)
    assert '"inner"' in query and "o.order_id = p.order_id" in query
    assert "payment_time - INTERVAL 5 MINUTES" in query and "payment_time + INTERVAL 5 MINUTES" in query
    info = read_checkpoint(sample(name))
    log = read_progress(str(EVENT_LOGS / name), info)
    (plan,) = log.joins.values()
    assert plan.operator_id == JOINS[name] and info.operator(plan.operator_id).is_join  # type: ignore[union-attr]
    assert (plan.join_type, plan.left_keys, plan.right_keys) == ("inner", ("order_id",), ("order_id",))
    assert plan.condition == "(order_time >= payment_time - 5 minutes) AND (order_time <= payment_time + 5 minutes)"


def test_why_missing_takes_the_join_type_and_condition_from_the_plan() -> None:
    """ord-14's payment came 8 minutes after its order (the generator: n % 10 == 4): outside the
    5-minute range the plan states."""
    keys = ["ord-14", "ord-1", "ord-6", "ord-5"]
    with_log = why_missing(sample("join_hdfs"), KeyQuestion(tuple(keys), event_log=str(EVENT_LOGS / "join_hdfs")))
    given = why_missing(sample("join_hdfs"), KeyQuestion(tuple(keys), join_type="inner"))
    assert with_log.operator_report.join_type == "inner" and with_log.operator_report.join_plan is not None
    assert [(r.key, r.verdict, r.side) for r in with_log.results] == [(r.key, r.verdict, r.side) for r in given.results]
    cnm = next(r for r in with_log.results if r.key == "ord-14")
    assert cnm.verdict == wm.CONDITION_NOT_MET
    assert "(right after left by 8m). The join's condition, from the event log's plan: (order_time >= payment_time" in (
        cnm.explanation
    )
    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "why-missing",
            sample("join_hdfs"),
            "ord-14",
            "--event-log",
            str(EVENT_LOGS / "join_hdfs"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["join_type"] == "inner" and out["join_plan"]["left_keys"] == ["order_id"]


def test_a_user_given_join_type_wins() -> None:
    report = why_missing(
        sample("join_hdfs"), KeyQuestion(("ord-1",), join_type="left_outer", event_log=str(EVENT_LOGS / "join_hdfs"))
    )
    assert report.operator_report.join_type == "left_outer" and report.results[0].verdict == wm.EMITTED_UNMATCHED


@pytest.fixture(scope="module")
def left_outer_plan(tmp_path_factory: Any, spark: Any) -> tuple[str, Path]:
    """A real left outer join whose keys differ in name and whose range is written with BETWEEN;
    its formatted plan is what the event log's physicalPlanDescription holds."""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("left_outer_plan")
    for side, row in (("o", {"oid": "a", "ot": "2026-01-01T00:00:00"}), ("p", {"ref": "a", "pt": "2026-01-01T00:01:00"})):
        (root / side).mkdir()
        (root / side / "0.json").write_text(json.dumps(row) + "\n")
    o = spark.readStream.schema("oid STRING, ot TIMESTAMP").json(str(root / "o")).withWatermark("ot", "1 minute").alias("o")
    p = spark.readStream.schema("ref STRING, pt TIMESTAMP").json(str(root / "p")).withWatermark("pt", "1 minute").alias("p")
    cond = F.expr("o.oid = p.ref AND p.pt BETWEEN o.ot AND o.ot + INTERVAL 10 MINUTES")
    q = (
        o.join(p, cond, "leftOuter")
        .writeStream.format("noop")
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    jq = q._jsq
    execution = (jq.streamingQuery() if hasattr(jq, "streamingQuery") else jq).lastExecution()
    mode = spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")
    return str(execution.explainString(mode)), root / "checkpoint"


def test_a_left_outer_plan(left_outer_plan: tuple[str, Path]) -> None:
    text, checkpoint = left_outer_plan
    (plan,) = join_plans(text).values()
    assert (plan.operator_id, plan.join_type, plan.left_keys, plan.right_keys) == (0, "left_outer", ("oid",), ("ref",))
    assert plan.condition == "(pt >= ot) AND (pt <= ot + 10 minutes)"
    assert read_checkpoint(str(checkpoint)).operator(0).is_join  # type: ignore[union-attr]


def test_readable_expressions() -> None:
    assert readable("(a#1-T120000ms >= b#2 + INTERVAL '-05' MINUTE)") == "a >= b - 5 minutes"
    assert readable("a#1 <= b#2 - INTERVAL '01' HOUR") == "a <= b - 1 hour"
    assert readable("a#1 <= b#2 - INTERVAL '-30' SECOND") == "a <= b + 30 seconds"
    assert readable("(a#1 > 0) AND (b#2 > 0)") == "(a > 0) AND (b > 0)"  # not one pair of brackets: kept
