"""``doctor``: is the checkpoint whole? what a restart reads and may change (no JVM)."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, table

HELP = "is the checkpoint whole? missing commits or state files, retention, restart batch (no JVM)"
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument(
        "--event-log",
        default=None,
        help="the query's Spark event log: whether its last run is still running, or how it ended; or the event log "
        "of an application that repartitioned the state offline: how long it took",
    )
    p.add_argument(
        "--error",
        default=None,
        metavar="FILE",
        help="a failed restart's error text or event log: which operator, what changed, the ways out",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).doctor(event_log=args.event_log, error=args.error)
    if args.json:
        dump(result)
        return
    report, explained = result.report, result.restart_error
    c = report.committed
    print(f"checkpoint   {report.path}")
    print(f"committed    {len(c)} batches" + (f" ({c[0]}–{c[-1]})" if c else ""))
    print(f"restart at   batch {report.restart_batch}")
    print(
        f"loadable     {len(report.loadable_batches)} of {len(c)} committed batches can be read by the state reader"
        if report.loadable_known
        else "loadable     unknown: folders of the checkpoint cannot be read (see below)"
    )
    print(f"format       checkpoint format version {report.checkpoint_format_version}")
    print(f"checksums    {report.checksums_verified} file(s) verified against their .crc sidecars")
    if report.restart_cost:
        from statelens.text import human_bytes

        print("\nrestart cost (the store partitions that replay the most):")
        rows = [
            [
                c.operator_id,
                c.store,
                c.partition,
                "-" if c.snapshot_version is None else c.snapshot_version,
                c.replayed,
                human_bytes(c.bytes),
            ]
            for c in report.restart_cost[:5]
        ]
        print(table(["operator", "store", "partition", "snapshot version", "files replayed", "bytes read"], rows))
    print("\nwhat a restart may change:")
    print(table(["setting", "value", "may change"], [[s.setting, s.value, s.may_change] for s in report.restart_settings]))
    if explained:
        print(f"\nwhy the restart failed: {explained.title}" + (f" [{explained.error_class}]" if explained.error_class else ""))
        for line in explained.changes:
            print(f"  - {line}")
        for line in explained.ways_out:
            print(f"  way out: {line}")
    if not report.problems:
        print("\nNo problems found.")
    for pr in report.problems:
        print(f"\n[{pr.severity}] {pr.title}")
        print(f"  what it means: {pr.meaning}")
        print(f"  what to do:    {pr.action}")
