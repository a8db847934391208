"""Loops over decompressed state bytes, and where each runs.

The sequential loops (walking records whose sizes come one after another, concatenating
variable-length bytes, finding a text in each record, numbering distinct keys, hashing strings)
run here in Python or compiled by numba (``compiled``), whose cached loops take about
``LOAD_SECONDS`` of a process to load. Python runs a loop as long as the time the Python loops have
taken in this process plus this loop's estimate stays under that: a small checkpoint, or one
partition of a big one, answers before numba would have loaded, and a process never spends more
than that twice (the ski-rental rule). Once the compiled loops are loaded (a big read, the app's
warm-up) they run everything. Before they are loaded, the commonest shapes run in numpy instead of
the Python loops: record streams of long runs of one record size (``strided_scan``), and hashing
and numbering strings of a few lengths (fixed-width keys); their time counts at the share the
compiled loops would save of it (``_SAVED_SCAN``, ``_SAVED_HASH``, ``_SAVED_CODES``). All give
the same results (``tests/test_state_formats.py`` checks it on random inputs). Gathers at known
offsets are numpy.

Record streams (``scan``): Java's ``DataOutputStream`` writes big-endian ints.

* ``FMT_PLAIN``: HDFS ``.delta`` / ``.snapshot`` files and RocksDB changelogs v1 and v3 (after
  their header): ``key size, key, value size (-1: delete), value``, a key size of -1 ends it.
* ``FMT_TYPED``: RocksDB changelogs v2 and v4: a record type byte first (0 end, 1 put,
  0x10 delete, 0x11 merge), then as above.

Inside rows (UnsafeRow, RocksDB's encoders) numbers are little-endian (``Platform.putLong``).
"""

from __future__ import annotations

import contextvars
import struct
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from statelens.analysis.core.arrow_numpy import one_array
from statelens.spark_io.readers.native.codes import (
    AVRO_BOOL,
    AVRO_BYTES,
    AVRO_DOUBLE,
    AVRO_FLOAT,
    AVRO_LONG,
    AVRO_NULL,
    AVRO_STRUCT,
    BAD_SIZE,
    BAD_TYPE,
    CRC32C_TABLE,
    CUT,
    DELETE,
    FMT_PLAIN,
    FMT_TYPED,
    MERGE,
    NO_END,
    OK,
    PUT,
)

__all__ = [
    "AVRO_BOOL",
    "AVRO_BYTES",
    "AVRO_DOUBLE",
    "AVRO_FLOAT",
    "AVRO_LONG",
    "AVRO_NULL",
    "AVRO_STRUCT",
    "BAD_SIZE",
    "BAD_TYPE",
    "CRC32C_TABLE",
    "CUT",
    "DELETE",
    "FMT_PLAIN",
    "FMT_TYPED",
    "MERGE",
    "NO_END",
    "OK",
    "PUT",
]

LOAD_SECONDS = 0.9  # importing numba and loading its cached loops, once a process (measured here)
_COMPILED = "statelens.spark_io.readers.native.compiled"
# Python's cost of each loop, upper bounds measured on this machine (bench: records of 40 B-2.3 KB)
_PER_RECORD = 1.5e-6  # a record walked, gathered, searched or numbered
_PER_BYTE = 3e-9  # a byte of it copied or compared
_SCAN_PER_BYTE = 3e-8  # a record stream walked before its records are counted (16-byte records)
_python_seconds = 0.0  # spent in the Python loops by this process (threads add up: a heuristic)
# inside ``alike``: how many items alike, and the Python loops' time when the first began
_ALIKE: contextvars.ContextVar[tuple[int, float]] = contextvars.ContextVar("statelens_alike", default=(1, 0.0))


def compiled() -> ModuleType:
    """The numba loops (imported, and their cache loaded, on first use)."""
    from statelens.spark_io.readers.native import compiled as loops

    return loops


def _compiled_for(estimate: float) -> bool:
    """Whether a loop Python would take ``estimate`` seconds over runs compiled: once they are
    loaded, or when the Python loops would have taken as long as loading them."""
    if loaded():
        return True
    times, began = _ALIKE.get()
    # what this item's loops took and this one would take, counted once per item alike
    return began + (_python_seconds - began + estimate) * times >= LOAD_SECONDS


@contextmanager
def alike(times: int) -> Iterator[None]:
    """Loops run inside are the first of ``times`` alike (one partition of several): what they
    take, and each one's estimate, count that many times."""
    token = _ALIKE.set((times, _python_seconds))
    try:
        yield
    finally:
        _ALIKE.reset(token)


def loaded() -> bool:
    return _COMPILED in sys.modules


def python_seconds() -> float:
    """The time the Python loops have taken in this process."""
    return _python_seconds


def expect(seconds: float) -> None:
    """The caller is about to run loops Python would take ``seconds`` over (measured on a first
    part of the work): load the compiled ones now if, with what Python has spent, that reaches the
    load time (and decode the rest in parallel: the compiled loops release the GIL)."""
    if _compiled_for(seconds):
        compiled()  # each loop loads from numba's cache on its first call


def expect_scan(n_bytes: int) -> None:
    """The caller is about to walk ``n_bytes`` of state files (a whole store, known before a first
    partition tells): load the compiled loops now when Python would take as long as loading them."""
    expect(n_bytes * _SCAN_PER_BYTE)


def _python(loop: Any, *args: Any) -> Any:
    """Run a Python loop, adding its time to the process's."""
    global _python_seconds
    t = time.perf_counter()
    try:
        return loop(*args)
    finally:
        _python_seconds += time.perf_counter() - t


# the share of each numpy path's time the compiled loops would save (they take the rest; the 1M-key
# join store's 328 changelogs, measured here): walking records, FNV-1a, numbering strings
_SAVED_SCAN, _SAVED_HASH, _SAVED_CODES = 0.7, 0.6, 0.5


def _numpy(saved: float, loop: Any, *args: Any) -> Any:
    """Run a numpy path, adding to the process's Python loop time the ``saved`` share of its time:
    what the compiled loops would have saved of it."""
    global _python_seconds
    t = time.perf_counter()
    try:
        return loop(*args)
    finally:
        _python_seconds += (time.perf_counter() - t) * saved


def _estimate(records: int, n_bytes: int) -> float:
    return records * _PER_RECORD + n_bytes * _PER_BYTE


def warm() -> None:
    """Load every compiled loop now (the app, while it starts): from then on they run everything."""
    compiled().warm()


# --------------------------------------------------------------------------- record streams


def scan(
    buf: np.ndarray, start: int, end: int, fmt: int, fill: bool, kind: Any, koff: Any, klen: Any, voff: Any, vlen: Any
) -> tuple[int, int, int]:
    """Walk the records of ``buf[start:end]``. Returns (records, status, byte of the fault). With
    ``fill`` the records' kind and key/value offsets and lengths are written to the arrays."""
    estimate = len(koff) * _PER_RECORD if fill else (end - start) * _SCAN_PER_BYTE
    if _compiled_for(estimate):
        count, status, where = compiled().scan(buf, start, end, fmt, fill, kind, koff, klen, voff, vlen)
        return int(count), int(status), int(where)
    return _python(py_scan, buf, start, end, fmt, fill, kind, koff, klen, voff, vlen)  # type: ignore[no-any-return]


def scan_all(buf: np.ndarray, start: int, end: int, fmt: int) -> tuple[int, int, int, tuple[np.ndarray, ...]]:
    """``scan`` of ``buf[start:end]`` that also gives the records it walked: (records, status, byte of the
    fault, (kind, key offset, key length, value offset, value length)), the arrays filled when the
    status is ``OK``. Compiled: a pass to count them, then one to fill them; in Python one pass, into
    arrays as long as the most records the bytes can hold (8 bytes each at least), cut to length.
    Before the compiled loops are loaded, numpy walks records that come in long runs of one size
    (``strided_scan``) and Python only what does not."""
    if not loaded():
        found = _numpy(_SAVED_SCAN, strided_scan, buf, start, end, fmt)
        if found is not None:
            return found  # type: ignore[no-any-return]
    if _compiled_for((end - start) * _SCAN_PER_BYTE):
        z = np.zeros(0, np.int64)
        count, status, where = scan(buf, start, end, fmt, False, np.zeros(0, np.int8), z, z, z, z)
        arrays: tuple[np.ndarray, ...] = (np.empty(count, np.int8), *(np.empty(count, np.int64) for _ in range(4)))
        if status == OK:
            scan(buf, start, end, fmt, True, *arrays)
        return count, status, where, arrays
    most = (end - start) // 8 + 1
    room: tuple[np.ndarray, ...] = (np.empty(most, np.int8), *(np.empty(most, np.int64) for _ in range(4)))
    count, status, where = _python(py_scan, buf, start, end, fmt, True, *room)
    return count, status, where, tuple(a[:count].copy() for a in room)  # copies: the room is let go


_FEW_RUNS = 8  # runs of one record size a stream may start with before their length is judged
_LONG_RUN = 32  # records a run holds on average in a stream numpy walks (shorter: the loop walks it)


def strided_scan(buf: np.ndarray, start: int, end: int, fmt: int) -> tuple[int, int, int, tuple[np.ndarray, ...]] | None:
    """``scan_all`` in numpy for streams of long runs of records of one size (fixed-width keys and
    values: most state stores), or None where it cannot say (short runs, or a fault: the loop walks
    those and names the fault). A record is read as the loop reads it, then the records after it
    are taken to be the same size and checked all at once (their sizes and type bytes where the
    loop would read them): the run ends at the first that differs."""
    typed = fmt == FMT_TYPED
    t = 1 if typed else 0
    runs: list[tuple[int, int, int, int, int, int]] = []  # position, stride, records, key size, value size, kind
    records, pos = 0, start
    while True:
        rtype = 1
        if typed:
            if pos + 1 > end:
                return None
            rtype = int(buf[pos])
            if rtype == 0:
                pos += 1
                break
            if rtype not in (1, 0x10, 0x11):
                return None
        if pos + t + 4 > end:
            return None
        ks = _be32(buf, pos + t)
        if not typed and ks == -1:
            pos += 4
            break
        if ks < 0 or pos + t + 8 + ks > end:
            return None
        vs = _be32(buf, pos + t + 4 + ks)
        if vs == -1 and (not typed or rtype == 0x10):
            k, vbytes = DELETE, 0
        elif vs >= 0 and rtype != 0x10 and pos + t + 8 + ks + vs <= end:
            k, vbytes = (MERGE if rtype == 0x11 else PUT), vs
        else:
            return None
        stride = t + 8 + ks + vbytes
        n = _same_size_records(buf, pos, end, stride, t, ks, vs, rtype if typed else -1)
        runs.append((pos, stride, n, ks, vbytes, k))
        records += n
        pos += n * stride
        if len(runs) > _FEW_RUNS and records < _LONG_RUN * len(runs):
            return None
    if not runs:
        empty = np.zeros(0, np.int64)
        return 0, OK, pos, (np.zeros(0, np.int8), empty, empty.copy(), empty.copy(), empty.copy())
    at, strides, counts, ksizes, vsizes, kinds = (np.array(c, np.int64) for c in zip(*runs, strict=True))
    run = np.repeat(np.arange(len(runs)), counts)
    index = np.arange(records, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    koff = at[run] + strides[run] * index + t + 4
    klen = ksizes[run]
    return records, OK, pos, (kinds[run].astype(np.int8), koff, klen, koff + klen + 4, vsizes[run])


def _be32(buf: np.ndarray, pos: int) -> int:
    return int.from_bytes(buf[pos : pos + 4].tobytes(), "big", signed=True)


def _same_size_records(buf: np.ndarray, pos: int, end: int, stride: int, t: int, ks: int, vs: int, rtype: int) -> int:
    """How many records from ``pos`` on have the sizes (and type byte, when ``rtype`` >= 0) of the
    one at ``pos``, which has them: the bytes the loop would read them from, compared in growing
    windows of records (a strided view of the stream: nothing is copied but those bytes)."""
    cols = [t, t + 1, t + 2, t + 3, t + 4 + ks, t + 5 + ks, t + 6 + ks, t + 7 + ks] + ([0] if rtype >= 0 else [])
    want = np.frombuffer(ks.to_bytes(4, "big", signed=True) + vs.to_bytes(4, "big", signed=True), np.uint8)
    if rtype >= 0:
        want = np.append(want, np.uint8(rtype))
    count, window = 1, 64
    while True:
        m = min(window, (end - pos) // stride - count)  # whole records that fit
        if m <= 0:
            return count
        at = pos + count * stride
        rows = as_strided(buf[at:], shape=(m, stride), strides=(stride, 1), writeable=False)
        other = rows[:, cols[0]] != want[0]
        for c, w in zip(cols[1:], want[1:].tolist(), strict=True):
            other |= rows[:, c] != w
        differ = np.flatnonzero(other)
        if len(differ):
            return count + int(differ[0])
        count += m
        window *= 2


def py_scan(
    buf: np.ndarray, start: int, end: int, fmt: int, fill: bool, kind: Any, koff: Any, klen: Any, voff: Any, vlen: Any
) -> tuple[int, int, int]:
    """``scan`` in Python, over a copy of the span's bytes."""
    data = buf[start:end].tobytes()
    n, pos, i = len(data), 0, 0
    unpack = struct.Struct(">i").unpack_from
    while True:
        rtype = 1
        if fmt == FMT_TYPED:
            if pos + 1 > n:
                return i, NO_END, start + pos
            rtype = data[pos]
            if rtype == 0:
                return i, OK, start + pos + 1
            if rtype not in (1, 0x10, 0x11):
                return i, BAD_TYPE, start + pos
            pos += 1
        if pos + 4 > n:
            return i, NO_END, start + pos
        (ks,) = unpack(data, pos)
        if fmt == FMT_PLAIN and ks == -1:
            return i, OK, start + pos + 4
        if ks < 0:
            return i, BAD_SIZE, start + pos
        if pos + 4 + ks + 4 > n:
            return i, CUT, start + pos
        ko = pos + 4
        pos = ko + ks
        (vs,) = unpack(data, pos)
        pos += 4
        k, vo = PUT, pos
        if vs < 0:
            if vs != -1 or (fmt == FMT_TYPED and rtype != 0x10):
                return i, BAD_SIZE, start + pos - 4
            k, vs = DELETE, 0
        else:
            if fmt == FMT_TYPED and rtype == 0x10:
                return i, BAD_SIZE, start + pos - 4
            if pos + vs > n:
                return i, CUT, start + pos - 4
            pos += vs
            if fmt == FMT_TYPED and rtype == 0x11:
                k = MERGE
        if fill:
            kind[i], koff[i], klen[i], voff[i], vlen[i] = k, start + ko, ks, start + vo, vs
        i += 1


def gather_bytes(buf: np.ndarray, off: np.ndarray, size: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ``buf[off[i]:off[i]+size[i]]`` for the rows kept: (int64 offsets, bytes)."""
    kept_sizes = np.where(keep, size, 0).astype(np.int64)
    if _compiled_for(_estimate(int(np.count_nonzero(keep)), int(kept_sizes.sum()))):
        return compiled().gather_bytes(buf, off, size, keep)  # type: ignore[no-any-return]
    return _python(py_gather_bytes, buf, off, size, keep)  # type: ignore[no-any-return]


def py_gather_bytes(buf: np.ndarray, off: np.ndarray, size: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    kept_sizes = np.where(keep, size, 0).astype(np.int64)
    offsets = np.zeros(len(off) + 1, np.int64)
    np.cumsum(kept_sizes, out=offsets[1:])
    view = buf.data  # the array's bytes, not copied
    out = b"".join(view[o : o + s] for o, s, k in zip(off.tolist(), size.tolist(), keep.tolist(), strict=True) if k)
    return offsets, np.frombuffer(out, np.uint8) if out else np.zeros(0, np.uint8)


def contains(buf: np.ndarray, off: np.ndarray, size: np.ndarray, needle: np.ndarray, mask: np.ndarray) -> None:
    """Set ``mask[i]`` where ``buf[off[i]:off[i]+size[i]]`` holds ``needle`` (a non-empty uint8 array)."""
    # the Python loop copies the whole buffer once, then compares each record's bytes
    if _compiled_for(_estimate(len(off), int(size.sum())) + len(buf) * _PER_BYTE / 10):
        compiled().contains(buf, off, size, needle, mask)
        return
    _python(py_contains, buf, off, size, needle, mask)


def py_contains(buf: np.ndarray, off: np.ndarray, size: np.ndarray, needle: np.ndarray, mask: np.ndarray) -> None:
    data, text = buf.tobytes() if len(off) else b"", needle.tobytes()
    for i, (o, s) in enumerate(zip(off.tolist(), size.tolist(), strict=True)):
        if not mask[i] and data.find(text, o, o + s) >= 0:
            mask[i] = True


def dense_codes(buf: np.ndarray, off: np.ndarray, size: np.ndarray, hashes: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """A dense code per distinct byte string ``buf[off[i]:off[i]+size[i]]``, numbered in order of
    first appearance, and the number of codes (before the compiled loops are loaded, strings of a
    few lengths are numbered in numpy, and strings already hashed (``hashes``, any 64-bit hash of
    their bytes) of any lengths)."""
    if len(off) and not loaded():
        by_length = _numpy(_SAVED_CODES, _dense_codes_by_length, buf, off, size, hashes)
        if by_length is not None:
            return by_length  # type: ignore[no-any-return]
    if _compiled_for(_estimate(len(off), int(size.sum()))):
        codes, count = compiled().dense_codes(buf, off, size)
        return codes, int(count)
    return _python(py_dense_codes, buf, off, size)  # type: ignore[no-any-return]


def py_dense_codes(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, int]:
    view = buf.data  # the array's bytes, not copied
    seen: dict[bytes, int] = {}
    codes = np.empty(len(off), np.int64)
    for i, (o, s) in enumerate(zip(off.tolist(), size.tolist(), strict=True)):
        codes[i] = seen.setdefault(bytes(view[o : o + s]), len(seen))
    return codes, len(seen)


def _dense_codes_by_length(
    buf: np.ndarray, off: np.ndarray, size: np.ndarray, hashes: np.ndarray | None = None
) -> tuple[np.ndarray, int] | None:
    """``dense_codes`` in numpy for strings of a few lengths: grouped by a hash of their 8-byte
    words (or by ``hashes``, of any lengths), each string after the first of its group compared
    byte for byte with that first. None for more lengths, or two strings of one hash (the loop
    numbers those)."""
    h = _word_hashes(buf, off, size) if hashes is None else hashes
    if h is None:
        return None
    n = len(off)
    if not n:
        return np.zeros(0, np.int64), 0
    order = np.argsort(h)
    sorted_h = h[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_h[1:] != sorted_h[:-1])))
    first = np.minimum.reduceat(order, starts)  # each group's first string
    group = np.empty(n, np.int64)
    group[order] = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    seen = first[group]
    again = np.flatnonzero(seen != np.arange(n))
    if len(again):
        if (size[again] != size[seen[again]]).any():
            return None
        for length in np.unique(size[again]).tolist():
            rows = again[size[again] == length]
            windows = sliding_window_view(buf, length) if length else None
            if windows is not None and (windows[off[rows]] != windows[off[seen[rows]]]).any():
                return None
    is_first = np.zeros(n, np.bool_)  # codes in order of first appearance: each first string's rank
    is_first[first] = True
    rank = (np.cumsum(is_first) - 1)[first]
    return rank[group], len(first)


def _word_hashes(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> np.ndarray | None:
    """A 64-bit hash of each string ``buf[off[i]:off[i]+size[i]]`` of at most ``_FEW_LENGTHS``
    lengths, eight bytes at a time (the strings of one length as a matrix of words); None for more."""
    groups = _length_groups(buf, off, size)
    if groups is None:
        return None
    h = np.empty(len(off), np.uint64)
    for length, rows, matrix in groups:
        words = np.zeros((len(matrix), (length + 7) // 8 * 8), np.uint8)
        words[:, :length] = matrix
        part = np.full(len(words), length + 1, np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # the length, mixed
        for word in words.view("<u8").T:
            part ^= word
            part *= np.uint64(0xBF58476D1CE4E5B9)
            part ^= part >> np.uint64(31)
        h[rows] = part
    return h


_FEW_LENGTHS = 4  # string lengths numpy hashes and numbers one length at a time


def _length_groups(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> list[tuple[int, Any, np.ndarray]] | None:
    """The strings ``buf[off[i]:off[i]+size[i]]`` by length, at most ``_FEW_LENGTHS`` lengths (None
    for more): (length, their rows, their bytes as one matrix, gathered at once)."""
    lengths = np.unique(size)
    if len(lengths) > _FEW_LENGTHS:
        return None
    groups = []
    for length in lengths.tolist():
        rows = slice(None) if len(lengths) == 1 else np.flatnonzero(size == length)
        at = off[rows]
        matrix = sliding_window_view(buf, length)[at] if length else np.zeros((len(at), 0), np.uint8)
        groups.append((length, rows, matrix))
    return groups


def split_multi_values(buf: np.ndarray, off: np.ndarray, size: np.ndarray, owner: np.ndarray) -> Any:
    """RocksDB's multi-value encoding (transformWithState lists), split (``compiled.split_multi_values``)."""
    return compiled().split_multi_values(buf, off, size, owner)


def strip_row_checksums(*args: Any) -> Any:
    """Row checksums verified and removed (``compiled.strip_row_checksums``)."""
    return compiled().strip_row_checksums(*args)


def avro_rows(*args: Any) -> Any:
    """Avro-encoded rows decoded (``compiled.avro_rows``)."""
    return compiled().avro_rows(*args)


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C of ``data`` continuing ``crc`` (the compiled kernel, for tests and single buffers)."""
    buf = np.frombuffer(data, np.uint8)
    return int(compiled()._crc32c(buf, 0, len(buf), np.uint32(crc), CRC32C_TABLE))


# --------------------------------------------------------------------------- numpy gathers


def last_per_code(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """The index of each code's last occurrence (-1 where a code does not occur)."""
    last = np.full(n_codes, -1, np.int64)
    np.maximum.at(last, codes, np.arange(len(codes), dtype=np.int64))
    return last


def gather_le(buf: np.ndarray, pos: np.ndarray, width: int, keep: np.ndarray) -> np.ndarray:
    """Little-endian integers of ``width`` bytes (1, 2, 4, 8) at ``pos``, sign-extended to int64;
    0 where not kept."""
    if not keep.any():
        return np.zeros(len(pos), np.int64)
    at = np.where(keep, pos, pos[keep][0])
    raw = sliding_window_view(buf, width)[at]  # one gather of (rows, width) bytes, no index matrix
    signed = raw.view(f"<i{width}")[:, 0].astype(np.int64)
    return np.where(keep, signed, 0)


def gather_event_times(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Event times as Spark's timestamp key encoders write them: 8 big-endian bytes at ``pos`` with
    the sign bit flipped (so byte order is time order)."""
    if not len(pos):
        return np.zeros(0, np.int64)
    raw = sliding_window_view(buf, 8)[pos].view(">u8")[:, 0]
    return (raw ^ np.uint64(1 << 63)).astype(np.int64)


def null_bits(buf: np.ndarray, base: np.ndarray, index: int, keep: np.ndarray) -> np.ndarray:
    """True where field ``index`` of the UnsafeRow at ``base`` is null (its bit in the null set)."""
    if not keep.any():
        return np.zeros(len(base), np.bool_)
    byte = base + (index // 64) * 8 + (index % 64) // 8
    at = np.where(keep, byte, byte[keep][0])
    return keep & ((buf[at] >> (index % 8)) & 1).astype(np.bool_)


def check_within(off: np.ndarray, size: np.ndarray, start: np.ndarray, end: np.ndarray, keep: np.ndarray) -> int:
    """The first kept row whose [off, off + size) leaves [start, end), or -1."""
    bad = keep & ((size < 0) | (off < start) | (off + size > end))
    hits = np.flatnonzero(bad)
    return int(hits[0]) if len(hits) else -1


def string_hashes(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The 32-bit FNV-1a hash of each string of a ``large_string`` array (one pass over its bytes)."""
    col = one_array(column)
    if not pa.types.is_large_string(col.type):
        raise TypeError(f"not a large_string array: {col.type}")
    n = len(col)
    out = np.zeros(n, np.uint32)
    if not n:
        return out
    buffers = col.buffers()
    offsets = np.frombuffer(buffers[1], np.int64, count=n + 1, offset=col.offset * 8)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    # numpy, one byte position of every string at a time: the longest string's passes over them all
    if _compiled_for(int(np.diff(offsets).max()) * n * _PER_BYTE * 3):
        compiled().fnv1a32(offsets, data, out)
        return out
    return _python(py_fnv1a32, offsets, data)  # type: ignore[no-any-return]


def py_fnv1a32(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """FNV-1a in numpy, one byte position of every string at a time (the strings are short keys)."""
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    h = np.full(n, 2166136261, np.uint32)
    for j in range(int(lengths.max()) if n else 0):
        live = lengths > j
        idx = offsets[:-1][live] + j
        h[live] = (h[live] ^ data[idx].astype(np.uint32)) * np.uint32(16777619)
    return h


def byte_hashes(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The 64-bit FNV-1a hash of each byte string ``buf[off[i]:off[i]+size[i]]``, as int64 bits
    (before the compiled loops are loaded, strings of a few lengths are hashed in numpy)."""
    out = np.zeros(len(off), np.uint64)
    if len(off) and not loaded():
        by_length = _numpy(_SAVED_HASH, _fnv1a64_by_length, buf, off, size)
        if by_length is not None:
            return by_length.view(np.int64)  # type: ignore[no-any-return]
    if len(off) and _compiled_for(int(size.max()) * len(off) * _PER_BYTE * 3):
        compiled().fnv1a64(buf, off, size, out)
    elif len(off):
        out = _python(py_fnv1a64, buf, off, size)
    return out.view(np.int64)


def _fnv1a64_by_length(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> np.ndarray | None:
    """``py_fnv1a64`` for strings of at most ``_FEW_LENGTHS`` lengths: the strings of one length
    gathered as a matrix at once, hashed a column at a time. None for more lengths."""
    groups = _length_groups(buf, off, size)
    if groups is None:
        return None
    h = np.full(len(off), 14695981039346656037, np.uint64)
    prime = np.uint64(1099511628211)
    for length, rows, matrix in groups:
        part = h[rows]
        for j in range(length):
            np.bitwise_xor(part, matrix[:, j], out=part)
            np.multiply(part, prime, out=part)
        h[rows] = part
    return h


def py_fnv1a64(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> np.ndarray:
    """FNV-1a (64 bits) in numpy, one byte position of every string at a time (short keys)."""
    h = np.full(len(off), 14695981039346656037, np.uint64)
    for j in range(int(size.max()) if len(off) else 0):
        live = np.nonzero(size > j)[0]
        h[live] = (h[live] ^ buf[off[live] + j].astype(np.uint64)) * np.uint64(1099511628211)
    return h
