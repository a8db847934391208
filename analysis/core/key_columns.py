"""A join's key read as the user's column.

Spark names a stream-stream join's state key fields ``field0``, ``field1``, ... (one per join
key expression); the value holds the whole input row. Where a value column equals a key field on
every row read (and is null exactly where it is), the key field is that column: ``field0`` is
``order_id``. A key that is an expression (``lower(order_id)``) equals no column and keeps its
field name. Each join side is checked on its own: the two sides may name the column differently.
"""

from __future__ import annotations

import pyarrow as pa

from statelens.analysis.core.arrow_numpy import kernel, struct_field
from statelens.analysis.core.model import JOIN_ROW_FIELDS


def columns_equal_to_key(table: pa.Table) -> dict[str, str]:
    """Key field -> the first value field that equals it on every row of ``table`` ({} without rows)."""
    names = table.schema.names
    if table.num_rows == 0 or "key" not in names or "value" not in names:
        return {}
    key_type, value_type = table.schema.field("key").type, table.schema.field("value").type
    if not (pa.types.is_struct(key_type) and pa.types.is_struct(value_type)):
        return {}
    values = table["value"]
    if values.null_count:
        return {}
    out: dict[str, str] = {}
    for kf in key_type:
        if kf.name in JOIN_ROW_FIELDS or pa.types.is_struct(kf.type):
            continue
        k = struct_field(table["key"], kf.name)
        for vf in value_type:
            if vf.type != kf.type:
                continue
            v = struct_field(values, vf.name)
            same_nulls = kernel("all", kernel("equal", kernel("is_null", k), kernel("is_null", v))).as_py()
            if same_nulls and kernel("all", kernel("equal", k, v)).as_py() is not False:
                out[kf.name] = vf.name
                break
    return out


def key_column(key_field: str, by_side: dict[str, dict[str, str]]) -> dict[str, str]:
    """Per join side, the value column ``key_field`` equals (sides where none does are left out)."""
    return {side: cols[key_field] for side, cols in by_side.items() if key_field in cols}


def label(key_field: str, columns: dict[str, str]) -> str:
    """``order_id`` when every side names it so, ``order_id (left), order_ref (right)`` otherwise,
    the field name where no column equals it."""
    names = list(dict.fromkeys(columns.values()))
    if not names:
        return key_field
    if len(names) == 1:
        return names[0]
    return ", ".join(f"{c} ({side})" for side, c in columns.items())


def field_label(key_field: str, columns: dict[str, str]) -> str:
    """``field0 (order_id)`` where the key field is a join's column, else the field."""
    name = label(key_field, columns)
    return key_field if name == key_field else f"{key_field} ({name})"


def field_of(name: str, by_side: dict[str, dict[str, str]]) -> str | None:
    """The key field a user's column name stands for (``order_id`` -> ``field0``), when every side
    that names a column for it agrees."""
    fields = {f for cols in by_side.values() for f, c in cols.items() if c == name}
    return next(iter(fields)) if len(fields) == 1 else None
