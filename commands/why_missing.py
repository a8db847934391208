"""``why-missing``: why each key never reached the output, through the whole query or one operator."""

from __future__ import annotations

import argparse
from typing import Any

from statelens.commands._out import dump

HELP = "explain, per key, why it produced no output (joins and every stateful operator)"
SPARK = True


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "checkpoint",
        help="the query's checkpoint, or a root holding a pipeline's checkpoints (each key followed through every hop)",
    )
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.add_argument(
        "--operator",
        type=int,
        default=None,
        help="one operator's verdict alone (default: the whole query: each input record of the key followed through every "
        "operator to the output)",
    )
    p.add_argument("--batch", type=int, default=None, help="batch to diagnose at (default: last committed)")
    p.add_argument(
        "--no-near-misses",
        action="store_true",
        help="the verdicts alone: skip the search for look-alike keys (case, spacing, digits) in the other partitions",
    )
    p.add_argument(
        "--key-field",
        default=None,
        help="the input column or state key field the keys are values of (default: the operators' key columns, e.g. user_id); "
        "with a root, where a query renamed it, that query's column too: user,gold=customer",
    )
    p.add_argument(
        "--join-type",
        choices=["inner", "left_outer", "right_outer", "full_outer", "left_semi"],
        default=None,
        help="the join's type (the checkpoint does not record it): outer joins emit evicted unmatched rows null-padded",
    )
    p.add_argument(
        "--event-time",
        default=None,
        help="event time of the missing record (ISO 8601, UTC unless given, or epoch ms): was it late, and from which batch",
    )
    p.add_argument(
        "--event-log",
        default=None,
        help="the query's Spark event log or progress JSON lines: its plan gives the operators, filters, watermarks, "
        "output mode and a join's type and condition; its progress the rows each operator dropped as late",
    )
    p.add_argument(
        "--input-root",
        action="append",
        default=None,
        help="where the input files are now, when they moved since the query read them (the folder holding the sources' "
        "folders); again for another (cleanSource=archive: the archive and the source folders holding the files not read)",
    )
    p.add_argument(
        "--sink",
        default=None,
        help="the file sink's folder (with _spark_metadata), when it is not where the event log says",
    )
    p.add_argument(
        "--data-root",
        default=None,
        help="with a root of several checkpoints: where their tables are now, when not where the logs say (a Declarative "
        "Pipeline's warehouse)",
    )
    p.add_argument("--json", action="store_true", help='print {"results": [{"key", "verdict", "fate", ...}]}')


def run(args: argparse.Namespace) -> None:
    import textwrap

    import statelens

    try:
        opened = statelens.open(args.checkpoint)
    except statelens.NotACheckpoint:  # a root holding several checkpoints: the key across the pipeline
        _across(args)
        return
    answers = opened.why_missing(
        *args.keys,
        operator=args.operator,
        batch=args.batch,
        key_field=args.key_field,
        join_type=args.join_type,
        event_time=args.event_time,
        event_log=args.event_log,
        input_root=args.input_root,
        sink=args.sink,
        near_misses=not args.no_near_misses,
    )
    if args.json:
        dump(answers)
        return
    report = answers.report.operator_report  # its operator, join and history: the first key's, in the whole query
    whole = isinstance(answers, statelens.QueryAnswers)  # the whole query's answer, else one operator's verdicts
    print(answers.heading())
    s = answers.report.input_search if whole else None
    said = s.note() if s is not None else None  # the note on the query's input, printed once above the keys
    if said:
        print(f"input: {said}")
    for note in report.engine_notes:
        print(f"note: read by Spark instead: the native reader does not read {note}")
    if report.join_plan is not None:
        plan_ = report.join_plan
        print(
            f"join (from the event log's plan): {plan_.plan_join_type} on {', '.join(plan_.left_keys)} = "
            f"{', '.join(plan_.right_keys)}" + (f" and {plan_.condition}" if plan_.condition else "")
        )
    if report.history_error:
        print(f"history could not be read: {report.history_error}")
    elif report.history and not whole:
        print(f"history: batches {report.history[0]}-{report.history[1]} ({report.history_method})")
    for r in answers.report.results:
        side = f" ({r.side_text})" if r.side else ""
        typed = f" [matched {r.matched_as}]" if r.matched_as and r.matched_as != "as text" else ""
        if whole:  # what reached the output and why the rest did not, first
            at = r.cause_at or {}
            where = ", ".join(
                f"{k.replace('_id', '')} {at[k]}" for k in ("operator_id", "batch_id", "side") if at.get(k) is not None
            )
            cause = f" · cause {r.cause}" + (f" ({where})" if where else "") if r.cause else ""
            print(f"\n{r.key}: {r.outcome}{cause} · operator {r.verdict_operator}'s verdict {r.verdict}{side}{typed}")
        else:
            reason = f" (reason: {r.reason})" if r.reason else ""
            print(f"\n{r.key}: {r.verdict}{side}{typed}{reason}")
        print(textwrap.indent(textwrap.fill(r.explanation, 100), "  "))
        if whole:
            print_fate(r.fate, said)
        for n in r.near_misses if not (whole and r.fate.near_fates) else []:
            print(f"  near miss: {n['key']!r} ({n['reason']}; {n['where']}, {n['seen']})")
        if r.evidence:
            print(f"  evidence: {len(r.evidence)} row(s); --json shows them")


def _across(args: argparse.Namespace) -> None:
    import statelens

    answers = statelens.why_missing_across(
        args.checkpoint,
        *args.keys,
        key_field=args.key_field,
        event_log=args.event_log,
        data_root=args.data_root,
        input_root=(args.input_root or [None])[0],
    )
    if args.json:
        dump({"root": args.checkpoint, "results": [a.to_dict() for a in answers]})
        return
    print(f"each key across the queries under {args.checkpoint}, upstream first")
    for a in answers:
        where = ", ".join(f"{word} {value}" for word, value in a.place())
        print(f"\n{a.key}: {a.outcome}" + (f" · cause {a.cause}" if a.cause else "") + (f" ({where})" if where else ""))
        print(f"  {a.headline}")
        first = a.hops[0].key_field if a.hops else None
        for h in a.hops:  # the column each query was asked by, where a rename upstream changed it
            asked = f" [asked by {h.key_field}]" if h.key_field != first else ""
            print(f"  {h.query}: {h.outcome}" + (f" ({h.cause})" if h.cause else "") + asked)


def print_fate(fate: Any, said: str | None = None) -> None:
    """A key's fate as a flow: each record, operator by operator, then what reached the output.
    ``said``: the note on the query's input printed above every key (not repeated under each)."""
    from statelens.text import fmt_time

    if fate.input_note and fate.input_note != said:
        print(f"  input: {fate.input_note}")
    for rf in fate.records:
        rec = rf.record
        when = fmt_time(rf.event_time_ms)[:-4] if rf.event_time_ms is not None else "no event time"
        path = " -> ".join(
            f"op {st.operator_id} {st.outcome.replace('_', ' ')}" + (f" (batch {st.batch})" if st.batch is not None else "")
            for st in rf.steps
        )
        # the batch is this query's (the one that read the file), not its source's: a table read from an
        # upstream query has batches of its own
        source = f" from {rec.source}" if rec.source else ""
        print(f"  record: read in batch {rec.batch_id}{source}, {rec.file_name} row {rec.row}, {when}: {path}")
    for o in fate.outputs:
        where = f"operator {o.operator_id}" if o.operator_id is not None else "the sink's files"
        print(f"  output: {o.group}: {o.kind.replace('_', ' ')} in batch {o.batch_id} ({where})")
    for w in fate.waiting:
        print(f"  waiting: {w.detail}")
    for n in fate.near_fates:
        where = f" in batch {', '.join(map(str, n.batches))}" if n.batches else ""
        files = f" ({', '.join(n.files[:2])})" if n.files else ""
        print(f"  near miss: {n.key!r} ({n.reason}; {n.where}): {n.outcome.replace('_', ' ')}{where}{files}")
    if not fate.near_fates:
        for n in fate.near:
            print(f"  near miss in the input: {n.values.get(n.column)!r} ({n.near}) at {n.where()}")
    for note in fate.notes:
        print(f"  note: {note}")
