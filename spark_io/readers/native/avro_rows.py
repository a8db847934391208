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

import numpy as np
import pyarrow as pa

from statelens.analysis.core.arrow_numpy import struct_array
from statelens.spark_io.readers.native import kernels
from statelens.spark_io.readers.native.unsafe_row import Damaged, Rows, Undecodable, arrow_type, unique_fields

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
    import fastavro  # loaded for the Avro encoding only

    return fastavro.parse_schema(avro_record(fields, itertools.count()))


_CODES = {
    "boolean": kernels.AVRO_BOOL,
    "byte": kernels.AVRO_LONG,
    "short": kernels.AVRO_LONG,
    "integer": kernels.AVRO_LONG,
    "int": kernels.AVRO_LONG,
    "long": kernels.AVRO_LONG,
    "bigint": kernels.AVRO_LONG,
    "date": kernels.AVRO_LONG,
    "timestamp": kernels.AVRO_LONG,
    "timestamp_ntz": kernels.AVRO_LONG,
    "float": kernels.AVRO_FLOAT,
    "double": kernels.AVRO_DOUBLE,
    "string": kernels.AVRO_BYTES,
    "binary": kernels.AVRO_BYTES,
    "void": kernels.AVRO_NULL,
    "null": kernels.AVRO_NULL,
}


class _Slow(Exception):
    """A schema the compiled decoder does not cover (decimals, char types): fastavro decodes it."""


def _program(fields: list[dict[str, Any]], out: list[list[Any]]) -> int:
    """The fields in preorder as [code, field, descendants]; returns how many nodes were added."""
    start = len(out)
    for f in unique_fields(fields):
        t = f["type"]
        at = len(out)
        if isinstance(t, dict) and t.get("type") == "struct":
            out.append([kernels.AVRO_STRUCT, f, 0])
            out[at][2] = _program(t["fields"], out)
        elif str(t).lower() in _CODES:
            out.append([_CODES[str(t).lower()], f, 0])
        else:
            raise _Slow
    return len(out) - start


def _fast(rows: Rows, fields: list[dict[str, Any]], start: np.ndarray, only: frozenset[str] | None) -> pa.StructArray:
    """The compiled decoder (``kernels.avro_rows``); equal to fastavro's (``tests/test_state_formats.py``)."""
    nodes: list[list[Any]] = []
    _program(fields, nodes)
    n = len(rows.base)
    codes = np.array([c for c, _, _ in nodes], np.int64)
    subtree = np.array([d for _, _, d in nodes], np.int64)
    present = np.zeros((len(nodes), n), np.bool_)
    ints = np.zeros((len(nodes), n), np.int64)
    off = np.zeros((len(nodes), n), np.int64)
    ln = np.zeros((len(nodes), n), np.int64)
    size = rows.base + rows.size - start
    bad = kernels.avro_rows(rows.buf, start, size, rows.keep, codes, subtree, present, ints, off, ln)
    if bad >= 0:
        raise Damaged("an Avro row that does not decode by its schema", int(bad))

    def column(k: int) -> tuple[pa.Array, int]:
        code, f, _ = nodes[k]
        at = arrow_type(f["type"])
        mask = ~present[k]
        if code == kernels.AVRO_STRUCT:
            children, names, j = [], [], k + 1
            for child in unique_fields(f["type"]["fields"]):
                arr, j = column(j)
                children.append(arr)
                names.append(child["name"])
            return struct_array(children, names, present[k]), j
        if code == kernels.AVRO_NULL:
            return pa.nulls(n), k + 1
        if code == kernels.AVRO_BYTES:
            offsets, data = kernels.gather_bytes(rows.buf, off[k], ln[k], present[k])
            kind = pa.large_string() if pa.types.is_string(at) else pa.large_binary()
            arr = pa.Array.from_buffers(
                kind, n, [pa.py_buffer(np.packbits(present[k], bitorder="little")), pa.py_buffer(offsets), pa.py_buffer(data)]
            )
            return arr.cast(at), k + 1
        if code == kernels.AVRO_BOOL:
            return pa.array(ints[k] != 0, pa.bool_(), mask=mask), k + 1
        if code == kernels.AVRO_FLOAT:
            return pa.array(ints[k].astype(np.int32).view(np.float32), pa.float32(), mask=mask), k + 1
        if code == kernels.AVRO_DOUBLE:
            return pa.array(ints[k].view(np.float64), pa.float64(), mask=mask), k + 1
        if pa.types.is_timestamp(at) or pa.types.is_date(at):
            width = np.int32 if pa.types.is_date(at) else np.int64
            return pa.array(ints[k].astype(width), pa.int32() if width is np.int32 else pa.int64(), mask=mask).view(at), k + 1
        return pa.array(ints[k], pa.int64(), mask=mask).cast(at), k + 1

    out, names, k = [], [], 0
    for f in fields:
        arr, k = column(k)
        if only is None or f["name"] in only:
            out.append(arr)
            names.append(f["name"])
    return struct_array(out, names, np.asarray(rows.keep, np.bool_))


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    return [(f["name"], f["type"]) for f in a] == [(f["name"], f["type"]) for f in b]


def decode(
    rows: Rows,
    fields: list[dict[str, Any]],
    writers: dict[int, list[dict[str, Any]]] | None,
    only: frozenset[str] | None = None,
) -> pa.StructArray:
    """Avro rows as one Arrow struct column of ``fields`` (the newest schema). ``writers``: the
    schema of each schema id the rows may carry in their first two bytes (little endian, as
    Spark's ``Platform.putShort``); None for rows without an id (a prefix key's prefix). Rows all
    written with the reading schema are decoded by compiled code; others (evolved schemas,
    decimals) by fastavro."""
    fields = unique_fields(fields)
    start = rows.base + (2 if writers is not None else 0)
    current = True  # every row written with the reading schema
    if writers is not None:
        ids = kernels.gather_le(rows.buf, rows.base, 2, rows.keep) & 0xFFFF
        current = all(int(i) in writers and _same(writers[int(i)], fields) for i in np.unique(ids[rows.keep]))
    if current:
        try:
            return _fast(rows, fields, start, only)
        except _Slow:
            pass
    return _slow(rows, fields, writers, only)


def _slow(
    rows: Rows,
    fields: list[dict[str, Any]],
    writers: dict[int, list[dict[str, Any]]] | None,
    only: frozenset[str] | None = None,
) -> pa.StructArray:
    """fastavro, a row at a time, each by the schema its id names (schema evolution)."""
    from fastavro import schemaless_reader

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
            record = schemaless_reader(io.BytesIO(buf[start:end].tobytes()), writer, reader)
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
