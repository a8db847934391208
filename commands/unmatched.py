"""``unmatched``: which keys never matched."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, invoked_as, table

HELP = "which keys never matched: a join's keys evicted unmatched, waiting, or rejected by the condition; an aggregation's windows still waiting"
SPARK = True


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument("--operator", type=int, default=None, help="operator id (default: the join, else the first)")
    p.add_argument("--batch", type=int, default=None, help="state as of this batch (default: last committed)")
    p.add_argument("--since", type=int, default=None, help="only keys that entered or were evicted from this batch on")
    p.add_argument(
        "--join-type",
        choices=["inner", "left_outer", "right_outer", "full_outer", "left_semi"],
        default=None,
        help="the join's type (the checkpoint does not record it): a preserved side's unmatched keys were emitted null-padded",
    )
    p.add_argument("--event-log", default=None, help="the query's Spark event log: its plan gives the join's type")
    p.add_argument("--json", action="store_true", help='print {"counts", "per_batch", "keys": [...]}')


def run(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).unmatched(
        args.operator, args.batch, args.since, join_type=args.join_type, event_log=args.event_log
    )
    if args.json:
        dump(result)
        return
    report = result.report
    span = f"history batches {report.history[0]}-{report.history[1]}" if report.history else "no history"
    print(
        f"operator {report.operator_id} ({report.operator_name}) at batch {report.batch}, {span} (state read by {report.engine})"
    )
    counts = report.counts()
    print("\n" + ("\n".join(f"{v:24} {n:,}" for v, n in sorted(counts.items())) if counts else "no unmatched keys"))
    for note in report.notes:
        print(f"note: {note}")
    if report.keys:
        rows = [[k.key, k.verdict, k.side or "", "" if k.batch is None else k.batch, k.detail] for k in report.keys]
        print("\n" + table([report.key_name, "verdict", "side", "batch", "detail"], rows))
        print(f"\nwhy one is missing: {invoked_as()} why-missing {args.checkpoint} KEY --operator {report.operator_id}")
