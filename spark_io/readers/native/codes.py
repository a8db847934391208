"""The codes the state loops share: record stream formats, record kinds, scan status, Avro kinds,
and the CRC32C table (``kernels`` dispatches the loops; ``compiled`` holds their numba versions)."""

from __future__ import annotations

import numpy as np

FMT_PLAIN = 1
FMT_TYPED = 2

DELETE = 0
PUT = 1
MERGE = 2

# scan status codes
OK = 0
CUT = 1
BAD_TYPE = 2
BAD_SIZE = 3
NO_END = 4


AVRO_STRUCT = 0
AVRO_LONG = 1  # int, long (zigzag varints)
AVRO_BYTES = 2  # string, bytes (a length, then the bytes)
AVRO_BOOL = 3
AVRO_FLOAT = 4
AVRO_DOUBLE = 5
AVRO_NULL = 6  # Spark's NullType: no bytes at all


def _crc32c_table() -> np.ndarray:
    """CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of Java's ``CRC32C``;
    tests prove the kernel equal to the ``crc32c`` library."""
    table = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[i] = c
    return table


CRC32C_TABLE = _crc32c_table()
