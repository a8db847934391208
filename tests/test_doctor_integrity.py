"""The doctor verifies every checksum sidecar (Spark's CRC32C ``X.crc``, Hadoop's ``.X.crc``), names
damaged and unprotected files, and tells what a restart reads per partition and may change."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from statelens.spark_io.logs.checkpoint import doctor
from support import COMPAT, SAMPLES, logged_batches

V2 = COMPAT / "4.3.0" / "checkpoint_v2"  # RocksDB, checkpoint format 2: Spark's CRC32C sidecars on state files


def _copy(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / src.name
    shutil.copytree(src, dest)
    return dest


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_whole_checkpoints_verify_every_sidecar() -> None:
    for path in (V2, SAMPLES / "windowed_agg"):
        report = doctor(str(path))
        sidecars = [p for p in path.rglob("*.crc")]
        mains = {p.with_name(p.name[1:-4] if p.name.startswith(".") else p.name[:-4]) for p in sidecars}
        assert report.checksums_verified == len({m for m in mains if m.exists()}) > 0
        assert not [p for p in report.problems if p.code.startswith("checksum")]


def test_a_flipped_bit_under_sparks_crc32c_sidecar_is_named(tmp_path: Path) -> None:
    path = _copy(V2, tmp_path)
    changelog = sorted((path / "state" / "0" / "1").glob("*.changelog"))[-1]
    for hadoop in changelog.parent.glob(f".{changelog.name}.crc"):
        hadoop.unlink()  # only Spark's sidecar guards it now
    _flip(changelog, 20)
    report = doctor(str(path))
    (bad,) = [p for p in report.problems if p.code == "checksum_mismatch"]
    rel = str(changelog.relative_to(path))
    assert bad.severity == "error" and rel in bad.meaning and "CRC32C" in bad.meaning
    assert not report.ok


def test_a_flipped_bit_under_hadoops_crc_sidecar_is_named_with_its_bytes(tmp_path: Path) -> None:
    path = _copy(SAMPLES / "windowed_agg", tmp_path)
    delta = path / "state" / "0" / "2" / "3.delta"
    _flip(delta, 700 if delta.stat().st_size > 700 else 5)
    report = doctor(str(path))
    (bad,) = [p for p in report.problems if p.code == "checksum_mismatch"]
    assert "state/0/2/3.delta" in bad.meaning
    assert re.search(r"bytes \d[\d,]*-\d[\d,]* fail their CRC32", bad.meaning), bad.meaning


def test_a_state_file_without_the_sidecar_its_siblings_have_is_named(tmp_path: Path) -> None:
    path = _copy(V2, tmp_path)
    changelog = sorted((path / "state" / "0" / "2").glob("*.changelog"))[0]
    Path(f"{changelog}.crc").unlink()
    report = doctor(str(path))
    (missing,) = [p for p in report.problems if p.code == "checksum_missing"]
    assert missing.details["files"] == [str(changelog.relative_to(path))]
    assert report.ok  # a warning: Spark reads such a file unverified


def test_the_restart_cost_is_the_newest_snapshot_and_the_changes_after_it() -> None:
    report = doctor(str(V2))
    version = report.committed[-1] + 1
    assert len(report.restart_cost) == 4  # one store, four partitions
    for cost in report.restart_cost:
        folder = V2 / "state" / "0" / str(cost.partition)
        versions = {
            kind: sorted(int(p.name.split("_")[0].split(".")[0]) for p in folder.glob(f"*.{kind}"))
            for kind in ("zip", "changelog")
        }
        snapshot = max(v for v in versions["zip"] if v <= version)
        assert cost.snapshot_version == snapshot
        assert cost.replayed == len([v for v in versions["changelog"] if snapshot < v <= version])
        read = [p for p in folder.iterdir() if p.suffix in (".zip", ".changelog") and not p.name.startswith(".")]
        want = sum(
            p.stat().st_size
            for p in read
            if (int(p.name.split("_")[0]) == snapshot and p.suffix == ".zip")
            or (p.suffix == ".changelog" and snapshot < int(p.name.split("_")[0]) <= version)
        )
        assert cost.bytes == want
    settings = {s.setting: s for s in report.restart_settings}
    assert settings["spark.sql.shuffle.partitions"].value == "4" and settings["spark.sql.shuffle.partitions"].may_change == "no"
    assert settings["operator 0"].value.startswith("stateStoreSave")


def test_the_health_report_carries_the_doctor() -> None:
    from statelens.analysis.charts.report import checkup_report
    from statelens.spark_io.gather.checkup import checkup

    c = checkup(str(V2))
    assert c.doctor is not None
    html = checkup_report(c.info, c.skews, c.growth.stores, c.findings, c.progress, c.doctor)
    assert f"{c.doctor.checksums_verified:,} file(s) verified against their .crc sidecars" in html
    worst = c.doctor.restart_cost[0]
    assert f"up to {worst.replayed} change file(s) after snapshot {worst.snapshot_version}" in html


def test_a_truncated_offsets_file_is_a_finding_not_a_refusal(tmp_path: Path) -> None:
    """The newest offsets file cut short (a crash while writing it): the doctor reads what it can, and
    says what Spark does on restart (reads that file first) and what to do, by whether it committed."""
    import subprocess
    import sys

    from support import ROOT

    path = _copy(SAMPLES / "windowed_agg", tmp_path)
    last = logged_batches(path, "offsets")[-1]
    data = (path / "offsets" / str(last)).read_bytes()
    (path / "offsets" / str(last)).write_bytes(data[:40])
    report = doctor(str(path))
    (bad,) = [p for p in report.problems if p.code == "offsets_damaged"]
    assert bad.severity == "error" and f"offsets/{last}" in bad.title and "reads first when the query restarts" in bad.meaning
    committed = (path / "commits" / str(last)).exists()
    assert ("restore offsets/" in bad.action) == committed and ("move offsets/" in bad.action) == (not committed)
    assert report.committed[-1] == last - 1  # the batches shown leave it out
    r = subprocess.run([sys.executable, str(ROOT / "cli.py"), "doctor", str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"[error] offsets/{last} cannot be read" in r.stdout, r.stderr
