"""The state formats Spark 4.1-4.3 write, read natively: row checksums (verified, a damaged row named),
join state format 4 and Avro-encoded rows. Their rows equal Spark's reads in
``test_native_equality.py`` (golden files) and the queries' truth in ``test_compat.py``; here: what
the bytes themselves prove, and damage."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import crc32c as crc32c_lib
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from statelens.analysis.core.errors import StateReadError
from statelens.analysis.core.model import StateSource
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.logs.codecs import decompress
from statelens.spark_io.readers.native import kernels
from statelens.spark_io.readers.native.reader import NativeReader
from statelens.spark_io.readers.native.records import LZ4_SEED
from support import COMPAT, ROOT

HDFS_CHECKSUMS = "compat/4.3.0/row_checksum_hdfs"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.integers(0, 2000))
def test_the_crc32c_kernel_equals_the_crc32c_library(data: bytes, cut: int) -> None:
    assert kernels.crc32c(data) == crc32c_lib.crc32c(data)
    cut = min(cut, len(data))
    assert kernels.crc32c(data[cut:], kernels.crc32c(data[:cut])) == crc32c_lib.crc32c(data)


def _raw_lz4(data: bytes) -> bytes:
    """An lz4-java stream holding ``data`` as one stored (uncompressed) block, then the end mark."""
    check = xxhash.xxh32(data, seed=LZ4_SEED).intdigest() & 0xFFFFFFF
    block = b"LZ4Block" + bytes([0x10]) + struct.pack("<iii", len(data), len(data), check) + data
    return block + b"LZ4Block" + bytes([0x10]) + struct.pack("<iii", 0, 0, 0)


def _copy(tmp_path: Path, name: str) -> Path:
    import shutil

    dest = tmp_path / name.replace("/", "_")
    shutil.copytree(COMPAT.parent / name, dest)
    return dest


def test_every_row_checksum_of_the_sample_verifies() -> None:
    """Each value of the HDFS sample's deltas is the CRC32C (by the crc32c library) of its key and
    row, then the row; each delete's key the CRC32C of the key, then the key."""
    part = COMPAT.parent / HDFS_CHECKSUMS / "state" / "0" / "0"
    seen = {"put": 0, "delete": 0}
    for delta in sorted(part.glob("*.delta")):
        data, _ = decompress(delta.read_bytes())
        pos = 0
        while True:
            (klen,) = struct.unpack_from(">i", data, pos)
            if klen == -1:
                break
            key = data[pos + 4 : pos + 4 + klen]
            (vlen,) = struct.unpack_from(">i", data, pos + 4 + klen)
            value = data[pos + 8 + klen : pos + 8 + klen + max(vlen, 0)]
            if vlen < 0:
                assert struct.unpack_from("<I", key)[0] == crc32c_lib.crc32c(key[4:])
            else:
                assert struct.unpack_from("<I", value)[0] == crc32c_lib.crc32c(key + value[4:])
            seen["delete" if vlen < 0 else "put"] += 1
            pos += 8 + klen + max(vlen, 0)
    assert seen["put"] > 10 and seen["delete"] > 0, seen


def test_a_flipped_bit_under_a_row_checksum_is_named(tmp_path: Path) -> None:
    path = _copy(tmp_path, HDFS_CHECKSUMS)
    delta = path / "state" / "0" / "0" / "3.delta"
    data = bytearray(decompress(delta.read_bytes())[0])
    (klen,) = struct.unpack_from(">i", data, 0)
    value_at = 8 + klen
    stored = struct.unpack_from("<I", data, value_at)[0]
    data[value_at + 4 + 9] ^= 0x04  # one bit of the first row's value (a count)
    delta.write_bytes(_raw_lz4(bytes(data)))
    info = read_checkpoint(str(path))
    with pytest.raises(StateReadError) as e:
        NativeReader(info).state(StateSource(0), 2)  # version 3 = batch 2
    msg = e.value.message
    assert "state/0/0/3.delta" in msg and "row 0" in msg, msg
    computed = crc32c_lib.crc32c(bytes(data[4 : 4 + klen]) + bytes(data[value_at + 4 : value_at + 4 + _vlen(data, klen) - 4]))
    assert f"{stored:#010x}" in msg and f"{computed:#010x}" in msg, msg
    # batches before the damaged delta still read
    assert NativeReader(info).state(StateSource(0), 1).num_rows > 0


def _vlen(data: bytearray, klen: int) -> int:
    return int(struct.unpack_from(">i", data, 4 + klen)[0])


def test_join_state_format_4_lists_the_stores_that_exist() -> None:
    info = read_checkpoint(str(COMPAT / "4.3.0" / "join_state_format_4"))
    (op,) = info.operators
    assert [s.store_name for s in op.stores] == [
        "left-keyWithTsToValues",
        "left-tsWithKey",
        "right-keyWithTsToValues",
        "right-tsWithKey",
    ]
    assert {s.folder for s in op.stores} == {"default"}
    assert op.join_rows_store("left") == "left-keyWithTsToValues"


def test_a_format_4_join_side_has_a_row_per_value_with_its_event_time(monkeypatch: Any) -> None:
    """A key and event time holding two rows (two payments of one order at one time) reads as two
    rows, each with the event time of the key (the row's own event-time column, in microseconds)."""
    info = read_checkpoint(str(COMPAT / "4.3.0" / "join_state_format_4"))
    reader = NativeReader(info)
    rows = reader.state(StateSource(0, store_name="left-keyWithTsToValues"), 10).to_pylist()
    for r in rows:
        event_us = int(r["value"]["order_time"].timestamp() * 1_000_000)
        assert r["key"]["__event_time"] == event_us
    keys = [(r["key"]["field0"], r["key"]["__event_time"]) for r in rows]
    assert any(keys.count(k) == 2 for k in keys)  # a key and time with two rows
    side = reader.state(StateSource(0, join_side="left"), 10)
    assert side.num_rows == len(rows)
    assert [f.name for f in side.schema.field("key").type] == ["field0"]
    assert "matched" not in [f.name for f in side.schema.field("value").type]


def test_avro_rows_decode_by_their_schema_id() -> None:
    """Avro-encoded transformWithState rows: a value state, a list, a map with TTL and the timers, as
    the query's own output tells them (each user's event count after the last batch)."""
    import json

    name = "4.3.0/tws_avro"
    truth = json.loads((COMPAT / "4.3.0" / "truth" / "tws_avro.json").read_text())
    info = read_checkpoint(str(COMPAT / name))
    reader = NativeReader(info)
    last = truth["committed_batches"][-1]
    totals = {r["key"]["user_id"]: r["value"]["n"] for r in reader.state(StateSource(0, state_var="total"), last).to_pylist()}
    emitted: dict[str, int] = {}
    for r in sorted(truth["emitted"], key=lambda r: r["batch_id"]):
        if r["events"]:
            emitted[r["user_id"]] = r["events"]
    assert totals == emitted
    events = reader.state(StateSource(0, state_var="events"), last).to_pylist()
    assert all(r["list_element"]["event_id"].startswith("ev-") for r in events)
    per_kind = reader.state(StateSource(0, state_var="per_kind"), last).to_pylist()
    assert {r["user_map_key"]["kind"] for r in per_kind} <= {"view", "click", "buy"}
    assert all(r["user_map_value"]["ttlExpirationMs"] > 1_700_000_000_000 for r in per_kind)
    timers = reader.state(StateSource(0, timers=True), last).to_pylist()
    assert timers and all(t["expiration_timestamp_ms"] > 1_700_000_000_000 for t in timers)


_SCHEMA = [
    {"name": "s", "type": "string", "nullable": True},
    {"name": "n", "type": "long", "nullable": True},
    {"name": "i", "type": "integer", "nullable": True},
    {"name": "b", "type": "boolean", "nullable": True},
    {"name": "d", "type": "double", "nullable": True},
    {"name": "f", "type": "float", "nullable": True},
    {"name": "t", "type": "timestamp", "nullable": True},
    {"name": "day", "type": "date", "nullable": True},
    {"name": "v", "type": "void", "nullable": True},
    {
        "name": "w",
        "type": {
            "type": "struct",
            "fields": [
                {"name": "start", "type": "timestamp", "nullable": True},
                {"name": "x", "type": "binary", "nullable": True},
            ],
        },
        "nullable": True,
    },
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "s": st.none() | st.text(max_size=20),
                "n": st.none() | st.integers(-(2**63), 2**63 - 1),
                "i": st.none() | st.integers(-(2**31), 2**31 - 1),
                "b": st.none() | st.booleans(),
                "d": st.none() | st.floats(allow_nan=False),
                "f": st.none() | st.floats(width=32, allow_nan=False),
                "t": st.none() | st.integers(-(2**50), 2**50),
                "day": st.none() | st.integers(-100_000, 100_000),
                "v": st.none(),
                "w": st.none()
                | st.fixed_dictionaries({"start": st.none() | st.integers(0, 2**50), "x": st.none() | st.binary(max_size=9)}),
            }
        ),
        min_size=1,
        max_size=30,
    )
)
def test_the_compiled_avro_decoder_equals_fastavro(records: list[dict[str, Any]]) -> None:
    """Rows written by fastavro (Spark's Avro schema of the fields), each behind a schema id, read by the
    compiled decoder and by fastavro: the same Arrow column."""
    import io

    import fastavro
    import numpy as np

    from statelens.spark_io.readers.native import avro_rows
    from statelens.spark_io.readers.native.unsafe_row import Rows

    schema = avro_rows.parsed(_SCHEMA)
    raw = bytearray()
    base, size = [], []
    for r in records:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, r)
        base.append(len(raw))
        raw += b"\x00\x00" + out.getvalue()
        size.append(len(raw) - base[-1])
    buf = np.frombuffer(bytes(raw), np.uint8)
    rows = Rows(buf, np.array(base, np.int64), np.array(size, np.int64), np.ones(len(records), np.bool_))
    fast = avro_rows.decode(rows, _SCHEMA, {0: _SCHEMA})
    slow = avro_rows._slow(rows, _SCHEMA, {0: _SCHEMA})
    assert fast.type == slow.type
    assert fast.to_pylist() == slow.to_pylist()


# --------------------------------------------------------------------------- the Python loops equal the compiled ones


def _stream(records: list[tuple[int, bytes, bytes | None]], typed: bool, end: bool) -> bytes:
    """A record stream as Spark writes it: (type, key, value; None: a delete)."""
    out = b""
    for rtype, key, value in records:
        if typed:
            out += bytes([0x10 if value is None else rtype])
        out += struct.pack(">i", len(key)) + key + struct.pack(">i", -1 if value is None else len(value)) + (value or b"")
    if end:
        out += b"\x00" if typed else struct.pack(">i", -1)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([1, 0x11]), st.binary(max_size=20), st.none() | st.binary(max_size=30)), max_size=12),
    st.booleans(),
    st.booleans(),
    st.integers(0, 40),
)
def test_the_python_record_scan_equals_the_compiled_one(records: Any, typed: bool, end: bool, cut: int) -> None:
    import numpy as np

    raw = _stream(records, typed, end)
    raw = raw[: max(0, len(raw) - cut)] if cut % 3 == 0 else raw  # cut streams too: the fault and where
    buf = np.frombuffer(raw, np.uint8) if raw else np.zeros(0, np.uint8)
    fmt = kernels.FMT_TYPED if typed else kernels.FMT_PLAIN
    z = np.zeros(0, np.int64)
    got = kernels.py_scan(buf, 0, len(buf), fmt, False, np.zeros(0, np.int8), z, z, z, z)
    want = kernels.compiled().scan(buf, 0, len(buf), fmt, False, np.zeros(0, np.int8), z, z, z, z)
    assert got == tuple(int(x) for x in want)
    n = got[0]
    ours = [np.empty(n, np.int8), *(np.empty(n, np.int64) for _ in range(4))]
    theirs = [np.empty(n, np.int8), *(np.empty(n, np.int64) for _ in range(4))]
    kernels.py_scan(buf, 0, len(buf), fmt, True, *ours)
    kernels.compiled().scan(buf, 0, len(buf), fmt, True, *theirs)
    assert all((a == b).all() for a, b in zip(ours, theirs, strict=True))


def _strings(values: list[bytes]) -> tuple[Any, Any, Any]:
    """The strings one after another in one buffer: (buffer, offsets, sizes)."""
    import numpy as np

    raw = b"".join(values)
    buf = np.frombuffer(raw, np.uint8) if raw else np.zeros(1, np.uint8)
    size = np.array([len(v) for v in values], np.int64)
    off = np.zeros(len(values), np.int64)
    if len(values):
        off[1:] = np.cumsum(size)[:-1]
    return buf, off, size


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=12), max_size=15), st.binary(min_size=1, max_size=3), st.data())
def test_the_python_byte_loops_equal_the_compiled_ones(values: list[bytes], needle: bytes, data: Any) -> None:
    import numpy as np
    import pyarrow as pa

    buf, off, size = _strings(values)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))), np.bool_)
    a, b = kernels.py_gather_bytes(buf, off, size, keep), kernels.compiled().gather_bytes(buf, off, size, keep)
    assert (a[0] == b[0]).all() and a[1].tobytes() == b[1].tobytes()
    nd = np.frombuffer(needle, np.uint8)
    m1, m2 = keep.copy(), keep.copy()  # rows already set stay set
    kernels.py_contains(buf, off, size, nd, m1)
    kernels.compiled().contains(buf, off, size, nd, m2)
    assert (m1 == m2).all() and all(m1[i] == (keep[i] or needle in v) for i, v in enumerate(values))
    c1, n1 = kernels.py_dense_codes(buf, off, size)
    c2, n2 = kernels.compiled().dense_codes(buf, off, size)
    assert n1 == n2 and (c1 == c2).all()
    texts = pa.array([v.decode("latin-1") for v in values], pa.large_string())
    offsets = np.frombuffer(texts.buffers()[1], np.int64, count=len(values) + 1)
    text_bytes = np.frombuffer(texts.buffers()[2], np.uint8) if texts.buffers()[2] is not None else np.zeros(0, np.uint8)
    want = np.zeros(len(values), np.uint32)
    kernels.compiled().fnv1a32(offsets, text_bytes, want)
    assert (kernels.py_fnv1a32(offsets, text_bytes) == want).all()
    wide = np.zeros(len(values), np.uint64)
    kernels.compiled().fnv1a64(buf, off, size, wide)
    assert (kernels.py_fnv1a64(buf, off, size) == wide).all()
    assert len(set(wide.tolist())) == len(set(values))  # distinct strings, distinct hashes


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 0x11]), st.binary(min_size=0, max_size=6), st.none() | st.binary(max_size=8), st.integers(1, 90)
        ),
        max_size=6,
    ),
    st.booleans(),
    st.booleans(),
    st.integers(0, 40),
)
def test_the_numpy_record_scan_equals_the_compiled_one(runs: Any, typed: bool, end: bool, cut: int) -> None:
    """Runs of records of one size (as fixed-width stores write them), cut, unended or mixed with
    short runs: where numpy answers, it gives the compiled scan's records; it answers every
    whole stream of long runs."""
    import numpy as np

    records = [(rtype, key, value) for rtype, key, value, times in runs for _ in range(times)]
    raw = _stream(records, typed, end)
    raw = raw[: max(0, len(raw) - cut)] if cut % 3 == 0 else raw
    buf = np.frombuffer(raw, np.uint8) if raw else np.zeros(0, np.uint8)
    fmt = kernels.FMT_TYPED if typed else kernels.FMT_PLAIN
    got = kernels.strided_scan(buf, 0, len(buf), fmt)
    z = np.zeros(0, np.int64)
    count, status, where = (
        int(x) for x in kernels.compiled().scan(buf, 0, len(buf), fmt, False, np.zeros(0, np.int8), z, z, z, z)
    )
    if status == kernels.OK and len(runs) <= 8:  # a whole stream of at most _FEW_RUNS runs: numpy walks it
        assert got is not None
    if got is None:
        return
    assert got[:3] == (count, status, where)
    want = [np.empty(count, np.int8), *(np.empty(count, np.int64) for _ in range(4))]
    kernels.compiled().scan(buf, 0, len(buf), fmt, True, *want)
    assert all((a == b).all() for a, b in zip(got[3], want, strict=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=5), max_size=40), st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_the_numpy_hashes_and_codes_equal_the_compiled_ones(values: list[bytes], lengths: list[int]) -> None:
    """Strings of a few lengths (padded or cut to them): numpy's FNV-1a and dense codes are the
    compiled loops'; strings of more lengths, or of one hash, are left to the loops."""
    import numpy as np

    values = [(v + b"\0" * 4)[: lengths[i % len(lengths)]] for i, v in enumerate(values)]
    buf, off, size = _strings(values)
    hashes = kernels._fnv1a64_by_length(buf, off, size)
    codes = kernels._dense_codes_by_length(buf, off, size)
    assert hashes is not None and codes is not None  # at most four lengths
    want = np.zeros(len(values), np.uint64)
    kernels.compiled().fnv1a64(buf, off, size, want)
    assert (hashes == want).all()
    want_codes, n = kernels.compiled().dense_codes(buf, off, size)
    assert codes[1] == n == len(set(values)) and (codes[0] == want_codes).all()
    # two strings of one hash are told apart by their bytes: with every hash made equal, numpy numbers
    # them only when they are all the same string, and leaves the rest to the loop
    with mock.patch.object(kernels, "_word_hashes", lambda b, o, s: np.zeros(len(o), np.uint64)):
        clash = kernels._dense_codes_by_length(buf, off, size)
    assert (clash is None) == (len(set(values)) > 1)
    five = np.arange(5, dtype=np.int64)
    assert kernels._fnv1a64_by_length(np.zeros(10, np.uint8), np.zeros(5, np.int64), five) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=12), max_size=40), st.booleans())
def test_codes_of_hashed_keys_equal_the_compiled_ones(values: list[bytes], clash: bool) -> None:
    """Keys already hashed (a growth's key ids): numpy numbers them by those hashes, of any lengths,
    as the compiled loop does; keys of one hash and different bytes are left to the loop."""
    import numpy as np

    buf, off, size = _strings(values)
    hashes = np.zeros(len(values), np.int64) if clash else kernels.byte_hashes(buf, off, size)
    codes = kernels._dense_codes_by_length(buf, off, size, hashes)
    if clash and len(set(values)) > 1:
        assert codes is None
        return
    want_codes, n = kernels.compiled().dense_codes(buf, off, size)
    assert codes is not None and codes[1] == n == len(set(values)) and (codes[0] == want_codes).all()


def test_the_python_loops_run_until_they_have_cost_what_loading_the_compiled_ones_costs() -> None:
    """The ski-rental rule, in fresh processes: a stream Python walks in well under the load time
    stays in Python (numba is never imported); once the Python loops' time plus a loop's estimate
    reaches ``LOAD_SECONDS``, the compiled loops load and run everything from then on. The first
    of many partitions alike counts for them all: there the same small walk loads them at once."""
    prelude = """
import sys, struct, numpy as np
from statelens.spark_io.readers.native import kernels as k
rec = struct.pack(">i", 4) + b"key1" + struct.pack(">i", 3) + b"val"
buf = np.frombuffer(rec * 1000 + struct.pack(">i", -1), np.uint8)
z = np.zeros(0, np.int64)
walk = lambda: k.scan(buf, 0, len(buf), k.FMT_PLAIN, False, np.zeros(0, np.int8), z, z, z, z)
"""
    alone = """
assert walk()[0] == 1000 and "numba" not in sys.modules and 0 < k._python_seconds < 0.5
k._python_seconds = k.LOAD_SECONDS - 1e-4  # as after many small partitions walked in Python
assert walk()[0] == 1000 and k._COMPILED in sys.modules
spent = k._python_seconds
assert walk()[0] == 1000 and k._python_seconds == spent  # compiled from now on: Python adds nothing
print("ok")
"""
    first_of_many = """
with k.alike(10):
    assert walk()[0] == 1000 and "numba" not in sys.modules  # ten such walks: still under the load time
with k.alike(100_000):
    assert walk()[0] == 1000 and k._COMPILED in sys.modules
print("ok")
"""
    for script in (alone, first_of_many):
        out = subprocess.run([sys.executable, "-c", prelude + script], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == "ok", out.stderr[-2000:]
