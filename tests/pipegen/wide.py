"""The wide run: many seeds generated, run and checked; right / wrong / crashed per part and provider."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from pipegen.differential import Check, check
from pipegen.spec import Pipeline


def session():  # type: ignore[no-untyped-def]
    from statelens.spark_io.runtime.session import get_spark

    return get_spark()


def check_folders(folders: list[Path], engines: list[str]) -> int:
    from pipegen.truth import Truth

    spark = session()
    checks: list[Check] = []
    for folder in folders:
        t = Truth(spark, folder)
        found = check(t, engines)
        checks += found
        print(f"{t.p.name}: {' '.join(t.p.parts())}")
        for c in found:
            if c.verdict != "right":
                print("  " + c.line())
    print(table(checks, {f.name: Pipeline.load(f) for f in folders}))
    return 0 if all(c.verdict in ("right", "limit", "undetermined") for c in checks) else 1


def wide(seeds: list[int | str], work: str | None, table_file: str | None, engines: list[str]) -> int:
    from pipegen.compose import pipeline
    from pipegen.run import run
    from pipegen.truth import Truth

    root = Path(work) if work else Path(tempfile.mkdtemp(prefix="pipegen-wide-"))
    root.mkdir(parents=True, exist_ok=True)
    spark = session()
    checks: list[Check] = []
    pipelines: dict[str, Pipeline] = {}
    failed_runs: dict[str, str] = {}
    started = time.monotonic()
    for i, seed in enumerate(seeds):
        p = pipeline(seed)
        folder = root / p.name
        pipelines[p.name] = p
        try:
            if not (folder / "progress.json").exists():
                run(p, folder)
            found = check(Truth(spark, folder), engines)
        except Exception as e:  # Spark refused the query, or the truth could not be derived
            failed_runs[p.name] = str(e).strip().splitlines()[-1][:300]
            print(f"[{i + 1}/{len(seeds)}] {p.name}: NOT RUN: {failed_runs[p.name]}", flush=True)
            continue
        checks += found
        bad = [c for c in found if c.verdict in ("wrong", "crashed")]
        print(f"[{i + 1}/{len(seeds)}] {p.name} {' '.join(p.parts())}: {len(found) - len(bad)}/{len(found)} right", flush=True)
        for c in bad:
            print("    " + c.line(), flush=True)
            print(f"    replay: python -m pipegen show {seed}; query in {folder / 'query.txt'}", flush=True)
    text = table(checks, pipelines)
    text += (
        f"\n{len(pipelines)} pipelines ({len(failed_runs)} not run), {len(checks)} checks, {time.monotonic() - started:.0f} s\n"
    )
    for name, why in failed_runs.items():
        text += f"- {name} not run: {why}\n"
    print(text)
    if table_file:
        Path(table_file).write_text(text)
    if not work:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if all(c.verdict in ("right", "limit", "undetermined") for c in checks) and not failed_runs else 1


def table(checks: list[Check], pipelines: dict[str, Pipeline]) -> str:
    """Right / wrong / crashed / undetermined per part (a pipeline's checks count for each of its parts)."""
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    seen: dict[str, set[str]] = defaultdict(set)
    for c in checks:
        p = pipelines[c.pipeline]
        for part in ["all", *p.parts(), f"engine:{c.engine}", "event log:" + ("yes" if c.event_log else "no")]:
            rows[part][c.verdict] += 1
            seen[part].add(c.pipeline)
    lines = [
        "| part | pipelines | checks | right | wrong | crashed | named limit | undetermined |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for part in sorted(rows, key=lambda x: (x != "all", x)):
        n = rows[part]
        lines.append(
            f"| {part} | {len(seen[part])} | {sum(n.values())} | {n['right']} | {n['wrong']} | {n['crashed']} | {n['limit']} "
            f"| {n['undetermined']} |"
        )
    limits = Counter(_limit(c) for c in checks if c.verdict == "limit")
    if limits:
        lines += ["", "Named limits (the answer said `unknown`, and why):", ""]
        lines += [f"- {n} x {why}" for why, n in limits.most_common()]
    return "\n".join(lines) + "\n"


def _limit(c: Check) -> str:
    """A limit's reason without the key's own values (records, batches), to count alike ones together."""
    import re

    why = c.problems[0] if c.problems else "?"
    return re.sub(r"'[^']*'|\b\d+\b", "…", why)[:240] + (" (no event log)" if not c.event_log else "")
