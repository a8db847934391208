"""``overview``: query id, batches, watermarks, operators and stores (no JVM)."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, fmt_ms, table

HELP = "query id, batches, watermarks, operators and stores (no JVM)"
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> None:
    import statelens
    from statelens.text import repartition_lines

    result = statelens.open(args.checkpoint).overview()
    if args.json:
        dump(result)
        return
    info, data = result.info, result.to_dict()
    print(f"checkpoint  {info.path}")
    print(f"query id    {data['query_id']}")
    committed = info.committed_batches
    print(f"batches     {len(info.batches)} ({len(committed)} committed, last committed {info.last_committed})")
    if info.uncommitted:
        print(f"pending     offsets without a commit: {', '.join(map(str, info.uncommitted))}")
    print(f"provider    {info.provider}")
    for line in repartition_lines(info):
        print(f"repartition {line}")
    print()
    rows = [
        [b.batch_id, "yes" if b.committed else "NO", fmt_ms(b.watermark_ms), b.watermark_ms, fmt_ms(b.timestamp_ms)]
        for b in info.batches
    ]
    print(table(["batch", "committed", "watermark (UTC)", "watermark_ms", "timestamp (UTC)"], rows))
    print()
    if not data["operators"]:
        print("No stateful operators (no state/ folder).")
    for op in data["operators"]:
        stores = ", ".join(f"{s['store_name']} ({s['num_partitions']} partitions)" for s in op["stores"])
        print(f"operator {op['operator_id']}  {op['operator_name']}: {stores}")
