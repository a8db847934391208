"""``export``: a chart as PNG, SVG or HTML, or its data as CSV (by the file extension)."""

from __future__ import annotations

import argparse
from pathlib import Path

from statelens.commands._out import store_target

HELP = "a chart as PNG, SVG or HTML, or its data as CSV (by the file extension)"
SPARK = True
FORMATS = ("png", "svg", "html", "csv")


def add(p: argparse.ArgumentParser) -> None:
    store_target(p)
    p.add_argument("--chart", choices=["skew", "growth", "watermark"], required=True)
    p.add_argument("--out", required=True, help="FILE.png, .svg, .html or .csv")


def run(args: argparse.Namespace) -> None:
    import statelens

    out = Path(args.out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise statelens.InvalidInput(f"Cannot tell the format from '{out.name}': end the file name in .png, .svg, .html or .csv.")
    if not out.parent.is_dir():
        raise statelens.InvalidInput(f"The folder {out.parent} does not exist.")
    data = statelens.open(args.checkpoint).chart(args.chart, args.operator, args.store, args.batch).to_bytes(fmt)
    out.write_bytes(data)
    print(f"wrote {out} ({len(data):,} bytes)")
