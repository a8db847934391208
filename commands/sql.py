"""``sql``: DuckDB SQL over the state tables."""

from __future__ import annotations

import argparse
import json

from statelens.commands._out import dump, table

HELP = "run DuckDB SQL over the state tables (op0, op0_left, op0_changes ...)"
SPARK = True


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of partition numbers") from None


def add(p: argparse.ArgumentParser) -> None:
    import statelens

    limits = statelens.limits()
    p.add_argument("checkpoint", help="the query's checkpoint, or a root holding several (each query a schema: silver.op0)")
    p.add_argument("query")
    p.add_argument("--batch", type=int, default=None, help="batch to read (default: last committed)")
    p.add_argument("--max-rows", type=int, default=10_000, help="row cap for the result (default 10000)")
    p.add_argument("--json", action="store_true", help='print {"columns": [...], "rows": [[...]]}')
    p.add_argument(
        "--row-budget",
        type=int,
        default=int(limits["row_budget"]),
        help=f"most rows a table may load (default {int(limits['row_budget']):,})",
    )
    p.add_argument("--partitions", type=_int_list, default=None, help="load only these state partitions, e.g. 0,3")
    p.add_argument("--spill", action="store_true", help="past the row budget, spill tables to Parquet and query them from disk")
    p.add_argument(
        "--timeout", type=float, default=limits["timeout"], help=f"query time limit in seconds (default {limits['timeout']:g})"
    )


def run(args: argparse.Namespace) -> None:
    import statelens
    from statelens.results import json_value

    try:
        opened = statelens.open(args.checkpoint)
    except statelens.NotACheckpoint:  # a root holding several checkpoints: every query's state at once
        answer = statelens.sql_across(args.checkpoint, args.query, max_rows=args.max_rows)
    else:
        answer = opened.sql(args.query, args.batch, args.max_rows, args.row_budget, args.partitions, args.spill, args.timeout)
    if args.json:
        dump(answer)
        return
    rows = [list(r.values()) for r in answer.table.to_pylist()]
    shown = [
        [json.dumps(v, default=json_value, ensure_ascii=False) if isinstance(v, (dict, list)) else v for v in r] for r in rows
    ]
    print(table(answer.table.column_names, shown))
    more = f" (cut at {args.max_rows}: more rows exist)" if answer.truncated else ""
    read = f", state read by {answer.engine}" if answer.engines else ""
    at = f"at batch {answer.batch}" if answer.batch is not None else f"({answer.title})"
    print(f"\n{len(rows)} rows {at}{more}{read}")
    for note in answer.notes:
        print(f"note: {note}")
