"""``rebuild``: after a change that fails a restart: the changed job's state rebuilt in a new checkpoint."""

from __future__ import annotations

import argparse
import sys

from statelens.commands._out import dump, table

HELP = "after a change that will not restart: replay the checkpoint's batches with the changed job into a new checkpoint (Spark writes the state; the job's output is not written), so the changed job continues where the old one stopped"
USAGE = "%(prog)s CHECKPOINT --to NEW_CHECKPOINT [--sink-to NEW_SINK_FOLDER] [--json] [--accept-watermark-change] -- COMMAND ..."
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument("--to", required=True, help="the new checkpoint: a folder that does not exist or is empty")
    p.add_argument(
        "--sink-to",
        default=None,
        metavar="NEW_SINK_FOLDER",
        help="the job writes a file sink: prepare this new folder (absent or empty) for the changed job's output, its "
        "_spark_metadata log holding an entry for every batch before the next (else keep the old sink folder)",
    )
    p.add_argument(
        "--accept-watermark-change",
        action="store_true",
        help="rebuild although the watermark delay changed (the replay keeps each old batch's watermark)",
    )
    p.add_argument(
        "--event-log", default=None, help="an event log of a run of the deployed query: its plan is compared with the new one"
    )
    p.add_argument("--json", action="store_true", help='print {"batches", "operators", "check", "next_steps", ...}')


def _progress(n: int, of: int, batch: int, rows: int) -> None:
    print(f"batch {n} of {of} replayed (batch {batch}, {rows:,} input rows)", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the changed job restarts on the rebuilt checkpoint, 1 when it does not; bad input is 2."""
    import statelens

    result = statelens.open(args.checkpoint).rebuild(
        args.to,
        args.job,
        event_log=args.event_log,
        accept_watermark_change=args.accept_watermark_change,
        progress=_progress,
        sink_to=args.sink_to,
    )
    code = 0 if result.report.check.verdict == "restarts" else 1
    if args.json:
        dump(result)
        return code
    r = result.report
    print(f"REBUILT: {len(r.batches)} batches of {r.checkpoint} replayed with the changed job into {r.to} in {r.seconds:.1f} s")
    for s in r.sources:
        print(f"  read again: {s}")
    print("\nstate at the last batch, per operator (old checkpoint -> new):")
    print(
        table(
            ["operator", "rows before", "rows now", "keys before", "keys now"],
            [
                [o.operator_id, *("-" if v is None else f"{v:,}" for v in (o.old_rows, o.new_rows, o.old_keys, o.new_keys))]
                for o in r.operators
            ],
        )
    )
    for w in r.accepted:
        print(f"\naccepted: [{w.kind}] {w.detail}")
    c = r.check
    print(f"\nthe changed job on {r.to}: {'RESTARTS' if c.verdict == 'restarts' else 'FAILS'}: {c.title}")
    print("\nnext:")
    for s in r.next_steps:
        print(f"  - {s}")
    return code
