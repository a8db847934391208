"""Every checksum sidecar of a checkpoint verified against its file (``analysis.integrity``): Spark's
``X.crc`` (CRC32C, Spark 4.1+) and Hadoop's ``.X.crc`` (CRC32 per 512 bytes, local files)."""

from __future__ import annotations

import re
from typing import Any

from statelens.analysis.checkpoint.integrity import SidecarReport, hadoop_sidecar_problem, spark_sidecar_problem
from statelens.analysis.core.errors import StateLensError
from statelens.spark_io.logs.files import Files

_STATE_FILE = re.compile(r"^\d+(_[0-9a-fA-F-]+)?\.(delta|snapshot|changelog|zip)$")


def verify_sidecars(files: Files, known_unreadable: list[str]) -> SidecarReport:
    """Read every file that has a sidecar and verify it; name state files missing the Spark sidecar
    their folder's other state files have. A folder that cannot be listed is named among the
    unreadable unless ``known_unreadable`` (reported by the doctor already) holds it."""
    unlisted: list[str] = []
    listing = dict(files.walk("", unlisted))
    report = SidecarReport()
    report.unreadable += [(f, "the folder cannot be listed") for f in unlisted if f not in known_unreadable]
    spark_folders: set[str] = set()
    for rel in listing:
        folder, _, name = rel.rpartition("/")
        if name.endswith(".crc") and not name.startswith(".") and _STATE_FILE.match(name[:-4]):
            spark_folders.add(folder)
    checks: list[tuple[str, list[tuple[str, Any]]]] = []
    for rel in sorted(listing):
        folder, _, name = rel.rpartition("/")
        is_sidecar = name.endswith(".crc")  # Spark's sidecar: itself guarded by Hadoop's on a local file system
        if is_sidecar and f"{folder}/{name[:-4]}".lstrip("/") not in listing:
            report.orphans.append(rel)
        spark, hadoop = f"{folder}/{name}.crc".lstrip("/"), f"{folder}/.{name}.crc".lstrip("/")
        present = [(spark, spark_sidecar_problem)] if spark in listing and not is_sidecar else []
        if files.is_file(hadoop):  # hidden: not in the listing
            present.append((hadoop, hadoop_sidecar_problem))
        if folder in spark_folders and _STATE_FILE.match(name) and spark not in listing:
            report.missing.append(rel)
        if present:
            checks.append((rel, present))

    def verify(item: tuple[str, list[tuple[str, Any]]]) -> tuple[str, str | None, str | None]:
        rel, present = item
        try:
            data = files.read(rel)
            problems = [check(data, files.read(s)) for s, check in present]
        except (OSError, StateLensError) as e:
            return rel, None, getattr(e, "message", None) or str(e)
        return rel, next((p for p in problems if p), None), None

    for rel, why, unreadable in files.map(verify, checks):  # in parallel on remote storage
        if unreadable is not None:
            report.unreadable.append((rel, unreadable))
            continue
        report.checked += 1
        if why:
            report.damaged.append((rel, why))
    return report
