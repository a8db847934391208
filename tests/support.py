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
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1 ... in a parallel run: its own file names
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


def copy_package_sources(dest: Path) -> None:
    """What ``pip install .`` packages, copied to ``dest`` (building never writes into this folder):
    pyproject.toml, the README, and the one package pyproject.toml names, ``statelens`` (its links
    to the layers copied as what they link to)."""
    import shutil
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["packages"]["find"]["include"] == ["statelens", "statelens.*"], "the wheel's one import name"
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "statelens", dest / "statelens", ignore=shutil.ignore_patterns("__pycache__"))


def changed_samples() -> list[str]:
    """What differs from BASELINE now: checkpoints created or removed, files created, removed or changed."""
    now = sample_checksums()
    out = [f"{n}: created" for n in set(now) - set(BASELINE)] + [f"{n}: removed" for n in set(BASELINE) - set(now)]
    for name in set(now) & set(BASELINE):
        before, after = BASELINE[name], now[name]
        out += [f"{name}/{p}: created" for p in sorted(set(after) - set(before))]
        out += [f"{name}/{p}: removed" for p in sorted(set(before) - set(after))]
        out += [f"{name}/{p}: changed" for p in sorted(p for p in set(before) & set(after) if before[p] != after[p])]
    return sorted(out)


def scenario(name: str) -> generate.Scenario:
    return next(s for s in generate.scenarios() if s.name == name)


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def sample(name: str) -> str:
    return str(SAMPLES / name)


def logged_batches(checkpoint: Path, folder: str = "commits") -> list[int]:
    """The batches in a checkpoint's log folder (``commits`` or ``offsets``), in order, read from the
    file names as Spark names them: a file being written is a hidden temporary file, and each file
    has a hidden checksum file beside it. Empty while the folder does not exist yet."""
    logs = checkpoint / folder
    return sorted(int(p.name) for p in logs.iterdir() if p.name.isdigit()) if logs.is_dir() else []
