"""Helpers shared by the tests: the sample checkpoints, their generator's data, checksums."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_checkpoints"
ARTIFACTS = ROOT / "test-artifacts"
for p in (str(ROOT), str(SAMPLES)):
    if p not in sys.path:
        sys.path.insert(0, p)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import generate  # noqa: E402  (the sample generator: its data is the ground truth)

SAMPLE_NAMES = sorted(p.name for p in SAMPLES.iterdir() if (p / "offsets").is_dir())
COMPAT = SAMPLES / "compat"
# compatibility samples: "<version>/<scenario>", each with compat/<version>/truth/<scenario>.json
COMPAT_NAMES = sorted(
    f"{v.name}/{p.name}" for v in COMPAT.iterdir() if v.is_dir() for p in v.iterdir() if (p / "offsets").is_dir()
)
BASELINE: dict[str, dict[str, str]] = {}  # checksums at session start, filled by conftest


def tree_checksums(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def sample_checksums() -> dict[str, dict[str, str]]:
    """Every bundled checkpoint, event log and progress file: State Lens must never change a byte."""
    return (
        {name: tree_checksums(SAMPLES / name) for name in SAMPLE_NAMES}
        | {f"compat/{name}": tree_checksums(COMPAT / name) for name in COMPAT_NAMES}
        | {extra: tree_checksums(SAMPLES / extra) for extra in ("event_logs", "sources", "inputs", "sinks", "pipelines")}
    )


def scenario(name: str) -> generate.Scenario:
    return next(s for s in generate.scenarios() if s.name == name)


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def sample(name: str) -> str:
    return str(SAMPLES / name)
