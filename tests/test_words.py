"""What users read, as they reported it: a key as typed (whitespace kept visible), a schema as they
write it, a place named once. Pure: no Spark, no browser."""

from __future__ import annotations

from statelens.analysis.charts.flow import shown_key
from statelens.analysis.checkpoint.change import Field, readable_type
from statelens.analysis.inputs.records import Arrival
from statelens.analysis.verdicts.key_verdicts import KeyDiagnosis
from statelens.analysis.verdicts.lateness import _arrival_text
from statelens.render import key_answer


def test_a_key_with_a_leading_space_keeps_it_in_the_html() -> None:
    page = key_answer(KeyDiagnosis(" user-8", "never_in_state", "The key was never in the state."))
    assert "<code>&#x27;␠user-8&#x27;</code>" in page
    assert shown_key("user-8") == "user-8" and shown_key("a\tb") == "'a⇥b'"


def test_a_schema_reads_as_a_user_writes_it() -> None:
    window = "StructType(StructField(start,TimestampType,true),StructField(end,TimestampType,true))"
    assert Field("window", window, True).readable() == "window struct<start: timestamp, end: timestamp>"
    assert Field("window", window, True).text() == f"window {window}"  # the JSON keeps Spark's own
    assert readable_type("MapType(StringType,ArrayType(LongType,true),true)") == "map<string, array<long>>"
    assert readable_type("DecimalType(10,2)") == "decimal(10,2)" and readable_type("TimestampNTZType") == "timestamp_ntz"
    assert Field("n", "LongType", False).readable() == "n long NOT NULL"


def test_a_file_read_by_one_batch_is_named_once() -> None:
    three = [Arrival(2, "orders", "in/orders-2.json")] * 3 + [Arrival(3, "orders", "in/orders-3.json")]
    assert _arrival_text(three) == (
        "batch 2 read it from in/orders-2.json (the orders source); batch 3 read it from in/orders-3.json (the orders source)"
    )


def test_a_write_the_job_repeats_is_named_once_with_its_count() -> None:
    from statelens.analysis.checkpoint.change import named_once

    writes = ["DataFrameWriter.parquet(/out/x)"] * 3 + ["DataFrameWriter.json(/out/y)"]
    assert named_once(writes) == ["DataFrameWriter.parquet(/out/x) (3 times)", "DataFrameWriter.json(/out/y)"]
