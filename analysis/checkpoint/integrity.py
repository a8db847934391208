"""Checksum sidecars of a checkpoint's files, verified: pure checks on bytes (the reading is
``spark_io.logs.integrity``'s).

Two kinds sit beside a file ``X``:

* ``X.crc`` (Spark 4.1+, ``ChecksumCheckpointFileManager``; Spark 4.3 writes them for state files
  when ``spark.sql.streaming.stateStore.checkpointFormatVersion`` is 2): JSON with the
  ``CRC32C`` of the whole file (``value``, a signed int) and its size (``mainFileSize``).
* ``.X.crc`` (Hadoop's ``ChecksumFileSystem``, every file written through a local ``file:``
  path): ``crc\\0``, the bytes per checksum (big-endian int, 512), then a big-endian CRC32 per
  chunk.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field

from statelens.analysis.checkpoint.doctor import Problem


@dataclass
class SidecarReport:
    checked: int = 0  # files whose sidecar was verified
    damaged: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    missing: list[str] = field(default_factory=list)  # files without the Spark sidecar their siblings have
    orphans: list[str] = field(default_factory=list)  # Spark sidecars whose file is gone
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (file, why)


def spark_sidecar_problem(data: bytes, sidecar: bytes) -> str | None:
    """Why ``data`` does not match its Spark ``.crc`` sidecar, or None when it does."""
    try:
        entry = json.loads(sidecar.decode("utf-8"))
        algorithm, value, size = entry["algorithm"], int(entry["value"]), int(entry["mainFileSize"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return "its .crc sidecar is not Spark's checksum JSON (damaged)"
    if str(algorithm).upper() != "CRC32C":
        return f"its .crc sidecar uses {algorithm}, which State Lens does not verify"
    if size != len(data):
        return f"it has {len(data):,} bytes, its .crc sidecar says {size:,} (cut short or rewritten)"
    import crc32c  # the native package, loaded when a Spark sidecar is checked

    got = crc32c.crc32c(data)
    want = value & 0xFFFFFFFF
    if got != want:
        return f"its CRC32C is {got:#010x}, its .crc sidecar says {want:#010x}"
    return None


def hadoop_sidecar_problem(data: bytes, sidecar: bytes) -> str | None:
    """Why ``data`` does not match Hadoop's ``.<name>.crc`` sidecar, or None when it does."""
    if len(sidecar) < 8 or sidecar[:4] != b"crc\x00":
        return "its Hadoop .crc sidecar has no 'crc' header (damaged)"
    (per,) = struct.unpack_from(">i", sidecar, 4)
    if per <= 0:
        return "its Hadoop .crc sidecar has no chunk size (damaged)"
    chunks = (len(data) + per - 1) // per
    if len(sidecar) != 8 + 4 * chunks:
        return f"its Hadoop .crc sidecar covers {(len(sidecar) - 8) // 4} chunk(s) of {per} bytes, the file has {chunks}"
    for i in range(chunks):
        (want,) = struct.unpack_from(">I", sidecar, 8 + 4 * i)
        got = zlib.crc32(data[i * per : (i + 1) * per])
        if got != want:
            return f"bytes {i * per:,}-{min((i + 1) * per, len(data)) - 1:,} fail their CRC32 in the Hadoop .crc sidecar"
    return None


def integrity_problems(report: SidecarReport) -> list[Problem]:
    out = []
    if report.damaged:
        first, why = report.damaged[0]
        out.append(
            Problem(
                "checksum_mismatch",
                "error",
                f"{len(report.damaged)} file(s) do not match their checksum sidecar",
                f"{first}: {why}. A file that fails its checksum was damaged or cut after it was written; "
                "Spark fails when it reads it (a state file: the restart; a log file: planning the batch).",
                "Restore the file from a backup, or restart from a batch whose files are whole (a new checkpoint if none is).",
                {"files": [f"{f}: {w}" for f, w in report.damaged[:20]]},
            )
        )
    if report.missing:
        out.append(
            Problem(
                "checksum_missing",
                "warning",
                f"{len(report.missing)} state file(s) have no checksum sidecar where their siblings have one",
                f"For example {report.missing[0]}: Spark writes a .crc beside each state file it writes with checksums "
                "on; a file without one was written without them (an older run or another tool), or its sidecar was "
                "deleted. Spark reads it unverified.",
                "Nothing to repair if the file was written before checksums were enabled; otherwise check what "
                "removes files in the checkpoint's storage.",
                {"files": report.missing[:20]},
            )
        )
    if report.unreadable:
        f, why = report.unreadable[0]
        out.append(
            Problem(
                "checksum_unreadable",
                "warning",
                f"{len(report.unreadable)} file(s) or folder(s) with checksum sidecars could not be read to verify them",
                f"{f}: {why}.",
                "Check the checkpoint's permissions; their integrity is unknown.",
                {"files": [f"{f}: {w}" for f, w in report.unreadable[:20]]},
            )
        )
    return out
