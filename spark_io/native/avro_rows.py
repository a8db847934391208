"""Avro-encoded state rows (``spark.sql.streaming.stateStore.encodingFormat=avro``, Spark 4.0+)
decoded into Arrow, beside ``unsafe_row`` for the default encoding.

Spark's ``AvroStateEncoder`` writes a row as ``[schema id (2 bytes)][Avro binary]`` after
RocksDB's version byte (values, keys without a prefix, the rest of a prefix key); a prefix key's
prefix is Avro binary without an id. The id names the schema the row was written with (the
``_stateSchema`` files keep every schema a column family has had: schema evolution). The Avro
schema of a Spark schema is ``SchemaConverters.toAvroTypeWithDefaults`` of its nullable twin (Avro
encoding makes every state field nullable): records, fields as ``["null", type]`` unions defaulting to null, timestamps as ``timestamp-micros`` longs, dates
as ``date`` ints. Rows are decoded with fastavro, then built into the Arrow types
``unsafe_row`` gives for the same schema.
"""

from __future__ import annotations

import io
import itertools
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

from spark_io.native.unsafe_row import Damaged, Rows, Undecodable, arrow_type, unique_fields

_PRIMITIVE = {
    "boolean": "boolean",
    "byte": "int",
    "short": "int",
    "integer": "int",
    "int": "int",
    "long": "long",
    "bigint": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "date": {"type": "int", "logicalType": "date"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "timestamp_ntz": {"type": "long", "logicalType": "local-timestamp-micros"},
}


def avro_type(t: Any, nullable: bool, names: itertools.count[int]) -> Any:
    """The Avro type ``SchemaConverters.toAvroTypeWithDefaults`` gives a Spark JSON type."""
    if isinstance(t, dict) and t.get("type") == "struct":
        base: Any = avro_record(t["fields"], names)
    else:
        name = str(t).lower()
        if name in ("void", "null"):
            return "null"
        if name.startswith("decimal"):
            at = arrow_type(t)
            size = next(n for n in range(1, 17) if 2 ** (8 * n - 1) >= 10**at.precision)
            base = {
                "type": "fixed",
                "name": f"fixed_{next(names)}",
                "size": size,
                "logicalType": "decimal",
                "precision": at.precision,
                "scale": at.scale,
            }
        elif name in _PRIMITIVE or name.startswith(("char", "varchar")):
            base = _PRIMITIVE.get(name, "string")
        else:
            raise Undecodable(f"the type {t} in Avro-encoded state")
    return ["null", base] if nullable else base


def avro_record(fields: list[dict[str, Any]], names: itertools.count[int]) -> dict[str, Any]:
    out = []
    for f in unique_fields(fields):
        # with Avro encoding Spark makes every state field nullable, whatever the schema file says
        out.append({"name": f["name"], "type": avro_type(f["type"], True, names), "default": None})
    return {"type": "record", "name": f"record_{next(names)}", "fields": out}


def parsed(fields: list[dict[str, Any]]) -> Any:
    return fastavro.parse_schema(avro_record(fields, itertools.count()))


def decode(
    rows: Rows,
    fields: list[dict[str, Any]],
    writers: dict[int, list[dict[str, Any]]] | None,
    only: frozenset[str] | None = None,
) -> pa.StructArray:
    """Avro rows as one Arrow struct column of ``fields`` (the newest schema). ``writers``: the
    schema of each schema id the rows may carry in their first two bytes (little endian, as
    Spark's ``Platform.putShort``); None for rows without an id (a prefix key's prefix)."""
    fields = unique_fields(fields)
    reader = parsed(fields)
    by_id: dict[int, Any] = {}
    values: list[dict[str, Any] | None] = []
    buf = rows.buf
    for i in range(len(rows.base)):
        if not rows.keep[i]:
            values.append(None)
            continue
        start, end = int(rows.base[i]), int(rows.base[i] + rows.size[i])
        writer = reader
        if writers is not None:
            if end - start < 2:
                raise Damaged("an Avro row shorter than its schema id", i)
            sid = int(buf[start]) | (int(buf[start + 1]) << 8)
            start += 2
            if sid not in by_id:
                if sid not in writers:
                    raise Damaged(f"an Avro row written with schema id {sid}, which no state schema file holds", i)
                by_id[sid] = parsed(writers[sid])
            writer = by_id[sid]
        try:
            record = fastavro.schemaless_reader(io.BytesIO(buf[start:end].tobytes()), writer, reader)
        except Exception as e:  # fastavro raises several kinds on bad bytes
            raise Damaged(f"an Avro row that does not decode ({type(e).__name__}: {e})", i) from e
        values.append(record if isinstance(record, dict) else None)
    wanted = [f for f in fields if only is None or f["name"] in only]
    struct = pa.struct([pa.field(f["name"], arrow_type(f["type"]), True) for f in wanted])
    if only is not None:
        values = [None if v is None else {f["name"]: v.get(f["name"]) for f in wanted} for v in values]
    mask = None if rows.keep.all() else pa.array(~np.asarray(rows.keep, np.bool_))
    arr = pa.array(values, type=struct)
    return arr if mask is None else pa.StructArray.from_arrays(arr.flatten(), fields=list(struct), mask=mask)
