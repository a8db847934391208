"""Every answer the CLI gives on the bundled checkpoints, one file per command, to diff two versions.

    .venv/bin/python scripts/snapshot_answers.py /tmp/answers-before   # at the old commit
    .venv/bin/python scripts/snapshot_answers.py /tmp/answers-after    # at the new one
    diff -r /tmp/answers-before /tmp/answers-after                      # nothing: no answer moved

A refactoring must not move an answer: this asks overview, doctor, growth, skew, sql, unmatched and
why-missing (text and --json; with and without the event log; the generated pipelines' designed keys,
each sample's first state keys and a key never seen) of every sample and generated pipeline, in one
process (one Spark session), and writes what each printed on stdout and stderr and its exit code.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_checkpoints"
sys.path.insert(0, str(ROOT))

try:  # the CLI's entry, as installed (statelens.cli) or as the folder had it before (cli.py)
    from statelens.cli import main
except ImportError:
    from statelens.cli import main  # type: ignore[no-redef]


def ask(argv: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return f"$ statelens {' '.join(a.replace(str(ROOT), '.') for a in argv)}\nexit {code}\n{out.getvalue()}{err.getvalue()}"


def checkpoints() -> list[tuple[str, Path, list[str], list[str], list[str]]]:
    """(name, checkpoint, keys, event-log args, path args) of every bundled checkpoint."""
    found = []
    for cp in sorted(p for p in SAMPLES.iterdir() if (p / "offsets").is_dir()):
        log, inputs = SAMPLES / "event_logs" / cp.name, SAMPLES / "inputs" / cp.name
        paths = ["--input-root", str(inputs)] if inputs.exists() else []
        found.append((cp.name, cp, [], ["--event-log", str(log)] if log.exists() else [], paths))
    for folder in sorted((SAMPLES / "pipelines").iterdir()):
        for cp in sorted(p for p in folder.rglob("*") if (p / "offsets").is_dir()):
            found.append((f"pipelines-{folder.name}-{cp.name}", cp, [], [], []))
    for folder in sorted((SAMPLES / "generated").iterdir()):
        spec = json.loads((folder / "pipeline.json").read_text())
        keys = [str(k["key"]) for k in spec.get("keys", []) if k.get("ask") is None]
        root = folder / "archive" if (folder / "archive").is_dir() else folder / "inputs"
        paths = ["--input-root", str(root), "--sink", str(folder / "sink")]
        found.append((f"generated-{folder.name}", folder / "checkpoint", keys, ["--event-log", str(folder / "event_log")], paths))
    return found


def first_table(cp: Path) -> str:
    """op0, or the first of its tables the CLI names (a join's op0_left_...)."""
    text = ask(["sql", str(cp), "SELECT 1 FROM op0 LIMIT 0"])
    return text.split("Tables: ", 1)[1].split(",")[0].strip() if "Tables: " in text else "op0"


def state_keys(cp: Path, table: str) -> list[str]:
    """The first two keys of the first operator's state, as the CLI's sql gives them."""
    text = ask(["sql", str(cp), f"SELECT * FROM {table} ORDER BY ALL LIMIT 2", "--json"])
    try:
        rows = json.loads(text.split("\n", 2)[2].splitlines()[0])["rows"]
    except (ValueError, KeyError, IndexError):
        return []
    return [str(first(r)) for r in rows if r]


def first(value: object) -> object:
    """A row's first scalar (a key is often a struct: its first field)."""
    while isinstance(value, list | dict) and value:
        value = value[0] if isinstance(value, list) else next(iter(value.values()))
    return value


def main_(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, cp, keys, log, paths in checkpoints():
        table = first_table(cp)
        keys = (keys or state_keys(cp, table)) + ["never-seen-key-0"]
        runs = {
            "overview": ["overview", str(cp)],
            "doctor": ["doctor", str(cp), *log],
            "doctor.json": ["doctor", str(cp), *log, "--json"],
            "growth": ["growth", str(cp)],
            "growth.json": ["growth", str(cp), "--json"],
            "skew.json": ["skew", str(cp), "--json"],
            "sql": ["sql", str(cp), f"SELECT count(*) AS n FROM {table}"],
            "unmatched.json": ["unmatched", str(cp), "--json"],
            "why-missing": ["why-missing", str(cp), *keys, *log, *paths],
            "why-missing.json": ["why-missing", str(cp), *keys, *log, *paths, "--json"],
            "why-missing-op0": ["why-missing", str(cp), *keys, "--operator", "0", *log],
            "why-missing-nolog.json": ["why-missing", str(cp), *keys, *paths, "--json"],
        }
        for what, argv in runs.items():
            (out / f"{name}.{what}.txt").write_text(ask(argv))
            n += 1
    print(f"{n} answers written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main_(Path(sys.argv[1])))
