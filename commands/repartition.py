"""``repartition``: what repartitioning the state would do (nothing is written)."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump

HELP = "what repartitioning the state to N partitions would do: rows and bytes per new partition, skew, hot keys' new homes, whether Spark would refuse, the command (nothing is written)"
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument("--partitions", type=int, required=True, help="the new partition count")
    p.add_argument("--operator", type=int, default=None, help="operator id (default: every operator)")
    p.add_argument("--json", action="store_true", help='print {"partitions", "spark_error_class", "stores": [...], ...}')


def run(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).repartition(args.partitions, args.operator)
    if args.json:
        dump(result)
        return
    print("\n".join(result.lines()))
