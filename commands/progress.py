"""``progress``: per batch: sources and offsets, rows, durations, late rows."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, table

HELP = "per batch: sources and offsets (from the checkpoint), rows, durations, late rows"
SPARK = True


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument(
        "--event-log",
        default=None,
        help="a Spark event log (file, eventlog_v2_* folder or spark.eventLog.dir) or progress JSON lines",
    )
    p.add_argument("--json", action="store_true", help='print {"query_id", "batches": [...]}')


def run(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).progress(event_log=args.event_log)
    if args.json:
        dump(result)
        return
    info, log, rows, notes, lags = result.info, result.log, result.rows, result.notes, result.lags
    print(f"query id    {info.query_id}")
    print(
        f"progress    {f'{log.format}: {log.location} ({len(log.batches)} batches)' if log else 'none (give --event-log for rows, rates and late rows)'}"
    )
    per_batch = []
    duplicates = result.duplicate_drops()
    for r in rows:
        dropped = sum(o["rows_dropped_by_watermark"] or 0 for o in r["operators"])
        repeats = sum(d.by_batch.get(r["batch_id"], 0) for d in duplicates)
        srcs = "; ".join(f"{s['label']}: {s['summary']}" for s in r["sources"])
        per_batch.append(
            [
                r["batch_id"],
                "-" if r["input_rows"] is None else r["input_rows"],
                "-" if r["duration_ms"] is None else r["duration_ms"],
                dropped if r["has_progress"] else "-",
                *([repeats if r["has_progress"] else "-"] if duplicates else []),
                srcs,
            ]
        )
    print()
    heads = ["batch", "input rows", "duration ms", "late rows dropped", *(["duplicates dropped"] if duplicates else [])]
    print(table([*heads, "what each source read"], per_batch))
    for what, drops in (("late", result.late_drops()), ("duplicate", duplicates)):
        for d in drops:
            print(
                f"\noperator {d.operator_id} ({d.operator_name}) dropped {d.total:,} {what} row(s): "
                + ", ".join(f"batch {b}: {n}" for b, n in d.by_batch.items())
            )
    if lags:
        print(
            f"\nsnapshot lag at batch {lags[0].batch_id} (Spark's SnapshotLastUploaded metrics, the instances it reports; "
            "a restart replays this many versions):"
        )
        lag_rows = [
            [x.operator_id, x.store, x.partition, "none yet" if x.last_snapshot is None else x.last_snapshot, x.behind]
            for x in lags
        ]
        print(table(["operator", "store", "partition", "last snapshot version", "versions behind"], lag_rows))
    for n in notes:
        print(f"\nnote: {n}")
