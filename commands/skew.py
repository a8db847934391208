"""``skew``: rows and bytes per partition of one store, skew ratios, hot keys."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, findings, store_target, table

HELP = "rows and bytes per partition, skew ratios, hot keys"
SPARK = True


def add(p: argparse.ArgumentParser) -> None:
    store_target(p)
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).skew(args.operator, args.store, args.batch)
    if args.json:
        dump(result)
        return
    r = result.report
    print(f"operator {r.operator_id} store {r.store_name} at batch {r.batch_id} (state read by {r.engine})")
    if r.engine_note:
        print(f"note: read by Spark instead: the native reader does not read {r.engine_note}")
    print(f"skew: {r.headline}\n")
    parts = sorted(r.rows_by_partition)
    print(table(["partition", "rows", "bytes"], [[p, r.rows_by_partition[p], r.bytes_by_partition.get(p, 0)] for p in parts]))
    if any(k["rows"] > 1 for k in r.top_keys):
        from statelens.text import key_json

        print("\nhottest keys: " + ", ".join(f"{key_json(k['key'])} ({k['rows']} rows)" for k in r.top_keys[:5]))
    findings(r.findings)
