"""``preflight``: before a change: does the changed job restart on the checkpoint (Spark's own checks)."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, table

HELP = "before a change is deployed: run the changed job against a scratch copy of the checkpoint and say whether it restarts (Spark's own checks), and what would behave otherwise"
USAGE = "%(prog)s CHECKPOINT [--json] [--event-log LOG] -- COMMAND ..."
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument(
        "--event-log", default=None, help="an event log of a run of the deployed query: its plan is compared with the new one"
    )
    p.add_argument("--timeout", type=float, default=900, help="seconds the job may take to start its query (default 900)")
    p.add_argument("--json", action="store_true", help='print {"verdict", "error_class", "differences", "warnings", ...}')


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the changed job restarts, 1 when it fails (a deploy a CI can gate); bad input is 2."""
    import statelens

    result = statelens.open(args.checkpoint).preflight(args.job, event_log=args.event_log, timeout=args.timeout)
    code = 0 if result.report.verdict == "restarts" else 1
    if args.json:
        dump(result)
        return code
    r = result.report
    print(f"{'RESTARTS' if r.verdict == 'restarts' else 'FAILS'}: {r.title}")
    if r.error_class:
        print(f"error class  {r.error_class}" + (f" (operator {r.operator_id})" if r.operator_id is not None else ""))
    if r.store or r.column_family:
        print(f"store        {r.store or '-'}" + (f", column family {r.column_family}" if r.column_family else ""))
    if r.stored_schema is not None and r.new_schema is not None:
        marks = {d["position"]: d["change"] for d in r.differences if "position" in d}
        rows = []
        for i in range(max(len(r.stored_schema), len(r.new_schema))):
            old = r.stored_schema[i].text() if i < len(r.stored_schema) else ""
            new = r.new_schema[i].text() if i < len(r.new_schema) else ""
            rows.append([str(i), old, new, f"<- {marks[i]}" if i in marks else ""])
        print(f"\n{r.schema_part} schema, field by field (Spark compares by position):")
        print(table(["#", "stored", "new", ""], rows))
    elif r.differences:
        print("\nwhat changed:")
        for d in r.differences:
            print(f"  - {d['change']}")
    for title, items in (
        ("warnings (restarts, but behaves otherwise)", [f"[{w.kind}] {w.detail}" for w in r.warnings]),
        ("ways out", r.ways_out),
        ("not compared", r.not_checked),
        ("the job's writes not made", r.skipped_writes),
        ("the job's other queries, not started", r.other_queries),
    ):
        if items:
            print(f"\n{title}:")
            for item in items:
                print(f"  - {item}")
    print(
        f"\nhow: batch {r.batch} run on a scratch copy of the checkpoint into Spark's noop sink (Spark {r.spark_version}); "
        "the checkpoint and the job's sink were not written."
    )
    return code
