"""The plan's filters evaluated on a record, against Spark's own evaluation of the same filter.

Each condition is applied by Spark to the same records read from a JSON file (so the physical plan
keeps its ``Filter`` node, as a streaming query's does): the rows Spark keeps are the truth, and the
condition as Spark printed it in the formatted plan is what State Lens evaluates. Every shape a user
writes (``NOT col``, ``isnotnull(..) AND ..``, ``IN``, ``LIKE`` that Spark rewrites to ``StartsWith``,
``CASE``, casts, arithmetic, timestamps, functions) must agree with Spark on every record; a shape
it does not read must say so (not evaluated), never guess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from statelens.analysis.plan.predicates import filter_passes
from statelens.analysis.plan.query_plan import parse_nodes

SCHEMA = "id INT, kind STRING, page STRING, amount BIGINT, price STRING, is_bot BOOLEAN, event_time TIMESTAMP"
RECORDS: list[dict[str, Any]] = [
    {
        "id": 1,
        "kind": "buy",
        "page": "/home",
        "amount": 12,
        "price": "12.50",
        "is_bot": False,
        "event_time": "2026-01-01T00:06:00Z",
    },
    {
        "id": 2,
        "kind": "refund",
        "page": "/health/live",
        "amount": 3,
        "price": "0.40",
        "is_bot": True,
        "event_time": "2026-01-01T00:01:00Z",
    },
    {"id": 3, "kind": "view", "page": "/p/index.html", "amount": 0, "price": "7.25", "event_time": "2026-01-01T00:05:00Z"},
    {"id": 4, "kind": " Buy ", "page": "/a", "amount": -7, "price": "1", "is_bot": False, "event_time": "2025-12-31T23:59:59Z"},
    {"id": 5, "page": "/cart", "amount": 10, "price": "10", "is_bot": None},
    {"id": 6, "kind": "vip", "amount": 5, "price": "5.0", "is_bot": False, "event_time": "2026-01-01T00:05:00.001Z"},
    # text in a bigint field: null to Spark's reader
    {"id": 7, "kind": "buy", "page": "/x", "amount": "many", "price": "3", "is_bot": False, "event_time": "2026-01-01T00:07:00Z"},
]
CONDITIONS = [
    "is_bot = false",
    "NOT is_bot",
    "is_bot",
    "kind != 'test'",
    "kind IN ('buy', 'refund')",
    "kind NOT IN ('view', 'vip')",
    "page LIKE '/health%'",
    "NOT page LIKE '/health%'",
    "page LIKE '%.html'",
    "page LIKE '%art%'",
    "page LIKE '/_'",
    "CASE WHEN amount > 10 THEN true ELSE false END",
    "CASE kind WHEN 'buy' THEN 1 ELSE 0 END = 1",
    "CAST(price AS DOUBLE) >= 1",
    "CAST(amount AS INT) > 5",
    "amount > 10 OR kind = 'vip'",
    "amount BETWEEN 5 AND 10",
    "amount % 2 = 0",
    "amount + 1 > 5",
    "-amount < 0",
    "lower(kind) = 'buy'",
    "trim(kind) = 'Buy'",
    "length(page) > 5",
    "kind IS NULL",
    "kind IS NOT NULL AND amount >= 0",
    "coalesce(kind, 'none') = 'none'",
    "event_time >= '2026-01-01 00:05:00'",
    "event_time < TIMESTAMP '2026-01-01 00:00:00'",
    "event_time + INTERVAL 2 MINUTES >= TIMESTAMP '2026-01-01 00:07:00'",
    "event_time - INTERVAL '1' HOUR < TIMESTAMP '2025-12-31 23:01:00'",
    "page RLIKE '^/[a-c]'",
    "upper(kind) IN ('BUY', 'VIP') AND NOT is_bot",
]
NOT_READ = ["sha2(kind, 256) = 'x'", "size(split(page, '/')) > 2"]  # functions it does not evaluate


@pytest.fixture(scope="module")
def spark_filters(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[str], set[int]]]:
    """condition -> (the Filter conditions Spark printed, the ids of the records Spark kept)."""
    folder = tmp_path_factory.mktemp("records")
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    df = spark.read.schema(SCHEMA).json(str(folder))
    out = {}
    for cond in CONDITIONS + NOT_READ:
        filtered = df.where(cond)
        kept = {r.id for r in filtered.collect()}
        text = spark._jvm.PythonSQLUtils.explainString(filtered._jdf.queryExecution(), "formatted")
        root = parse_nodes(text)
        assert root is not None, text
        printed = [n.details["Condition"] for n in root.walk() if n.name == "Filter" and n.details.get("Condition")]
        out[cond] = (printed, kept)
    return out


def ours(printed: list[str], record: dict[str, Any]) -> bool | None:
    """Every Filter node of the plan on the record: kept when each passes."""
    columns = {c.split()[0] for c in SCHEMA.split(", ")}
    verdicts = [filter_passes(p, record, columns).passes for p in printed]
    if False in verdicts:
        return False
    return None if None in verdicts else True


@pytest.mark.parametrize("cond", CONDITIONS)
def test_each_filter_shape_agrees_with_spark(spark_filters: dict[str, tuple[list[str], set[int]]], cond: str) -> None:
    printed, kept = spark_filters[cond]
    assert printed, f"Spark printed no Filter for {cond}"
    for r in RECORDS:
        assert ours(printed, r) == (r["id"] in kept), (cond, printed, r)


@pytest.mark.parametrize("cond", NOT_READ)
def test_a_shape_it_does_not_read_is_named_not_evaluated(spark_filters: dict[str, tuple[list[str], set[int]]], cond: str) -> None:
    printed, kept = spark_filters[cond]
    for r in RECORDS:
        got = ours(printed, r)
        assert got is None or got == (r["id"] in kept), (cond, printed, r)
    found = [filter_passes(p, RECORDS[0], {"kind", "page"}) for p in printed]
    assert any(v.passes is None and v.why for v in found)


def test_a_column_the_record_lacks_is_null_only_when_the_source_has_it() -> None:
    assert filter_passes("isnotnull(kind#1)", {"id": 1}, {"id", "kind"}).passes is False
    unknown = filter_passes("isnotnull(kind#1)", {"id": 1}, None)
    assert unknown.passes is None and "no column kind" in (unknown.why or "")


def test_the_printed_text_reads_back(tmp_path: Path) -> None:
    # literals are printed without quotes; a bare word that is not an attribute is text
    assert filter_passes("(kind#3 = buy now)", {"kind": "buy now"}, {"kind"}).passes is True
    assert filter_passes("kind#3 INSET a, b, c", {"kind": "b"}, {"kind"}).passes is True
