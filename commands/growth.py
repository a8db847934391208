"""``growth``: rows and bytes per batch from the change feed, with findings."""

from __future__ import annotations

import argparse

from commands._out import dump, findings, store_target, table

HELP = "rows and bytes per batch from the change feed, with findings"
SPARK = True


def add(p: argparse.ArgumentParser) -> None:
    store_target(p, batch=False)
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).growth(args.operator, args.store)
    if args.json:
        dump(result)
        return
    g = result.report
    rows = [[s["operator_id"], s["store_name"], s["batch_id"], s["rows"], s["bytes"]] for s in g.series()]
    print(table(["operator", "store", "batch", "rows", "bytes"], rows))
    print(f"\nstate read by {g.engine}")
    if g.engine_note:
        print(f"note: read by Spark instead: the native reader does not read {g.engine_note}")
    findings(g.findings)
