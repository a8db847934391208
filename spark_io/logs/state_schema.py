"""State schema files, for the native reader: what each store's (or column family's) key and
value rows hold, and how RocksDB encodes its keys.

* v1 / v2 (``<partition 0>/[<store>/]_metadata/schema``): the key and the value schema as JSON.
* v3 (``_stateSchema/<store>/<id>_<uuid>``, Spark 4.0+): ``writeUTF("v3")``, the number of column
  families, then per family its name (UTF), the key schema id (short) and JSON (an int count of
  UTF chunks), the value schema id and JSON, the key encoder spec JSON and the user key schema
  JSON (map state), each chunked the same way.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.core.errors import NativeUnsupported


@dataclass
class Family:
    name: str
    key: list[dict[str, Any]]
    value: list[dict[str, Any]]
    encoder: dict[str, Any] = field(default_factory=dict)
    user_key: list[dict[str, Any]] | None = None
    key_schema_id: int = 0  # Avro-encoded rows name the schema they were written with by these ids
    value_schema_id: int = 0
    avro: bool = False  # rows are Avro-encoded (encodingFormat=avro) rather than UnsafeRows
    # Avro: the key and value fields of every schema id the family has had (its schema files)
    key_writers: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    value_writers: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def prefix_cols(self) -> int:
        return int(self.encoder.get("numColsPrefixKey", 0)) if "Prefix" in self.encoder.get("keyStateEncoderType", "") else 0

    @property
    def event_time_key(self) -> str | None:
        """``postfix`` or ``prefix`` for the event-time key encoders of join state format 4 (the key's
        last schema field, ``__event_time``, is 8 big-endian bytes after or before the key row, sign
        bit flipped); None otherwise. Their values are lists (several rows per key and time)."""
        kind = self.encoder.get("keyStateEncoderType", "")
        return "postfix" if "TimestampAsPostfix" in kind else "prefix" if "TimestampAsPrefix" in kind else None

    @property
    def plain_key(self) -> bool:
        """A key stored as one row (no prefix, range or event-time key encoder): its fields decode
        one by one."""
        return not (self.prefix_cols or self.event_time_key or self.range_ordinals)

    @property
    def range_ordinals(self) -> list[int]:
        return (
            [int(x) for x in self.encoder.get("orderingOrdinals", [])]
            if "Range" in self.encoder.get("keyStateEncoderType", "")
            else []
        )


class _Input:
    def __init__(self, data: bytes, rel: str) -> None:
        self.data, self.pos, self.rel = data, 0, rel

    def take(self, fmt: str) -> Any:
        try:
            (v,) = struct.unpack_from(fmt, self.data, self.pos)
        except struct.error as e:
            raise NativeUnsupported(f"{self.rel} ends early at byte {self.pos}: an unknown state schema layout") from e
        self.pos += struct.calcsize(fmt)
        return v

    def utf(self) -> str:
        n = self.take(">H")
        raw = self.data[self.pos : self.pos + n]
        if len(raw) < n:
            raise NativeUnsupported(f"{self.rel} ends early at byte {self.pos}: an unknown state schema layout")
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def chunked_json(self) -> Any:
        count = self.take(">i")
        if not 0 < count < 10_000:
            raise NativeUnsupported(f"{self.rel}: an unknown state schema layout at byte {self.pos}")
        text = "".join(self.utf() for _ in range(count))
        try:
            return json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as e:
            raise NativeUnsupported(f"{self.rel}: a schema that is not JSON at byte {self.pos} ({e.msg})") from e


def read_v3(data: bytes, rel: str) -> list[Family]:
    src = _Input(data, rel)
    version = src.utf()
    if version != "v3":
        raise NativeUnsupported(f"{rel} is state schema format {version}")
    if data[src.pos : src.pos + 1] in (b"{", b"["):  # early 4.0 builds wrote the families as JSON
        raise NativeUnsupported(f"{rel} is a JSON state schema file (an early v3 layout)")
    families = []
    for _ in range(src.take(">i")):
        name = src.utf()
        key_id = src.take(">h")
        key = src.chunked_json()
        value_id = src.take(">h")
        value = src.chunked_json()
        encoder = src.chunked_json()
        user_key = src.chunked_json()
        families.append(
            Family(
                name,
                key.get("fields", []),
                value.get("fields", []),
                encoder,
                user_key.get("fields") if user_key else None,
                key_id,
                value_id,
            )
        )
    return families
