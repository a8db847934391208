"""``ls``: every checkpoint under a folder or bucket prefix, one row each (no JVM)."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, fmt_ms, table

HELP = "every checkpoint under a folder or bucket prefix, one row each: batches, watermark lag, state, doctor (no JVM)"
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("prefix", help="a local folder or a URI prefix (s3://bucket/streaming/, abfss://..., gs://...)")
    p.add_argument("--sort", choices=("problems", "path", "bytes", "lag", "behind"), default="problems")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _ago(ms: int | None) -> str:
    """A duration in the largest unit that keeps it readable: 45 s, 12 min, 5 h, 327 d."""
    if ms is None:
        return ""
    s = ms / 1000
    for unit, size, upto in (("s", 1, 120), ("min", 60, 120 * 60), ("h", 3600, 48 * 3600)):
        if abs(s) < upto:
            return f"{s / size:.0f} {unit}"
    return f"{s / 86400:.0f} d"


def run(args: argparse.Namespace) -> None:
    import statelens
    from statelens.text import human_bytes

    rows = statelens.ls(args.prefix, sort=args.sort)
    if args.json:
        dump(rows)
        return
    skipped = rows.skipped_line()
    if not rows:
        print(f"No checkpoint (a folder with offsets/ and commits/) under {args.prefix}.")
        if skipped:
            print(skipped)
        return
    out = []
    for r in rows:
        if r.error:
            out.append([r.path, "", "", "", "", "", "", f"cannot be read: {r.error}"])
            continue
        worst = f"{r.worst_severity}: {r.worst}" if r.worst else "ok"
        out.append([
            r.path + (f" ({r.flow}{', superseded by a full refresh' if r.superseded else ''})" if r.flow else ""),
            str(r.last_committed) if r.last_committed is not None else "",
            fmt_ms(r.committed_at_ms) if r.committed_at_ms else "",
            str(r.uncommitted),
            _ago(r.watermark_lag_ms),
            ", ".join(r.operators),
            human_bytes(r.state_bytes),
            "; ".join([worst, *r.findings]),
        ])  # fmt: skip
    print(
        table(["checkpoint", "last batch", "committed at (UTC)", "behind", "watermark lag", "operators", "state", "doctor"], out)
    )
    print(f"\n{len(rows)} checkpoint(s) under {args.prefix}")
    if skipped:
        print(skipped)
