"""``growth``: rows and bytes per batch from the change feed, with findings."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, findings, store_target, table

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
    known = lambda n: "-" if n is None else n  # noqa: E731
    rows = [
        [s["operator_id"], s["store_name"], s["batch_id"], s["rows"], known(s["inserts"]), known(s["deletes"]), s["bytes"]]
        for s in g.series()
    ]
    print(table(["operator", "store", "batch", "rows", "inserts", "deletes", "bytes"], rows))
    for how in sorted({s.described() for s in g.stores}):
        print(f"\n{how[0].upper()}{how[1:]}; '-': not known (the first batch left of a query whose older batches are gone).")
    print(f"\nstate read by {g.engine}")
    if g.engine_note:
        print(f"note: read by Spark instead: the native reader does not read {g.engine_note}")
    findings(g.findings)
