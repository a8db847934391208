""" "Check with Spark": an answer the native reader gave, read again through Spark's State Data
Source and compared. Spark is the engine of record; a disagreement is reported with what differs."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow as pa

from statelens.analysis.core.model import CheckpointInfo, StateSource
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.fate.answer import QueryAnswer
from statelens.analysis.runs.progress import ProgressLog
from statelens.analysis.verdicts import diagnose
from statelens.spark_io.readers import state_reader


def _multiset(table: pa.Table) -> Counter[str]:
    return Counter(json.dumps(r, sort_keys=True, default=repr) for r in table.to_pylist())


def rows_agree(native: pa.Table, spark: pa.Table) -> tuple[bool, str]:
    """Whether two reads hold the same rows (as multisets), and a sentence saying so."""
    a, b = _multiset(native), _multiset(spark)
    if a == b and native.column_names == spark.column_names:
        return True, f"Spark agrees: the same {spark.num_rows:,} rows."
    only_native, only_spark = sum((a - b).values()), sum((b - a).values())
    return False, (
        f"Spark disagrees: {native.num_rows:,} rows native, {spark.num_rows:,} through Spark; {only_native:,} rows only "
        f"native, {only_spark:,} only in Spark's read. Spark's read is the one to trust; please report this."
    )


def check_state(info: CheckpointInfo, source: StateSource, batch: int, native: pa.Table) -> tuple[bool, str]:
    spark, _ = state_reader.read_state(info.path, source, batch, info=info)
    return rows_agree(native, spark)


def check_changes(info: CheckpointInfo, source: StateSource, start: int, end: int, native: pa.Table) -> tuple[bool, str]:
    spark, _, _ = state_reader.read_changes(info.path, source, start, end, info=info)
    return rows_agree(native, spark)


def _answer(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("engine", "engine_note", "engine_notes")}


def reports_agree(native: dict[str, Any], spark: dict[str, Any], what: str) -> tuple[bool, str]:
    a, b = _answer(native), _answer(spark)
    if a == b:
        return True, f"Spark agrees: the same {what}."
    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return False, f"Spark disagrees on {', '.join(differ)} of the {what}. Spark's answer is the one to trust; please report this."


def check_why_missing(
    info: CheckpointInfo, report: diagnose.WhyMissingReport, q: KeyQuestion, progress: ProgressLog | None = None
) -> tuple[bool, str]:
    """One operator's answer again with Spark reading its state (the input files searched are the same)."""
    from statelens.spark_io.readers.spark_state import SparkState

    one = q.but(operator=report.operator_id, batch=report.batch, key_field=report.key_field)
    arrivals = report.lateness.arrivals if report.lateness is not None else None  # the input search is not state
    spark = diagnose.why_missing(SparkState(info), info, one, progress, arrivals)
    return _agree(report, spark, "verdicts and evidence")


def check_why_missing_whole(
    info: CheckpointInfo, report: QueryAnswer, q: KeyQuestion, progress: ProgressLog | None = None
) -> tuple[bool, str]:
    """The whole query's answer again with Spark reading every operator's state (the input files are the same)."""
    from statelens.spark_io.gather.fate import why_missing_whole
    from statelens.spark_io.readers.spark_state import SparkState

    spark = why_missing_whole(info, q.but(batch=report.batch), SparkState(info), progress)
    return _agree(report, spark, "fates, verdicts and evidence")


def _agree(
    report: diagnose.WhyMissingReport | QueryAnswer, spark: diagnose.WhyMissingReport | QueryAnswer, what: str
) -> tuple[bool, str]:
    ok, detail = reports_agree(report.to_dict(), spark.to_dict(), what)
    if not ok:
        pairs: list[tuple[Any, Any]] = list(zip(report.results, spark.results, strict=False))
        differ = [a.key for a, b in pairs if a.to_dict() != b.to_dict()]
        detail += f" Keys that differ: {', '.join(differ) or 'none (the report around them differs)'}."
    return ok, detail


def check_skew(info: CheckpointInfo, report: Any) -> tuple[bool, str]:
    from statelens.spark_io.gather import checkup
    from statelens.spark_io.readers import engine

    spark = checkup.skew(info.path, report.operator_id, report.store_name, report.batch_id, info=info, only=engine.SPARK)
    return reports_agree(report.to_dict(), spark.to_dict(), "rows per partition and hottest keys")
