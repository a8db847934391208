"""Spark's compression streams, decoded with pyarrow's codecs (no JVM).

Spark compresses event logs (``spark.eventLog.compress``) and state files
(``spark.sql.streaming.stateStore.compression.codec``) with the same ``CompressionCodec``
streams: lz4-java's ``LZ4BlockOutputStream`` (the default), zstd-jni frames and snappy-java's
``SnappyOutputStream``. The codec is told by the first bytes, not by a name or a conf.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pyarrow as pa

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
LZ4_MAGIC = b"LZ4Block"
SNAPPY_MAGIC = b"\x82SNAPPY\x00"


class Cut(Exception):
    """A compressed stream ends early or is damaged: ``decoded`` holds everything before the
    fault and ``offset`` the byte of the compressed file where it was found."""

    def __init__(self, decoded: bytes, why: str, offset: int) -> None:
        super().__init__(why)
        self.decoded = decoded
        self.offset = offset


def codec_of(data: bytes) -> str:
    if data.startswith(ZSTD_MAGIC):
        return "zstd"
    if data.startswith(LZ4_MAGIC):
        return "lz4"
    if data.startswith(SNAPPY_MAGIC):
        return "snappy"
    return "none"


Checksum = Callable[[bytes | pa.Buffer], int]


def _lz4_blocks(data: bytes, checksum: Checksum | None = None) -> bytes:
    """lz4-java's LZ4BlockOutputStream: per block 'LZ4Block', a token (method | level), the
    compressed and decompressed lengths and a checksum (little endian), then the block; a block
    of decompressed length 0 ends the stream. ``checksum`` (XXH32 with lz4-java's seed) verifies
    each block's decompressed bytes, as lz4-java does when Spark reads."""
    out: list[bytes | pa.Buffer] = []
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        if data[pos : pos + 8] != LZ4_MAGIC or pos + 21 > len(data):
            raise Cut(b"".join(out), f"the lz4 stream is damaged or cut at byte {pos}", pos)
        token = data[pos + 8]
        clen, dlen, expected = struct.unpack_from("<iii", data, pos + 9)
        pos += 21
        if dlen == 0:  # the end mark
            break
        if clen < 0 or dlen < 0 or pos + clen > len(data):
            raise Cut(b"".join(out), f"the lz4 stream is cut inside a block at byte {pos}", pos)
        block = view[pos : pos + clen]
        decoded: bytes | pa.Buffer
        if token & 0xF0 == 0x10:  # stored raw
            decoded = bytes(block)
        else:
            try:
                decoded = pa.decompress(block, decompressed_size=dlen, codec="lz4_raw")
            except (OSError, pa.ArrowException) as e:
                raise Cut(b"".join(out), f"the lz4 block at byte {pos} does not decompress ({e})", pos) from e
        if checksum is not None and checksum(decoded) & 0xFFFFFFF != expected & 0xFFFFFFF:
            raise Cut(b"".join(out), f"the lz4 block at byte {pos} fails its checksum", pos)
        out.append(decoded)
        pos += clen
    return b"".join(out)


def _varint(data: bytes | memoryview) -> int:
    n = shift = 0
    for b in bytes(data[:5]):
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
    raise ValueError("bad varint")


def _snappy_chunks(data: bytes) -> bytes:
    """snappy-java's SnappyOutputStream: a 16-byte header, then chunks of a big-endian length
    and raw snappy data (whose own first bytes give the decompressed length)."""
    out: list[pa.Buffer] = []
    pos = 16
    view = memoryview(data)
    while pos < len(data):
        if pos + 4 > len(data):
            raise Cut(b"".join(out), f"the snappy stream is cut at byte {pos}", pos)
        (clen,) = struct.unpack_from(">i", data, pos)
        if clen < 0 or pos + 4 + clen > len(data):
            raise Cut(b"".join(out), f"the snappy stream is cut inside a chunk at byte {pos}", pos)
        chunk = view[pos + 4 : pos + 4 + clen]
        try:
            out.append(pa.decompress(chunk, decompressed_size=_varint(chunk), codec="snappy"))
        except (OSError, ValueError, pa.ArrowException) as e:
            raise Cut(b"".join(out), f"the snappy chunk at byte {pos} does not decompress ({e})", pos) from e
        pos += 4 + clen
    return b"".join(out)


def _zstd_frames(data: bytes) -> bytes:
    out: list[bytes] = []
    stream = pa.input_stream(pa.py_buffer(data), compression="zstd")
    try:
        while chunk := stream.read(1 << 20):
            out.append(chunk)
    except (OSError, pa.ArrowException) as e:
        raise Cut(b"".join(out), f"the zstd stream is damaged or cut ({e})", -1) from e
    return b"".join(out)


def decompress(data: bytes, lz4_checksum: Checksum | None = None) -> tuple[bytes, str]:
    """(decoded bytes, codec) of one file written through a Spark compression stream; a file with
    none of the three codecs' magic bytes is returned as it is, with codec "none". Raises ``Cut``."""
    codec = codec_of(data)
    if codec == "zstd":
        return _zstd_frames(data), codec
    if codec == "lz4":
        return _lz4_blocks(data, lz4_checksum), codec
    if codec == "snappy":
        return _snappy_chunks(data), codec
    return data, codec
