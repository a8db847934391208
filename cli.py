"""State Lens on the command line: the same reads and diagnoses as the app, headless.

    python cli.py overview CHECKPOINT [--json]
    python cli.py sql CHECKPOINT "SELECT ..." [--batch N] [--max-rows N] [--json]
    python cli.py why-missing CHECKPOINT KEY [KEY ...] [--operator N] [--batch N] [--key-field F] [--json]

Exit codes: 0 on success, 2 on bad input or a failed read, with one line on stderr.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import sys
from typing import Any, NoReturn

from spark_io.errors import StateLensError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other error
        print(f"statelens: {message} (see python cli.py --help)", file=sys.stderr)
        sys.exit(2)


def _json_value(v: Any) -> Any:
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    return str(v)


def _dump(obj: Any) -> None:
    print(json.dumps(obj, default=_json_value, ensure_ascii=False))


def _fmt_ms(ms: int) -> str:
    if not ms:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


# --------------------------------------------------------------------------- commands


def cmd_overview(args: argparse.Namespace) -> None:
    from analysis.overview import overview_dict
    from spark_io.checkpoint import read_checkpoint

    info = read_checkpoint(args.checkpoint)
    data = overview_dict(info)
    if args.json:
        _dump(data)
        return
    print(f"checkpoint  {info.path}")
    print(f"query id    {data['query_id']}")
    committed = info.committed_batches
    print(f"batches     {len(info.batches)} ({len(committed)} committed, last committed {info.last_committed})")
    if info.uncommitted:
        print(f"pending     offsets without a commit: {', '.join(map(str, info.uncommitted))}")
    print(f"provider    {info.provider}")
    print()
    rows = [
        [b.batch_id, "yes" if b.committed else "NO", _fmt_ms(b.watermark_ms), b.watermark_ms, _fmt_ms(b.timestamp_ms)]
        for b in info.batches
    ]
    print(_table(["batch", "committed", "watermark (UTC)", "watermark_ms", "timestamp (UTC)"], rows))
    print()
    if not data["operators"]:
        print("No stateful operators (no state/ folder).")
    for op in data["operators"]:
        stores = ", ".join(f"{s['store_name']} ({s['num_partitions']} partitions)" for s in op["stores"])
        print(f"operator {op['operator_id']}  {op['operator_name']}: {stores}")


def cmd_sql(args: argparse.Namespace) -> None:
    from spark_io.workspace import Workspace

    ws = Workspace(args.checkpoint, args.batch)
    result = ws.execute(args.query, max_rows=args.max_rows)
    rows = [list(r.values()) for r in result.table.to_pylist()]
    if args.json:
        _dump({"columns": result.columns, "rows": rows})
        return
    shown = [
        [json.dumps(v, default=_json_value, ensure_ascii=False) if isinstance(v, (dict, list)) else v for v in r] for r in rows
    ]
    print(_table(result.columns, shown))
    more = f" (cut at {args.max_rows}: more rows exist)" if result.truncated else ""
    print(f"\n{len(rows)} rows at batch {ws.batch}{more}")


def cmd_why_missing(args: argparse.Namespace) -> None:
    import textwrap

    from spark_io.diagnosis import why_missing

    report = why_missing(args.checkpoint, args.keys, args.operator, args.batch, args.key_field)
    if args.json:
        _dump(report.to_dict())
        return
    print(f"operator {report.operator_id} ({report.operator_name}) at batch {report.batch}, key field {report.key_field}")
    for r in report.results:
        side = f" ({r.side} side)" if r.side else ""
        print(f"\n{r.key}: {r.verdict}{side}")
        print(textwrap.indent(textwrap.fill(r.explanation, 100), "  "))
        for n in r.near_misses:
            print(f"  near miss: {n['key']!r} ({n['reason']})")
        if r.evidence:
            print(f"  evidence: {len(r.evidence)} row(s); --json shows them")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python cli.py", description="State Lens: inspect Structured Streaming state.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    o = sub.add_parser("overview", help="query id, batches, watermarks, operators and stores (no JVM)")
    o.add_argument("checkpoint")
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.set_defaults(func=cmd_overview)

    s = sub.add_parser("sql", help="run DuckDB SQL over the state tables (op0, op0_left, op0_changes ...)")
    s.add_argument("checkpoint")
    s.add_argument("query")
    s.add_argument("--batch", type=int, default=None, help="batch to read (default: last committed)")
    s.add_argument("--max-rows", type=int, default=10_000, help="row cap for the result (default 10000)")
    s.add_argument("--json", action="store_true", help='print {"columns": [...], "rows": [[...]]}')
    s.set_defaults(func=cmd_sql)

    w = sub.add_parser("why-missing", help="explain, per key, why it produced no output (joins and every stateful operator)")
    w.add_argument("checkpoint")
    w.add_argument("keys", nargs="+", metavar="KEY")
    w.add_argument("--operator", type=int, default=None, help="operator id (default: the join, else the first operator)")
    w.add_argument("--batch", type=int, default=None, help="batch to diagnose at (default: last committed)")
    w.add_argument("--key-field", default=None, help="key field to match (default: the first plain field, e.g. field0)")
    w.add_argument("--json", action="store_true", help='print {"results": [{"key", "verdict", ...}]}')
    w.set_defaults(func=cmd_why_missing)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except StateLensError as e:
        print(f"statelens: {e.title}: {e.message}".replace("\n", " "), file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("statelens: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
