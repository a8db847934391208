"""State Lens on the command line: the same reads and diagnoses as the app, headless.

    python cli.py overview CHECKPOINT [--json]
    python cli.py sql CHECKPOINT "SELECT ..." [--batch N] [--max-rows N] [--json]
    python cli.py why-missing CHECKPOINT KEY [KEY ...] [--operator N] [--batch N] [--key-field F]
                  [--join-type T] [--event-time T] [--event-log PATH] [--json]
    python cli.py progress CHECKPOINT [--event-log PATH] [--json]   # per batch: sources, rows, durations, late rows
    python cli.py skew CHECKPOINT [--operator N] [--store NAME] [--batch N] [--json]
    python cli.py growth CHECKPOINT [--operator N] [--store NAME] [--json]
    python cli.py export CHECKPOINT --chart skew|growth|watermark --out FILE.png|.svg|.html|.csv
    python cli.py report CHECKPOINT --out FILE.html [--event-log PATH]
    python cli.py doctor CHECKPOINT [--json]
    python cli.py unmatched CHECKPOINT [--operator N] [--batch N] [--since N] [--json]  # keys that never matched
    python cli.py serve [--stop | --status]    # a warm Spark engine for the commands after it
    python cli.py app [--engine E] [--master URL | --remote URL] [STREAMLIT OPTIONS]  # the web app

Exit codes: 0 on success, 2 on bad input or a failed read, with one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from analysis.core.errors import InvalidInput, StateLensError, speaking_as


def _invoked_as() -> str:
    """``statelens`` (installed with pip) or ``python cli.py`` (the source folder)."""
    return "statelens" if os.path.basename(sys.argv[0]) == "statelens" else "python cli.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other error
        print(f"statelens: {message} (see {_invoked_as()} --help)", file=sys.stderr)
        sys.exit(2)


def _dump(obj: Any) -> None:
    """A result's ``to_dict()`` (or a dict), as one line of JSON."""
    from statelens.results import json_value

    data = obj.to_dict() if hasattr(obj, "to_dict") else obj
    print(json.dumps(data, default=json_value, ensure_ascii=False))


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
    import statelens
    from analysis.checkpoint.overview import repartition_lines

    result = statelens.open(args.checkpoint).overview()
    if args.json:
        _dump(result)
        return
    info, data = result.info, result.to_dict()
    print(f"checkpoint  {info.path}")
    print(f"query id    {data['query_id']}")
    committed = info.committed_batches
    print(f"batches     {len(info.batches)} ({len(committed)} committed, last committed {info.last_committed})")
    if info.uncommitted:
        print(f"pending     offsets without a commit: {', '.join(map(str, info.uncommitted))}")
    print(f"provider    {info.provider}")
    for line in repartition_lines(info):
        print(f"repartition {line}")
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


def _ago(ms: int | None) -> str:
    """A duration in the largest unit that keeps it readable: 45 s, 12 min, 5 h, 327 d."""
    if ms is None:
        return ""
    s = ms / 1000
    for unit, size, upto in (("s", 1, 120), ("min", 60, 120 * 60), ("h", 3600, 48 * 3600)):
        if abs(s) < upto:
            return f"{s / size:.0f} {unit}"
    return f"{s / 86400:.0f} d"


def cmd_ls(args: argparse.Namespace) -> None:
    import statelens
    from analysis.checkpoint.health import human_bytes

    rows = statelens.ls(args.prefix, sort=args.sort)
    if args.json:
        _dump(rows)
        return
    if not rows:
        print(f"No checkpoint (a folder with offsets/ and commits/) under {args.prefix}.")
        return
    out = []
    for r in rows:
        if r.error:
            out.append([r.path, "", "", "", "", "", "", f"cannot be read: {r.error}"])
            continue
        worst = f"{r.worst_severity}: {r.worst}" if r.worst else "ok"
        out.append([
            r.path,
            str(r.last_committed) if r.last_committed is not None else "",
            _fmt_ms(r.committed_at_ms) if r.committed_at_ms else "",
            str(r.uncommitted),
            _ago(r.watermark_lag_ms),
            ", ".join(r.operators),
            human_bytes(r.state_bytes),
            "; ".join([worst, *r.findings]),
        ])  # fmt: skip
    print(
        _table(["checkpoint", "last batch", "committed at (UTC)", "behind", "watermark lag", "operators", "state", "doctor"], out)
    )
    print(f"\n{len(rows)} checkpoint(s) under {args.prefix}")


def cmd_sql(args: argparse.Namespace) -> None:
    import statelens
    from statelens.results import json_value

    answer = statelens.open(args.checkpoint).sql(
        args.query, args.batch, args.max_rows, args.row_budget, args.partitions, args.spill, args.timeout
    )
    if args.json:
        _dump(answer)
        return
    rows = [list(r.values()) for r in answer.table.to_pylist()]
    shown = [
        [json.dumps(v, default=json_value, ensure_ascii=False) if isinstance(v, (dict, list)) else v for v in r] for r in rows
    ]
    print(_table(answer.table.column_names, shown))
    more = f" (cut at {args.max_rows}: more rows exist)" if answer.truncated else ""
    read = f", state read by {answer.engine}" if answer.engines else ""
    print(f"\n{len(rows)} rows at batch {answer.batch}{more}{read}")
    for note in answer.notes:
        print(f"note: {note}")


def cmd_why_missing(args: argparse.Namespace) -> None:
    import textwrap

    import statelens

    answers = statelens.open(args.checkpoint).why_missing(
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
        _dump(answers)
        return
    report = answers.report
    inferred = f" [inferred from {report.inferred_from}]" if report.inferred_from else ""
    if report.whole_query:
        s = report.input_search
        searched = (
            f"{s.files_searched:,} of {s.files_listed:,} input file(s) searched ("
            + ", ".join(f"{src}: {col}" for src, col in s.columns.items())
            + ")"
            if s is not None and s.files_listed
            else "input not searched"
        )
        plan = (
            f"plan from {report.plan_from}" if report.plan_from else "no event log: operators and watermarks from the checkpoint"
        )
        print(f"the whole query at batch {report.batch}: {searched}; {plan} (state read by {report.engine})")
    else:
        print(
            f"operator {report.operator_id} ({report.operator_name}){inferred} at batch {report.batch}, key field "
            f"{report.key_label} (state read by {report.engine})"
        )
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
    elif report.history and not report.whole_query:
        print(f"history: batches {report.history[0]}-{report.history[1]} ({report.history_method})")
    for r in report.results:
        side = f" ({r.side_text})" if r.side else ""
        typed = f" [matched {r.matched_as}]" if r.matched_as and r.matched_as != "as text" else ""
        if r.outcome is not None:  # the whole query: what reached the output and why the rest did not, first
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
        if r.fate is not None:
            _print_fate(r.fate)
        for n in r.near_misses if r.fate is None or not r.fate.near_fates else []:
            print(f"  near miss: {n['key']!r} ({n['reason']}; {n['where']}, {n['seen']})")
        if r.evidence:
            print(f"  evidence: {len(r.evidence)} row(s); --json shows them")


def _print_fate(fate: Any) -> None:
    """A key's fate as a flow: each record, operator by operator, then what reached the output."""
    from analysis.fate import fmt_time

    if fate.input_note:
        print(f"  input: {fate.input_note}")
    for rf in fate.records:
        rec = rf.record
        when = fmt_time(rf.event_time_ms)[:-4] if rf.event_time_ms is not None else "no event time"
        path = " -> ".join(
            f"op {st.operator_id} {st.outcome.replace('_', ' ')}" + (f" (batch {st.batch})" if st.batch is not None else "")
            for st in rf.steps
        )
        print(f"  record: {rec.source} batch {rec.batch_id}, {rec.file_name} row {rec.row}, {when}: {path}")
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


def cmd_progress(args: argparse.Namespace) -> None:
    import statelens
    from analysis.runs.progress import duplicate_drops, late_drops

    result = statelens.open(args.checkpoint).progress(event_log=args.event_log)
    if args.json:
        _dump(result)
        return
    info, log, rows, notes, lags = result.info, result.log, result.rows, result.notes, result.lags
    print(f"query id    {info.query_id}")
    print(
        f"progress    {f'{log.format}: {log.location} ({len(log.batches)} batches)' if log else 'none (give --event-log for rows, rates and late rows)'}"
    )
    table = []
    duplicates = duplicate_drops(log) if log else []
    for r in rows:
        dropped = sum(o["rows_dropped_by_watermark"] or 0 for o in r["operators"])
        repeats = sum(d.by_batch.get(r["batch_id"], 0) for d in duplicates)
        srcs = "; ".join(f"{s['label']}: {s['summary']}" for s in r["sources"])
        table.append(
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
    print(_table([*heads, "what each source read"], table))
    for what, drops in (("late", late_drops(log) if log else []), ("duplicate", duplicates)):
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
        print(_table(["operator", "store", "partition", "last snapshot version", "versions behind"], lag_rows))
    for n in notes:
        print(f"\nnote: {n}")


def cmd_skew(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).skew(args.operator, args.store, args.batch)
    if args.json:
        _dump(result)
        return
    r = result.report
    print(f"operator {r.operator_id} store {r.store_name} at batch {r.batch_id} (state read by {r.engine})")
    if r.engine_note:
        print(f"note: read by Spark instead: the native reader does not read {r.engine_note}")
    print(f"skew: {r.headline}\n")
    parts = sorted(r.rows_by_partition)
    print(_table(["partition", "rows", "bytes"], [[p, r.rows_by_partition[p], r.bytes_by_partition.get(p, 0)] for p in parts]))
    if any(k["rows"] > 1 for k in r.top_keys):
        from analysis.checkpoint.health import key_json

        print("\nhottest keys: " + ", ".join(f"{key_json(k['key'])} ({k['rows']} rows)" for k in r.top_keys[:5]))
    _print_findings(r.findings)


def cmd_unmatched(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).unmatched(
        args.operator, args.batch, args.since, join_type=args.join_type, event_log=args.event_log
    )
    if args.json:
        _dump(result)
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
        print("\n" + _table([report.key_name, "verdict", "side", "batch", "detail"], rows))
        print(f"\nwhy one is missing: {_invoked_as()} why-missing {args.checkpoint} KEY --operator {report.operator_id}")


def _print_findings(findings: list) -> None:  # type: ignore[type-arg]
    for f in findings:
        print(f"\n[{f.severity}] {f.code}: {f.message}" + (f"\n  setting: {f.setting}" if f.setting else ""))


def cmd_growth(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).growth(args.operator, args.store)
    if args.json:
        _dump(result)
        return
    g = result.report
    rows = [[s["operator_id"], s["store_name"], s["batch_id"], s["rows"], s["bytes"]] for s in g.series()]
    print(_table(["operator", "store", "batch", "rows", "bytes"], rows))
    print(f"\nstate read by {g.engine}")
    if g.engine_note:
        print(f"note: read by Spark instead: the native reader does not read {g.engine_note}")
    _print_findings(g.findings)


def cmd_export(args: argparse.Namespace) -> None:
    from analysis.charts import charts
    from analysis.core.export import FIGURE_FORMATS, figure_bytes, to_csv_bytes
    from spark_io.logs.checkpoint import read_checkpoint

    out = Path(args.out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in (*FIGURE_FORMATS, "csv"):
        raise InvalidInput(f"Cannot tell the format from '{out.name}': end the file name in .png, .svg, .html or .csv.")
    if not out.parent.is_dir():
        raise InvalidInput(f"The folder {out.parent} does not exist.")
    info = read_checkpoint(args.checkpoint)
    if args.chart == "watermark":
        table, fig = charts.watermark_table(info.batches), charts.watermark_figure(info.batches)
    elif args.chart == "skew":
        from spark_io.gather.health import skew

        r = skew(args.checkpoint, args.operator, args.store, args.batch, info=info)
        table, fig = charts.skew_table(r), charts.skew_figure(r)
    else:
        from spark_io.gather.health import growth

        g = growth(args.checkpoint, args.operator, args.store, info=info)
        table, fig = charts.growth_table(g.stores), charts.growth_figure(g.stores)
    data = to_csv_bytes(table) if fmt == "csv" else figure_bytes(fig, fmt)
    out.write_bytes(data)
    print(f"wrote {out} ({len(data):,} bytes)")


def cmd_report(args: argparse.Namespace) -> None:
    from analysis.charts.report import checkup_report
    from spark_io.gather.health import checkup

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise InvalidInput(f"The report is an HTML file: name it like report.html, not '{out.name}'.")
    if not out.parent.is_dir():
        raise InvalidInput(f"The folder {out.parent} does not exist.")
    c = checkup(args.checkpoint, event_log=args.event_log)
    answers = None
    if args.key:
        from spark_io.gather.diagnosis import why_missing

        answers = why_missing(
            args.checkpoint, args.key, info=c.info, event_log=args.event_log, input_root=args.input_root, sink=args.sink
        ).results
    html = checkup_report(c.info, c.skews, c.growth.stores, c.findings, c.progress, c.doctor, answers)
    out.write_text(html, encoding="utf-8")
    warnings = sum(f.severity == "warning" for f in c.findings)
    print(f"wrote {out} ({len(html):,} bytes): {warnings} warning(s), {len(c.findings) - warnings} note(s)")


def cmd_preflight(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).preflight(args.job, event_log=args.event_log, timeout=args.timeout)
    if args.json:
        _dump(result)
        return
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
        print(_table(["#", "stored", "new", ""], rows))
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


def cmd_repartition(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).repartition(args.partitions, args.operator)
    if args.json:
        _dump(result)
        return
    print("\n".join(result.lines()))


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of partition numbers") from None


def cmd_doctor(args: argparse.Namespace) -> None:
    import statelens

    result = statelens.open(args.checkpoint).doctor(event_log=args.event_log, error=args.error)
    if args.json:
        _dump(result)
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
        from analysis.checkpoint.health import human_bytes

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
        print(_table(["operator", "store", "partition", "snapshot version", "files replayed", "bytes read"], rows))
    print("\nwhat a restart may change:")
    print(_table(["setting", "value", "may change"], [[s.setting, s.value, s.may_change] for s in report.restart_settings]))
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


def cmd_serve(args: argparse.Namespace) -> None:
    from spark_io.runtime import serve

    if args.stop:
        print("stopped the served Spark engine" if serve.stop() else "no served Spark engine was running")
        return
    if args.status:
        url = serve.running()
        print(f"serving at {url}" if url else "not serving")
        return
    url, started = serve.start()
    print(
        f"{'started' if started else 'already serving'}: Spark Connect at {url}; commands that need Spark use it (stop: python cli.py serve --stop)"
    )


# How the web app is served unless the user's Streamlit options say otherwise: on loopback only
# (state and SQL are data), without Streamlit's file watcher (it watches the whole folder, .venv
# included, and reloads modules under a running page), without a full garbage collection after
# every run of a page (it holds the interpreter 0.3-0.5 s a run here, every other user's page
# waiting: with 8 users at once it was half the server's time; Python still collects on its own)
# and without the Deploy button.
APP_DEFAULTS = {
    "server.address": "127.0.0.1",
    "server.fileWatcherType": "none",
    "runner.postScriptGC": "false",
    "client.toolbarMode": "viewer",
    "browser.gatherUsageStats": "false",
}


def app_command(options: list[str]) -> list[str]:
    """``streamlit run app.py`` with State Lens' defaults; the user's options come last and win
    (Streamlit takes an option's last value)."""
    for i, opt in enumerate(options):
        value_of_previous = i > 0 and options[i - 1].startswith("--") and "=" not in options[i - 1]
        if not (value_of_previous or (opt.startswith("--") and "." in opt.split("=")[0])):
            from analysis.core.errors import InvalidInput

            raise InvalidInput(f"{opt!r} is not a Streamlit option: app takes options like --server.port 8600.")
    app = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")
    defaults = [f"--{name}={value}" for name, value in APP_DEFAULTS.items()]
    return [sys.executable, "-m", "streamlit", "run", app, *defaults, *options]


def cmd_app(args: argparse.Namespace) -> None:
    env = dict(os.environ)
    for name, value in (("STATELENS_ENGINE", args.engine), ("STATELENS_MASTER", args.master), ("SPARK_REMOTE", args.remote)):
        if value:
            env[name] = value
    command = app_command(args.streamlit_options)
    sys.stdout.flush()
    os.execve(command[0], command, env)  # the server is this process: a signal to it stops the app


NO_SPARK = (
    "overview",
    "doctor",
    "ls",
    "serve",
    "app",
    "preflight",
    "repartition",
)  # commands that never need a Spark engine in this process


def version() -> str:
    """The installed package's version, or pyproject's when run from the source folder."""
    from importlib import metadata

    try:
        return metadata.version("state-lens")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyproject.toml")
        with open(pyproject, "rb") as f:
            return str(tomllib.load(f)["project"]["version"])


def build_parser() -> argparse.ArgumentParser:
    from spark_io.gather.limits import DEFAULT_ROW_BUDGET, DEFAULT_TIMEOUT

    p = _Parser(prog=_invoked_as(), description="State Lens: inspect Structured Streaming state.")
    p.add_argument("--version", action="version", version=f"State Lens {version()}")
    spark = _Parser(add_help=False)
    where = spark.add_argument_group("where Spark runs (default: local, or SPARK_REMOTE when set)")
    where.add_argument("--master", default=None, help="a Spark master URL: local[4], spark://host:7077, yarn ...")
    where.add_argument("--remote", default=None, help="a Spark Connect server: sc://host:15002")
    where.add_argument(
        "--engine",
        choices=["auto", "native", "spark"],
        default=None,
        help="who reads the state: native (the state files, no JVM), spark (State Data Source), or auto "
        "(default, STATELENS_ENGINE): native for local checkpoints it supports, else Spark",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_parser = sub.add_parser

    def add_parser(name: str, **kw):  # type: ignore[no-untyped-def]
        return _add_parser(name, parents=[spark], **kw)

    sub.add_parser = add_parser  # type: ignore[method-assign]

    o = sub.add_parser("overview", help="query id, batches, watermarks, operators and stores (no JVM)")
    o.add_argument("checkpoint")
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.set_defaults(func=cmd_overview)

    ls = sub.add_parser(
        "ls",
        help="every checkpoint under a folder or bucket prefix, one row each: batches, watermark lag, state, doctor (no JVM)",
    )
    ls.add_argument("prefix", help="a local folder or a URI prefix (s3://bucket/streaming/, abfss://..., gs://...)")
    ls.add_argument("--sort", choices=("problems", "path", "bytes", "lag", "behind"), default="problems")
    ls.add_argument("--json", action="store_true", help="print one JSON object")
    ls.set_defaults(func=cmd_ls)

    v = sub.add_parser("serve", help="start a local Spark Connect server once; later commands use it (warm)")
    v.add_argument("--stop", action="store_true", help="stop the served engine")
    v.add_argument("--status", action="store_true", help="say whether an engine is served")
    v.set_defaults(func=cmd_serve)

    d = sub.add_parser(
        "doctor", help="is the checkpoint whole? missing commits or state files, retention, restart batch (no JVM)"
    )
    d.add_argument("checkpoint")
    d.add_argument(
        "--event-log",
        default=None,
        help="the query's Spark event log: whether its last run is still running, or how it ended; or the event log "
        "of an application that repartitioned the state offline: how long it took",
    )
    d.add_argument(
        "--error",
        default=None,
        metavar="FILE",
        help="a failed restart's error text or event log: which operator, what changed, the ways out",
    )
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_doctor)

    s = sub.add_parser("sql", help="run DuckDB SQL over the state tables (op0, op0_left, op0_changes ...)")
    s.add_argument("checkpoint")
    s.add_argument("query")
    s.add_argument("--batch", type=int, default=None, help="batch to read (default: last committed)")
    s.add_argument("--max-rows", type=int, default=10_000, help="row cap for the result (default 10000)")
    s.add_argument("--json", action="store_true", help='print {"columns": [...], "rows": [[...]]}')
    s.add_argument(
        "--row-budget", type=int, default=DEFAULT_ROW_BUDGET, help=f"most rows a table may load (default {DEFAULT_ROW_BUDGET:,})"
    )
    s.add_argument("--partitions", type=_int_list, default=None, help="load only these state partitions, e.g. 0,3")
    s.add_argument("--spill", action="store_true", help="past the row budget, spill tables to Parquet and query them from disk")
    s.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help=f"query time limit in seconds (default {DEFAULT_TIMEOUT:g})"
    )
    s.set_defaults(func=cmd_sql)

    w = sub.add_parser("why-missing", help="explain, per key, why it produced no output (joins and every stateful operator)")
    w.add_argument("checkpoint")
    w.add_argument("keys", nargs="+", metavar="KEY")
    w.add_argument(
        "--operator",
        type=int,
        default=None,
        help="one operator's verdict alone (default: the whole query: each input record of the key followed through every "
        "operator to the output)",
    )
    w.add_argument("--batch", type=int, default=None, help="batch to diagnose at (default: last committed)")
    w.add_argument(
        "--no-near-misses",
        action="store_true",
        help="the verdicts alone: skip the search for look-alike keys (case, spacing, digits) in the other partitions",
    )
    w.add_argument(
        "--key-field",
        default=None,
        help="the input column or state key field the keys are values of (default: the operators' key columns, e.g. user_id)",
    )
    w.add_argument(
        "--join-type",
        choices=["inner", "left_outer", "right_outer", "full_outer", "left_semi"],
        default=None,
        help="the join's type (the checkpoint does not record it): outer joins emit evicted unmatched rows null-padded",
    )
    w.add_argument(
        "--event-time",
        default=None,
        help="event time of the missing record (ISO 8601, UTC unless given, or epoch ms): was it late, and from which batch",
    )
    w.add_argument(
        "--event-log",
        default=None,
        help="the query's Spark event log or progress JSON lines: its plan gives the operators, filters, watermarks, "
        "output mode and a join's type and condition; its progress the rows each operator dropped as late",
    )
    w.add_argument(
        "--input-root",
        default=None,
        help="where the input files are now, when they moved since the query read them (the folder holding the sources' folders)",
    )
    w.add_argument(
        "--sink",
        default=None,
        help="the file sink's folder (with _spark_metadata), when it is not where the event log says",
    )
    w.add_argument("--json", action="store_true", help='print {"results": [{"key", "verdict", "fate", ...}]}')
    w.set_defaults(func=cmd_why_missing)

    f = sub.add_parser(
        "preflight",
        help="before a change is deployed: run the changed job against a scratch copy of the checkpoint and say whether "
        "it restarts (Spark's own checks), and what would behave otherwise",
        usage="%(prog)s CHECKPOINT [--json] [--event-log LOG] -- COMMAND ...",
    )
    f.add_argument("checkpoint")
    f.add_argument(
        "--event-log", default=None, help="an event log of a run of the deployed query: its plan is compared with the new one"
    )
    f.add_argument("--timeout", type=float, default=900, help="seconds the job may take to start its query (default 900)")
    f.add_argument("--json", action="store_true", help='print {"verdict", "error_class", "differences", "warnings", ...}')
    f.set_defaults(func=cmd_preflight)

    rp = sub.add_parser(
        "repartition",
        help="what repartitioning the state to N partitions would do: rows and bytes per new partition, skew, "
        "hot keys' new homes, whether Spark would refuse, the command (nothing is written)",
    )
    rp.add_argument("checkpoint")
    rp.add_argument("--partitions", type=int, required=True, help="the new partition count")
    rp.add_argument("--operator", type=int, default=None, help="operator id (default: every operator)")
    rp.add_argument("--json", action="store_true", help='print {"partitions", "spark_error_class", "stores": [...], ...}')
    rp.set_defaults(func=cmd_repartition)

    u = sub.add_parser(
        "unmatched",
        help="which keys never matched: a join's keys evicted unmatched, waiting, or rejected by the condition; "
        "an aggregation's windows still waiting",
    )
    u.add_argument("checkpoint")
    u.add_argument("--operator", type=int, default=None, help="operator id (default: the join, else the first)")
    u.add_argument("--batch", type=int, default=None, help="state as of this batch (default: last committed)")
    u.add_argument("--since", type=int, default=None, help="only keys that entered or were evicted from this batch on")
    u.add_argument(
        "--join-type",
        choices=["inner", "left_outer", "right_outer", "full_outer", "left_semi"],
        default=None,
        help="the join's type (the checkpoint does not record it): a preserved side's unmatched keys were emitted null-padded",
    )
    u.add_argument("--event-log", default=None, help="the query's Spark event log: its plan gives the join's type")
    u.add_argument("--json", action="store_true", help='print {"counts", "per_batch", "keys": [...]}')
    u.set_defaults(func=cmd_unmatched)

    pr = sub.add_parser("progress", help="per batch: sources and offsets (from the checkpoint), rows, durations, late rows")
    pr.add_argument("checkpoint")
    pr.add_argument(
        "--event-log",
        default=None,
        help="a Spark event log (file, eventlog_v2_* folder or spark.eventLog.dir) or progress JSON lines",
    )
    pr.add_argument("--json", action="store_true", help='print {"query_id", "batches": [...]}')
    pr.set_defaults(func=cmd_progress)

    def target(q: argparse.ArgumentParser, batch: bool = True) -> None:
        q.add_argument("checkpoint")
        q.add_argument("--operator", type=int, default=None, help="operator id (default: the join, else the first)")
        q.add_argument("--store", default=None, help="store or transformWithState variable (default: the main one)")
        if batch:
            q.add_argument("--batch", type=int, default=None, help="batch (default: last committed)")

    k = sub.add_parser("skew", help="rows and bytes per partition, skew ratios, hot keys")
    target(k)
    k.add_argument("--json", action="store_true")
    k.set_defaults(func=cmd_skew)

    g = sub.add_parser("growth", help="rows and bytes per batch from the change feed, with findings")
    target(g, batch=False)
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_growth)

    e = sub.add_parser("export", help="a chart as PNG, SVG or HTML, or its data as CSV (by the file extension)")
    target(e)
    e.add_argument("--chart", choices=["skew", "growth", "watermark"], required=True)
    e.add_argument("--out", required=True, help="FILE.png, .svg, .html or .csv")
    e.set_defaults(func=cmd_export)

    r = sub.add_parser("report", help="a one-file HTML health report: summary, findings, charts")
    r.add_argument("checkpoint")
    r.add_argument("--out", required=True, help="FILE.html")
    r.add_argument("--event-log", default=None, help="the query's event log or progress JSON lines: late rows, rates, durations")
    r.add_argument(
        "--key",
        action="append",
        default=[],
        help="a key missing from the output (repeatable): the report answers why, through the whole query",
    )
    r.add_argument("--input-root", default=None, help="with --key: where the input files are now, if they moved")
    r.add_argument("--sink", default=None, help="with --key: where the file sink's folder is now, if it moved")
    r.set_defaults(func=cmd_report)

    a = sub.add_parser(
        "app",
        help="start the web app (on 127.0.0.1; Streamlit options pass through: --server.port 8600, "
        "--server.address 0.0.0.0 to serve other machines)",
    )
    a.set_defaults(func=cmd_app, streamlit_options=[])
    return p


@contextlib.contextmanager
def _download_progress(args: argparse.Namespace) -> Iterator[None]:
    """Downloads from object storage that take over a second: one line on stderr, rewritten in place
    (an interactive terminal only, and not with --json), cleared when the command ends."""
    if getattr(args, "json", False) or not sys.stderr.isatty():
        yield
        return
    from analysis.checkpoint.health import human_bytes
    from spark_io.storage import progress

    shown = []

    def line(done: int, total: int, files: int) -> None:
        shown.append(1)
        sys.stderr.write(
            f"\rstatelens: downloading state files: {human_bytes(done)} of {human_bytes(total)} ({files} files)\033[K"
        )
        sys.stderr.flush()

    try:
        with progress.reporting(line):
            yield
    finally:
        if shown:
            sys.stderr.write("\r\033[K")


def main(argv: list[str] | None = None, process: bool = False) -> int:
    """``process``: this process runs one command and exits (kept reads would serve no next question)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    job: list[str] = []  # preflight's job command: everything after its --
    if "--" in argv and "preflight" in argv[: argv.index("--")]:
        cut = argv.index("--")
        argv, job = argv[:cut], argv[cut + 1 :]
    args, extra = parser.parse_known_args(argv)
    args.job = job
    if extra and args.command != "app":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.streamlit_options = extra
    try:
        from spark_io.readers import engine

        if args.engine:
            engine.configure(args.engine)
        if process:
            engine.one_question_per_process()
        if args.master and args.remote:
            from analysis.core.errors import InvalidInput

            raise InvalidInput("Give either --master or --remote, not both.")
        if args.master or args.remote:
            from spark_io.runtime import session

            session.configure(master=args.master, remote=args.remote)
        elif args.command not in NO_SPARK and not os.environ.get("SPARK_REMOTE"):
            from spark_io.runtime import serve, session

            served = serve.running()  # a warm engine started by `cli.py serve`
            if served:
                session.configure(remote=served, served=True)
        from spark_io.storage import question

        with speaking_as("cli"), _download_progress(args), question():
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
    except Exception as e:  # a bug: still one line and exit 2; STATELENS_DEBUG=1 shows the traceback
        if os.environ.get("STATELENS_DEBUG"):
            raise
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        print(f"statelens: unexpected error: {type(e).__name__}: {first} (set STATELENS_DEBUG=1 for details)", file=sys.stderr)
        return 2
    return 0


def run() -> int:
    """The ``statelens`` command and ``python cli.py``: one command in this process."""
    return main(process=True)


if __name__ == "__main__":
    sys.exit(run())
