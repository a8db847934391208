"""``pipeline``: the queries under a root chained through their tables, upstream first (no JVM)."""

from __future__ import annotations

import argparse

from statelens.commands._out import dump, fmt_ms, table

HELP = (
    "the queries under a root (a Declarative Pipeline's storage root too) and the tables between them: hops, lag, health (no JVM)"
)
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", help="a folder or URI prefix holding the checkpoints, at any depth")
    p.add_argument(
        "--data-root",
        help="where the tables are now, when not where the logs say (a Declarative Pipeline's warehouse, a copy)",
    )
    p.add_argument(
        "--event-log",
        help="the applications' event logs (a file or folder): their progress names each query's sink, a table's writer "
        "when its log's times cannot tell it",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> None:
    import statelens
    from statelens.text import batch_ranges, health_text, human_bytes

    pipeline = statelens.open_pipeline(args.root, data_root=args.data_root, event_log=args.event_log)
    if args.json:
        dump(pipeline)
        return
    groups = pipeline.groups()
    print(f"{len(pipeline.queries)} queries under {args.root}, {len(pipeline.hops)} hops, {len(groups)} pipeline(s)")
    for i, group in enumerate(groups, 1):
        print(f"\nPipeline {i}: " + " -> ".join(group))
        rows = []
        for name in group:
            q = pipeline.query(name)
            rows.append([
                name,
                "-" if q.last_batch is None else str(q.last_batch),
                fmt_ms(q.watermark_ms or 0),
                human_bytes(q.state_bytes),
                q.sink or "-",
                health_text(q),
            ])  # fmt: skip
        print(table(["query", "last batch", "watermark (UTC)", "state", "writes", "health"], rows))
        for h in [h for h in pipeline.hops if h.downstream in group]:
            down = pipeline.query(h.downstream)
            read = sorted({n for ns in h.read.values() for n in ns})
            line = f"  {h.upstream} -> {h.downstream} through {h.table}: its batches {batch_ranges(list(h.read))} read {h.upstream}'s batches {batch_ranges(read)}"
            if down.flow and not down.flow.current:
                line += "; superseded, no longer runs"
            elif h.unread:
                line += f"; lag: {len(h.unread)} batch(es) written and not read yet ({batch_ranges(h.unread)})"
            else:
                line += "; lag: none"
            print(line)
    for note in pipeline.notes:
        print(f"\nNot linked: {note}")
