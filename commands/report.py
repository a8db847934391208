"""``report``: the one-file HTML health report."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "a one-file HTML health report: summary, findings, charts"
SPARK = True


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument("--out", required=True, help="FILE.html")
    p.add_argument("--event-log", default=None, help="the query's event log or progress JSON lines: late rows, rates, durations")
    p.add_argument(
        "--key",
        action="append",
        default=[],
        help="a key missing from the output (repeatable): the report answers why, through the whole query",
    )
    p.add_argument(
        "--input-root",
        action="append",
        default=None,
        help="with --key: where the input files are now, if they moved (again for another)",
    )
    p.add_argument("--sink", default=None, help="with --key: where the file sink's folder is now, if it moved")


def run(args: argparse.Namespace) -> None:
    import statelens

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise statelens.InvalidInput(f"The report is an HTML file: name it like report.html, not '{out.name}'.")
    if not out.parent.is_dir():
        raise statelens.InvalidInput(f"The folder {out.parent} does not exist.")
    report = statelens.open(args.checkpoint).report(args.event_log, args.key, args.input_root, args.sink)
    html = report.html
    out.write_text(html, encoding="utf-8")
    notes = len(report.report.findings) - report.warnings
    print(f"wrote {out} ({len(html):,} bytes): {report.warnings} warning(s), {notes} note(s)")
