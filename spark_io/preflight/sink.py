"""The job's file sink as it is: the columns of the files already in its folder (Parquet), to compare
with what the changed query writes (``analysis.checkpoint.change.sink_warnings``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from statelens.analysis.core.errors import StateLensError, StateReadError
from statelens.spark_io.storage import open_storage
from statelens.spark_io.storage.locations import is_local, local_path

# Arrow's type names as Spark's JSON schema names them ("?": not compared)
_SPARK_NAMES = {
    "int64": "long",
    "int32": "integer",
    "int16": "short",
    "int8": "byte",
    "double": "double",
    "float": "float",
    "string": "string",
    "large_string": "string",
    "bool": "boolean",
    "date32[day]": "date",
    "binary": "binary",
}


def _spark_name(arrow_type: Any) -> str:
    import pyarrow as pa

    text = str(arrow_type)
    if text in _SPARK_NAMES:
        return _SPARK_NAMES[text]
    if pa.types.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz else "timestamp_ntz"
    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_struct(arrow_type):
        return "struct"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return "array"
    if pa.types.is_map(arrow_type):
        return "map"
    return "?"


def _json_name(t: Any) -> str:
    """A field's type in Spark's JSON schema, as its short name: ``long``, ``struct``, ``decimal(10,2)``."""
    return str(t.get("type")) if isinstance(t, dict) else str(t)


SPARK_SCHEMA = b"org.apache.spark.sql.parquet.row.metadata"  # the schema Spark wrote a file with, in its footer


def stored_columns(path: str) -> list[tuple[str, str]]:
    """(name, type) of a Parquet file's columns as Spark reads them: Spark's own schema from the file's
    footer (a timestamp Spark wrote as INT96 is a ``timestamp``, not the naive one Arrow reads), else
    Arrow's reading of it (a file another writer made)."""
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    spark = (meta.metadata or {}).get(SPARK_SCHEMA)
    if spark:
        try:
            fields = json.loads(spark).get("fields", [])
            return [(str(f["name"]), _json_name(f["type"])) for f in fields]
        except (ValueError, KeyError, TypeError, AttributeError):
            pass  # not Spark's JSON after all: Arrow's reading
    return [(f.name, _spark_name(f.type)) for f in meta.schema.to_arrow_schema()]


FILE_FORMATS = ("parquet", "json", "csv", "orc", "text", "avro")  # Spark's file sinks, each with its _spark_metadata log
COMPACT_INTERVAL = 10  # spark.sql.streaming.fileSink.log.compactInterval's default


def file_sink(sink: dict[str, Any] | None) -> str | None:
    """The folder of a job's file sink (its writer's path and a file format), else None."""
    if not sink or not sink.get("path") or str(sink.get("format") or "").lower() not in FILE_FORMATS:
        return None
    return str(sink["path"])


def prepare_log(old_sink: str | None, new_sink: str, next_batch: int) -> list[str]:
    """A new folder for a file sink that continues at ``next_batch``: its ``_spark_metadata`` log given
    an entry for every batch before, each empty (no file), named as the old sink's log names them
    (its compactions, ``N.compact``: the log reads the newest and what came after), else as Spark
    names them by default. Spark's sink log then continues there past its next compaction, which needs
    every earlier batch's entry; readers of the folder see the rows written from ``next_batch`` on.
    The folder must not exist or be empty. Returns the entries written."""
    names: list[str] = []
    if old_sink is not None:
        try:
            names = [
                e.name
                for e in open_storage(old_sink, what="sink").listdir("_spark_metadata")
                if (n := e.name.split(".")[0]).isdigit() and int(n) < next_batch and e.name in (n, f"{n}.compact")
            ]
        except (OSError, StateLensError):
            names = []
    if not names:  # Spark's own naming: a compaction every COMPACT_INTERVAL batches
        names = [f"{b}.compact" if (b + 1) % COMPACT_INTERVAL == 0 else str(b) for b in range(next_batch)]
    log = Path(local_path(new_sink)) / "_spark_metadata"
    log.mkdir(parents=True, exist_ok=True)
    for name in names:
        (log / name).write_text("v1", "utf-8")  # the log's version line, and no file
    return sorted(names, key=lambda n: int(n.split(".")[0]))


def _partition_columns(rel: str) -> set[str]:
    return {part.split("=", 1)[0] for part in rel.split("/")[:-1] if "=" in part}


def sink_columns(
    sink: dict[str, Any], output_schema: dict[str, Any] | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]] | None:
    """(stored, new) columns of a local Parquet sink that holds files, partition columns left out; None
    when there is nothing to compare (another sink, no files yet, the new columns unknown). A file that
    cannot be read raises ``StateReadError``, a sink outside what may be read ``NotAllowed`` (the
    comparison is then said to be not made, and why)."""
    path, fmt = sink.get("path"), str(sink.get("format") or "").lower()
    if not path or fmt != "parquet" or not output_schema or not is_local(str(path)):
        return None
    storage = open_storage(str(path), what="sink")
    files = [
        e
        for e in storage.walk("")
        if e.name.endswith(".parquet") and not any(p.startswith(("_", ".")) for p in e.path.split("/")[:-1])
    ]
    if not files:
        return None
    newest = max(files, key=lambda e: e.mtime_ns)
    partitions = _partition_columns(newest.path)
    try:
        columns = stored_columns(storage.local_file(newest.path))
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise StateReadError(f"{storage.where(newest.path)} could not be read ({str(e).splitlines()[0][:200]})") from e
    stored = [(n, t) for n, t in columns if n not in partitions]
    new = [(str(f["name"]), _json_name(f["type"])) for f in output_schema.get("fields", []) if f["name"] not in partitions]
    return stored, new
