"""The state loops compiled with numba (``kernels`` runs them on inputs worth their start: loading
them from numba's cache costs about 0.9 s of a process, the first time). Sequential loops only:
walking records whose sizes come one after another, concatenating variable-length bytes, hashing,
splitting list values, checksums, Avro rows."""

from __future__ import annotations

import numpy as np
from numba import njit

from statelens.spark_io.readers.native.codes import (
    AVRO_BOOL,
    AVRO_BYTES,
    AVRO_DOUBLE,
    AVRO_FLOAT,
    AVRO_LONG,
    AVRO_NULL,
    BAD_SIZE,
    BAD_TYPE,
    CUT,
    DELETE,
    FMT_PLAIN,
    FMT_TYPED,
    MERGE,
    NO_END,
    OK,
    PUT,
)


@njit(cache=True, nogil=True)
def _be32(buf, pos):  # type: ignore[no-untyped-def]
    v = (np.int64(buf[pos]) << 24) | (np.int64(buf[pos + 1]) << 16) | (np.int64(buf[pos + 2]) << 8) | np.int64(buf[pos + 3])
    if v >= 2147483648:
        v -= 4294967296
    return v


@njit(cache=True, nogil=True)
def scan(buf, start, end, fmt, fill, kind, koff, klen, voff, vlen):  # type: ignore[no-untyped-def]
    """Walk the records of ``buf[start:end]``. Returns (records, status, byte of the fault). With
    ``fill`` the records' kind and key/value offsets and lengths are written to the arrays."""
    pos = start
    i = 0
    while True:
        rtype = 1
        if fmt == FMT_TYPED:
            if pos + 1 > end:
                return i, NO_END, pos
            rtype = buf[pos]
            if rtype == 0:
                return i, OK, pos + 1
            if rtype != 1 and rtype != 0x10 and rtype != 0x11:
                return i, BAD_TYPE, pos
            pos += 1
        if pos + 4 > end:
            return i, NO_END, pos
        ks = _be32(buf, pos)
        if fmt == FMT_PLAIN and ks == -1:
            return i, OK, pos + 4
        if ks < 0:
            return i, BAD_SIZE, pos
        if pos + 4 + ks + 4 > end:
            return i, CUT, pos
        ko = pos + 4
        pos = ko + ks
        vs = _be32(buf, pos)
        pos += 4
        k = PUT
        vo = pos
        if vs < 0:
            if vs != -1 or (fmt == FMT_TYPED and rtype != 0x10):
                return i, BAD_SIZE, pos - 4
            k = DELETE
            vs = 0
        else:
            if fmt == FMT_TYPED and rtype == 0x10:
                return i, BAD_SIZE, pos - 4
            if pos + vs > end:
                return i, CUT, pos - 4
            pos += vs
            if fmt == FMT_TYPED and rtype == 0x11:
                k = MERGE
        if fill:
            kind[i] = k
            koff[i] = ko
            klen[i] = ks
            voff[i] = vo
            vlen[i] = vs
        i += 1


@njit(cache=True, nogil=True)
def gather_bytes(buf, off, size, keep):  # type: ignore[no-untyped-def]
    """Concatenate ``buf[off[i]:off[i]+size[i]]`` for the rows kept: (int64 offsets, bytes)."""
    n = off.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        offsets[i + 1] = offsets[i] + (size[i] if keep[i] else 0)
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        if keep[i]:
            o = offsets[i]
            s = off[i]
            for j in range(size[i]):
                out[o + j] = buf[s + j]
    return offsets, out


@njit(cache=True, nogil=True)
def contains(buf, off, size, needle, mask):  # type: ignore[no-untyped-def]
    """Set ``mask[i]`` where ``buf[off[i]:off[i]+size[i]]`` holds ``needle`` (a non-empty uint8 array)."""
    m = needle.shape[0]
    first = needle[0]
    for i in range(off.shape[0]):
        if mask[i]:
            continue
        start = off[i]
        last = start + size[i] - m
        p = start
        while p <= last:
            if buf[p] == first:
                j = 1
                while j < m and buf[p + j] == needle[j]:
                    j += 1
                if j == m:
                    mask[i] = True
                    break
            p += 1


@njit(cache=True, nogil=True)
def split_multi_values(buf, off, size, owner):  # type: ignore[no-untyped-def]
    """RocksDB's multi-value encoding (transformWithState lists): per value ``int size (LE),
    bytes``, values joined by the merge operator's delimiter ``,``. Values that RocksDB has not
    merged yet come back from rocksdict joined without it, so a delimiter is skipped where there
    is one; that is unambiguous because a value is a version byte and an UnsafeRow (a multiple
    of 8 bytes), so its size's low byte is never 44 (``,``). Returns (owner row, offset, size) per
    element, and the first bad value's row (or -1)."""
    count = 0
    for i in range(off.shape[0]):
        p = off[i]
        e = p + size[i]
        while p < e:
            if p + 4 > e:
                return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), i
            s = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) | (np.int64(buf[p + 3]) << 24)
            if s < 0 or p + 4 + s > e:
                return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), i
            p += 4 + s
            if p < e and buf[p] == 44:
                p += 1
            count += 1
    own = np.empty(count, np.int64)
    eo = np.empty(count, np.int64)
    es = np.empty(count, np.int64)
    k = 0
    for i in range(off.shape[0]):
        p = off[i]
        e = p + size[i]
        while p < e:
            s = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) | (np.int64(buf[p + 3]) << 24)
            own[k] = owner[i]
            eo[k] = p + 4
            es[k] = s
            k += 1
            p += 4 + s
            if p < e and buf[p] == 44:
                p += 1
    return own, eo, es, -1


@njit(cache=True, nogil=True)
def dense_codes(buf, off, size):  # type: ignore[no-untyped-def]
    """A dense code per distinct byte string ``buf[off[i]:off[i]+size[i]]``, numbered in order of
    first appearance, and the number of codes: an open-addressing table of record indexes and
    their FNV-1a hashes (bytes compared only where the hashes agree), about 32 bytes a record,
    where Arrow's dictionary encoding takes over 100."""
    n = off.shape[0]
    cap = 16
    while cap < 2 * n:
        cap <<= 1
    mask = np.uint64(cap - 1)
    slots = np.full(cap, -1, np.int64)
    hashes = np.zeros(cap, np.uint64)
    codes = np.empty(n, np.int64)
    count = 0
    for i in range(n):
        o = off[i]
        s = size[i]
        h = np.uint64(14695981039346656037)
        for j in range(s):
            h = (h ^ np.uint64(buf[o + j])) * np.uint64(1099511628211)
        k = np.int64(h & mask)
        while True:
            r = slots[k]
            if r == -1:
                slots[k] = i
                hashes[k] = h
                codes[i] = count
                count += 1
                break
            if hashes[k] == h and size[r] == s:
                ro = off[r]
                same = True
                for j in range(s):
                    if buf[ro + j] != buf[o + j]:
                        same = False
                        break
                if same:
                    codes[i] = codes[r]
                    break
            k = (k + 1) & (cap - 1)
    return codes, count


@njit(cache=True, nogil=True)
def fnv1a32(offsets, data, out):  # type: ignore[no-untyped-def]
    """The 32-bit FNV-1a hash of each string of an Arrow string array (its offsets and bytes)."""
    for i in range(len(out)):
        h = np.uint32(2166136261)
        for j in range(offsets[i], offsets[i + 1]):
            h = np.uint32((h ^ np.uint32(data[j])) * np.uint32(16777619))
        out[i] = h


@njit(cache=True, nogil=True)
def fnv1a64(buf, off, size, out):  # type: ignore[no-untyped-def]
    """The 64-bit FNV-1a hash of each byte string ``buf[off[i]:off[i]+size[i]]``."""
    for i in range(off.shape[0]):
        h = np.uint64(14695981039346656037)
        for j in range(off[i], off[i] + size[i]):
            h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
        out[i] = h


@njit(cache=True, nogil=True)
def _crc32c(buf, start, end, crc, table):  # type: ignore[no-untyped-def]
    c = crc ^ np.uint32(0xFFFFFFFF)
    for p in range(start, end):
        c = table[(c ^ buf[p]) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
    return c ^ np.uint32(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def _le32(buf, p):  # type: ignore[no-untyped-def]
    return np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << 8) | (np.uint32(buf[p + 2]) << 16) | (np.uint32(buf[p + 3]) << 24)


@njit(cache=True, nogil=True)
def _element(buf, p, end, kcrc, table):  # type: ignore[no-untyped-def]
    """One ``checksum, size, bytes`` element at ``p``: (end of it or -1 when it does not fit, stored, computed)."""
    if p + 8 > end:
        return -1, np.uint32(0), np.uint32(0)
    size = np.int64(_le32(buf, p + 4))
    if size > end - p - 8:
        return -1, np.uint32(0), np.uint32(0)
    stored = _le32(buf, p)
    return p + 8 + size, stored, _crc32c(buf, p + 8, p + 8 + size, kcrc, table)


@njit(cache=True, nogil=True)
def strip_row_checksums(buf, kind, koff, klen, voff, vlen, sized, table, out):  # type: ignore[no-untyped-def]
    """Verify and remove Spark's row checksums (``KeyValueChecksumEncoder``): each value is
    ``checksum (LE int), bytes`` (``sized=False``: HDFS) or ``checksum, size (LE int), bytes`` per
    value, several joined by RocksDB's merge delimiter ``,`` (``sized=True``); the checksum is the
    CRC32C of the key's bytes then the value's. A delete has no value: its key carries the checksum
    of the key (``checksum, key``). The values without their checksums are written to ``out``.
    Returns (key offsets, key sizes, new value offsets into ``out``, new sizes, first bad row or -1,
    status (0 ok, 1 layout, 2 mismatch), stored, computed)."""
    n = kind.shape[0]
    nkoff = koff.copy()
    nklen = klen.copy()
    noff = np.zeros(n, np.int64)
    nlen = np.zeros(n, np.int64)
    w = 0
    for i in range(n):
        noff[i] = w
        if kind[i] == DELETE or vlen[i] < 0:
            nlen[i] = vlen[i]
            if klen[i] < 4:
                return nkoff, nklen, noff, nlen, i, 1, np.uint32(0), np.uint32(0)
            stored = _le32(buf, koff[i])
            got = _crc32c(buf, koff[i] + 4, koff[i] + klen[i], np.uint32(0), table)
            if stored != got:
                return nkoff, nklen, noff, nlen, i, 2, stored, got
            nkoff[i] = koff[i] + 4
            nklen[i] = klen[i] - 4
            continue
        kcrc = _crc32c(buf, koff[i], koff[i] + klen[i], np.uint32(0), table)
        p = voff[i]
        end = voff[i] + vlen[i]
        if not sized:
            if vlen[i] < 4:
                return nkoff, nklen, noff, nlen, i, 1, np.uint32(0), np.uint32(0)
            stored = _le32(buf, p)
            got = _crc32c(buf, p + 4, end, kcrc, table)
            if stored != got:
                return nkoff, nklen, noff, nlen, i, 2, stored, got
            for q in range(p + 4, end):
                out[w] = buf[q]
                w += 1
            nlen[i] = vlen[i] - 4
            continue
        first = True
        while p < end:
            if not first:
                # a delimiter, unless the bytes read as an element without one (values RocksDB has
                # not merged come back joined without it); the checksum decides
                if buf[p] == 44:
                    e, stored, got = _element(buf, p + 1, end, kcrc, table)
                    if e >= 0 and stored == got:
                        p += 1
                out[w] = 44
                w += 1
            e, stored, got = _element(buf, p, end, kcrc, table)
            if e < 0:
                return nkoff, nklen, noff, nlen, i, 1, np.uint32(0), np.uint32(0)
            if stored != got:
                return nkoff, nklen, noff, nlen, i, 2, stored, got
            for q in range(p + 8, e):
                out[w] = buf[q]
                w += 1
            p = e
            first = False
        nlen[i] = w - noff[i]
    return nkoff, nklen, noff, nlen, -1, 0, np.uint32(0), np.uint32(0)


@njit(cache=True, nogil=True)
def _varint(buf, p, end):  # type: ignore[no-untyped-def]
    """An Avro zigzag varint at ``p``: (value, next position), next -1 past ``end``."""
    shift = 0
    raw = np.uint64(0)
    while True:
        if p >= end or shift > 63:
            return np.int64(0), -1
        b = buf[p]
        p += 1
        raw |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            break
        shift += 7
    value = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
    return value, p


@njit(cache=True, nogil=True)
def avro_rows(buf, base, size, keep, codes, subtree, present, ints, off, ln):  # type: ignore[no-untyped-def]
    """Avro records whose fields are all ``["null", type]`` unions (Spark's state rows), in the
    preorder of ``codes`` (a struct's fields follow it; ``subtree[k]`` counts its descendants). Per
    node and row: ``present``, and the value (``ints``: integers, booleans, float bits) or where its
    bytes are (``off``, ``ln``). Returns the first row that does not decode exactly, or -1."""
    nodes = codes.shape[0]
    for i in range(base.shape[0]):
        if not keep[i]:
            continue
        p = base[i]
        end = base[i] + size[i]
        k = 0
        while k < nodes:
            if codes[k] == AVRO_NULL:
                k += 1
                continue
            u, p = _varint(buf, p, end)
            if p < 0 or (u != 0 and u != 1):
                return i
            if u == 0:
                k += subtree[k] + 1  # null: its fields are absent too
                continue
            present[k, i] = True
            c = codes[k]
            if c == AVRO_LONG:
                v, p = _varint(buf, p, end)
                if p < 0:
                    return i
                ints[k, i] = v
            elif c == AVRO_BYTES:
                n, p = _varint(buf, p, end)
                if p < 0 or n < 0 or p + n > end:
                    return i
                off[k, i] = p
                ln[k, i] = n
                p += n
            elif c == AVRO_BOOL:
                if p + 1 > end:
                    return i
                ints[k, i] = buf[p]
                p += 1
            elif c == AVRO_FLOAT or c == AVRO_DOUBLE:  # noqa: SIM109 (numba)
                w = 4 if c == AVRO_FLOAT else 8
                if p + w > end:
                    return i
                bits = np.int64(0)
                for j in range(w):
                    bits |= np.int64(buf[p + j]) << np.int64(8 * j)
                ints[k, i] = bits
                p += w
            k += 1
        if p != end:
            return i
    return -1


def warm() -> None:
    """Load every compiled loop from numba's cache now (70–250 ms each on its first call), e.g. while
    the app starts, so the first answer does not pay it. State buffers are read-only arrays (one
    compiled variant of each loop)."""
    z = np.zeros(0, np.int64)
    buf = np.frombuffer(b"\xff\xff\xff\xff", np.uint8)  # an empty record stream: key size -1
    scan(buf, 0, len(buf), FMT_PLAIN, False, np.zeros(0, np.int8), z, z, z, z)
    gather_bytes(buf, z, z, np.zeros(0, np.bool_))
    split_multi_values(buf, z, z, z)
    contains(buf, z, z, buf, np.zeros(0, np.bool_))
    dense_codes(buf, z, z)
    fnv1a32(np.zeros(1, np.int64), buf, np.zeros(0, np.uint32))
    fnv1a64(buf, z, z, np.zeros(0, np.uint64))
