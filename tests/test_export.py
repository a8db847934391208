"""CSV and Parquet exports of query results (nested state columns included)."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pyarrow as pa
import pyarrow.parquet as pq

from statelens.analysis.charts.export import flatten_all, to_csv_bytes, to_parquet_bytes


def nested_table() -> pa.Table:
    t = dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.UTC)
    ts = pa.timestamp("us", tz="UTC")
    key_type = pa.struct([("user_id", pa.string()), ("window", pa.struct([("start", ts), ("end", ts)]))])
    return pa.table(
        {
            "key": pa.array([{"user_id": "u1", "window": {"start": t, "end": t}}, {"user_id": "u2", "window": None}], key_type),
            "value": [{"events": [1, 2]}, {"events": None}],
            "dummy": pa.nulls(2),
            "partition_id": [0, 3],
        }
    )


def test_csv_flattens_structs_to_dotted_columns() -> None:
    rows = list(csv.reader(io.StringIO(to_csv_bytes(nested_table()).decode())))
    assert rows[0] == ["key.user_id", "key.window.start", "key.window.end", "value.events", "dummy", "partition_id"]
    assert rows[1][0] == "u1" and rows[1][1].startswith("2026-01-01 00:05:00") and rows[1][3] == "[1, 2]"
    assert rows[2][:2] == ["u2", ""] and rows[2][5] == "3"
    assert flatten_all(nested_table()).num_rows == 2


def test_parquet_keeps_the_nested_schema() -> None:
    back = pq.read_table(io.BytesIO(to_parquet_bytes(nested_table())))
    assert back.schema.field("key").type == nested_table().schema.field("key").type
    assert back.to_pylist() == nested_table().to_pylist()
