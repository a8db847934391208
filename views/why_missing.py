"""Why is key X missing? Operator, keys (one per line) -> a verdict card per key with evidence,
a timeline against the watermark and the SQL that reproduces it. Linkable:
?checkpoint=...&operator=0&key=ord-42"""

from __future__ import annotations

import urllib.parse
from typing import Any

import pandas as pd
import streamlit as st

import statelens
from statelens.analysis.charts.charts import key_timeline_figure
from statelens.analysis.charts.export import display_rows
from statelens.analysis.charts.flow import shown_key
from statelens.text import parse_event_time
from statelens.views.common import (
    cached,
    chart,
    chart_downloads,
    check_with_spark,
    checkpoint_info,
    controls,
    current_event_log,
    current_tz,
    engine_caption,
    fitted_select,
    grid_height,
    guard,
    metric_row,
    opened,
    operator_label,
    pipeline_cached,
    pipeline_root,
    sample_data_root,
    sample_input_root,
    sample_pipeline_inputs,
    sample_sink,
    why_missing_across_cached,
    why_missing_cached,
    with_progress,
)
from statelens.views.flow import render_fate, visible

VERDICT_STYLE = {
    "matched": ("green", "Matched"),
    "waiting_for_other_side": ("orange", "Waiting for the other side"),
    "condition_not_met": ("red", "Join condition not met"),
    "evicted": ("violet", "Evicted"),
    "never_in_state": ("red", "Never in state"),
    "waiting_for_watermark": ("orange", "Waiting for the watermark"),
    "in_state": ("blue", "In state"),
    "dropping_duplicates": ("blue", "Dropping duplicates"),
    "session_open": ("orange", "Session open"),
    "emitted_unmatched": ("violet", "Emitted unmatched (null-padded)"),
    "unknown": ("gray", "Unknown: a read failed"),
    "dropped_as_late": ("red", "Dropped as late"),
    "never_in_input": ("red", "Never in the input"),
}
# the whole query's answer: what reached the output, and why the rest did not
OUTCOME_STYLE = {
    "written": ("green", "Written"),
    "partly_written": ("orange", "Partly written"),
    "written_unmatched": ("violet", "Written unmatched (null-padded)"),
    "waiting": ("orange", "Waiting"),
    "lost": ("red", "Lost"),
    "never_in_input": ("red", "Never in the input"),
    "unknown": ("gray", "Unknown"),
}
CAUSE_WORDS = {
    "dropped_as_late": "dropped as late",
    "dropped_as_duplicate": "dropped as a duplicate",
    "filtered": "filtered out",
    "condition_not_met": "join condition not met",
    "no_match_in_input": "no match in the input",
    "waiting_for_watermark": "waiting for the watermark",
    "unknown": "cause unknown",
    "not_read_yet": "written upstream, not read yet",
    "key_not_followed": "key not followed",
}
CAUSE_COLOR = {"waiting_for_watermark": "orange", "not_read_yet": "orange", "unknown": "gray", "key_not_followed": "gray"}
ANY_KEY_COLUMN = ""  # the whole query's key field select: every operator's key column
WHOLE = -1  # the operator select's choice for the whole query: input -> every operator -> output
JOIN_TYPES = {
    None: "Not recorded (the event log's plan, else explain both)",
    "inner": "Inner",
    "left_outer": "Left outer",
    "right_outer": "Right outer",
    "full_outer": "Full outer",
    "left_semi": "Left semi",
}


def _never_matched(path: str, op_id: int, batch: int, join_type: str | None, event_log: str | None) -> None:
    """Which keys never matched? For when only the counts do not add up: every key to diagnose."""
    with st.expander("Which keys never matched?", expanded=st.session_state.get("wm_unmatched") == (path, op_id, batch)):
        st.caption(
            "A join's keys evicted unmatched, waiting for the other side, or held on both sides that the condition "
            "rejected; an aggregation's windows still waiting for the watermark. Each links to its diagnosis."
        )
        # the click is kept by its callback, before the page's run: a run it interrupts cannot lose it
        st.button(
            "Find them", key="wm_find_unmatched", on_click=lambda: st.session_state.update(wm_unmatched=(path, op_id, batch))
        )
        if st.session_state.get("wm_unmatched") != (path, op_id, batch):
            return
        with guard():
            report = with_progress(
                "Reading the state and its change feed",
                lambda: cached(path, event_log).unmatched(op_id, batch, None, join_type, event_log).report,
                "unmatched",
            )
            counts = report.counts()
            metric_row([(VERDICT_STYLE.get(v, ("", v))[1], f"{n:,} keys", None) for v, n in sorted(counts.items())])
            for note in report.notes:
                st.caption(note)
            if not report.keys:
                st.success("No unmatched key at this batch.")
                return
            links = [
                "why_missing?" + urllib.parse.urlencode({"checkpoint": path, "operator": op_id, "batch": batch, "key": k.key})
                for k in report.keys
            ]
            table = {
                report.key_name: [k.key for k in report.keys],
                "verdict": [VERDICT_STYLE.get(k.verdict, ("", k.verdict))[1] for k in report.keys],
                "side": [k.side or "" for k in report.keys],
                "batch": [k.batch for k in report.keys],
                "window": [k.detail for k in report.keys],
                "diagnosis": links,
            }
            for column in ("side", "window"):  # a join has no windows, an aggregation no sides
                if not any(table[column]):
                    del table[column]
            st.dataframe(
                table,
                column_config={
                    "batch": st.column_config.NumberColumn("batch", help="evicted in, or entered state in", format="%d"),
                    "diagnosis": st.column_config.LinkColumn("diagnosis", display_text="why?"),
                },
                hide_index=True,
                width="stretch",
                height=grid_height(len(report.keys), 420),
            )
            engine_caption(report.engine, None)


def verdict_heading(r: Any) -> None:
    """A key, what reached the output and the root cause (the whole query), or its operator's verdict;
    then the explanation, its first sentence the answer."""
    side = f" · {r.side_text}" if r.side else ""
    if r.matched_as and r.matched_as != "as text":
        side += f" · matched {r.matched_as}"
    if r.whole_query:
        color, label = OUTCOME_STYLE.get(r.outcome, ("gray", r.outcome))
        badges = f":{color}-badge[{label}]"
        if r.cause and r.cause != r.outcome:
            at = r.cause_at or {}
            where = "".join(
                f" · {word} {at[k]}" for k, word in (("operator_id", "operator"), ("batch_id", "batch")) if at.get(k) is not None
            )
            badges += f" :{CAUSE_COLOR.get(r.cause, 'red')}-badge[{CAUSE_WORDS.get(r.cause, r.cause)}{where}]"
        vcolor, vlabel = VERDICT_STYLE.get(r.verdict, ("gray", r.verdict))
        if r.verdict == "evicted" and any(o.kind != "written" for o in r.fate.outputs):
            vcolor, vlabel = "green", "Emitted"  # an aggregation's window the watermark closed: its result went out
        st.markdown(f"#### `{shown_key(r.key)}` &nbsp; {badges}")
        if r.fate.headline:
            st.markdown(f"**{_escape(r.fate.headline)}**")
        if r.fate.summary:
            st.write(r.fate.summary)
        st.caption(f"Operator {r.verdict_operator}'s verdict: :{vcolor}-badge[{vlabel}{side}]")
        st.write(r.verdict_explanation)
        return
    color, label = VERDICT_STYLE.get(r.verdict, ("gray", r.verdict))
    st.markdown(f"#### `{shown_key(r.key)}` &nbsp; :{color}-badge[{label}{side}]")
    st.write(r.explanation)


def _escape(text: str) -> str:
    """Text shown as Markdown as it is (a key's characters are not markup)."""
    return "".join("\\" + c if c in "\\`*_{}[]<>()#+-.!|~$" else c for c in text)


def show_verdicts(results: list[Any]) -> None:
    """The verdicts alone, while the look-alike keys are searched for (no widget: the whole answer replaces them)."""
    for r in results:
        with st.container(border=True):
            verdict_heading(r)
            if r.looks_for_near_misses:
                st.caption("Looking for look-alike keys in the other partitions…")


def across_pipeline(root: str) -> None:
    """Given a root of several checkpoints: each key followed through every query, from the first one's
    input through each table to the last (``statelens.why_missing_across``). Linkable:
    ?checkpoint=ROOT&key=K&key_field=F&data_root=DIR&input_root=DIR"""
    params = st.query_params
    if "wm_keys" not in st.session_state and params.get_all("key"):
        st.session_state["wm_keys"] = "\n".join(params.get_all("key"))
        st.session_state["wm_key_column"] = params.get("key_field", "")
        st.session_state["wm_autorun"] = True
    st.session_state.setdefault("wm_data_root", params.get("data_root") or sample_data_root(root))
    st.session_state.setdefault("wm_across_input", params.get("input_root") or sample_pipeline_inputs(root))
    st.caption(
        f"{root} holds several checkpoints: each key is followed through every query under it, from the first "
        "query's input through each table to the last. The answer is the pipeline's end's; each query's own follows."
    )
    row = st.columns(3)
    key_field = (
        row[0]
        .text_input(
            "Key column",
            key="wm_key_column",
            help="The column the keys are values of, in every query's input. Where a query renamed it, name that query's "
            "column too: user,gold=customer.",
        )
        .strip()
    )
    data_root = (
        row[1]
        .text_input(
            "Tables' folder (optional)",
            key="wm_data_root",
            help="Where the tables are now, when not where the logs say: a Declarative Pipeline's warehouse, a copy.",
        )
        .strip()
    )
    input_root = (
        row[2]
        .text_input(
            "Input folder, if the files moved (optional)",
            key="wm_across_input",
            help="The folder holding the first query's source folders now.",
        )
        .strip()
    )
    keys_text = st.text_area("Keys (one per line)", key="wm_keys", height=110, placeholder="ord-42\nord-43")
    keys = tuple(k for k in (line.strip() for line in keys_text.splitlines()) if k)
    clicked = st.button("Diagnose", type="primary", key="wm_run")
    run = (clicked and bool(keys)) or st.session_state.pop("wm_autorun", False)
    if clicked and not keys:
        st.warning("Type at least one key above, one per line.")
    event_log = current_event_log()
    typed = (root, keys, key_field, data_root, input_root, event_log)
    if not (run or (keys and st.session_state.get("wm_last") == typed)):
        return
    st.session_state["wm_last"] = typed
    st.query_params.update(
        {"checkpoint": root, "key": list(keys)}
        | {k: v for k, v in (("key_field", key_field), ("data_root", data_root), ("input_root", input_root)) if v}
    )
    answers = with_progress(
        "Following each key through every query's input, state and table",
        lambda: why_missing_across_cached(root, keys, key_field or None, event_log, data_root or None, input_root or None),
        "why-missing-across",
    )
    pipeline = pipeline_cached(root, data_root or None, event_log)
    st.caption("Each key across " + " → ".join(pipeline.order()) + " · this page's URL links to this diagnosis")
    for a in answers:
        with st.container(border=True):
            color, label = OUTCOME_STYLE.get(a.outcome, ("gray", a.outcome.replace("_", " ")))
            where = "".join(f" · {'in' if word == 'query' else word} {value}" for word, value in a.place())
            badges = f":{color}-badge[{label}]"
            if a.cause and a.cause != a.outcome:
                badges += (
                    f" :{CAUSE_COLOR.get(a.cause, 'red')}-badge[{CAUSE_WORDS.get(a.cause, a.cause.replace('_', ' '))}{where}]"
                )
            elif where:
                badges += f" :gray-badge[{where[3:]}]"
            st.markdown(f"#### `{shown_key(a.key)}` &nbsp; {badges}")
            st.markdown(f"**{_escape(a.headline)}**")
            hops = pd.DataFrame(
                {
                    "query": [h.query for h in a.hops],
                    "outcome": [OUTCOME_STYLE.get(h.outcome, ("", h.outcome.replace("_", " ")))[1] for h in a.hops],
                    "cause": [CAUSE_WORDS.get(h.cause, h.cause.replace("_", " ")) if h.cause else "" for h in a.hops],
                    "asked by": [h.key_field or "every key column" for h in a.hops],
                    "its answer": [h.headline for h in a.hops],
                    "diagnosis": [
                        "./why_missing?"
                        + urllib.parse.urlencode(
                            {"checkpoint": pipeline.query(h.query).checkpoint, "key": a.key}
                            | ({"key_field": h.key_field} if h.key_field else {})
                        )
                        for h in a.hops
                    ],
                }
            )
            st.dataframe(
                hops,
                hide_index=True,
                width="stretch",
                column_config={"diagnosis": st.column_config.LinkColumn("diagnosis", display_text="this query's answer")},
            )


st.header("Why is my key missing?")  # the same words as its navigation entry
pipeline_at = pipeline_root()  # a root holding several checkpoints: its pipeline's questions
if pipeline_at:
    with guard():
        across_pipeline(pipeline_at)
info: Any = None if pipeline_at else checkpoint_info()
if info is not None and info.operators and info.committed_batches:
    params = st.query_params
    if "wm_keys" not in st.session_state and params.get_all("key"):
        st.session_state["wm_keys"] = "\n".join(params.get_all("key"))
        st.session_state["wm_event_time"] = params.get("event_time", "")
        st.session_state["wm_autorun"] = True  # a linked diagnosis opens with its answer
    ops = [WHOLE, *(o.operator_id for o in info.operators)]
    default_op = WHOLE
    linked = params.get("operator")
    if linked is not None and linked.isdigit() and int(linked) in ops:
        default_op = int(linked)
    elif linked is not None and "wm_op" not in st.session_state:  # said once, when the link opens
        st.warning(
            f"The link asks for operator {linked}, which this checkpoint does not have (its operators: "
            f"{', '.join(operator_label(info, o) for o in ops[1:])}): showing the whole query."
        )
    committed = [b.batch_id for b in info.committed_batches][::-1]
    # a link chooses the batch, key field and join type too, once, when it opens
    linked_batch = params.get("batch", "")
    if "wm_batch" not in st.session_state and linked_batch.isdigit() and int(linked_batch) in committed:
        st.session_state["wm_batch"] = int(linked_batch)
    linked_join = params.get("join_type")
    if "wm_join_type" not in st.session_state and linked_join and linked_join in JOIN_TYPES:
        st.session_state["wm_join_type"] = linked_join

    row = controls()
    op_id = fitted_select(
        row,
        "Operator",
        ops,
        lambda i: "The whole query: input → output" if i == WHOLE else operator_label(info, i),
        index=ops.index(default_op),
        key="wm_op",
        help="The whole query follows each input record of the key through every operator to the output; an "
        "operator gives that operator's verdict alone.",
    )
    whole = op_id == WHOLE
    event_log = current_event_log()
    fields: dict[str, str] = {}
    with guard():
        fields = (
            {
                ANY_KEY_COLUMN: "Every key column",
                **{c: c for c in cached(info.path, event_log).key_columns(event_log)},
            }
            if whole
            else cached(info.path).key_fields(op_id)
        )
    linked = params.get("key_field")  # a field, or the join's column it reads as
    linked_field = next((f for f, shown in fields.items() if linked in (f, shown) or shown == f"{f} ({linked})"), None)
    if "wm_field" not in st.session_state and linked_field:
        st.session_state["wm_field"] = linked_field
    key_field = fitted_select(
        row,
        "Key field",
        list(fields),
        lambda f: fields.get(f, f),
        help="The input column your keys are values of (the whole query), or the field of the operator's state key "
        "(a join's key fields, field0 ..., are named by the value column that equals them on every row read).",
        key="wm_field",
    )
    key_field = key_field or None  # the whole query's first choice: each operator's key column
    batch = fitted_select(row, "Batch", committed, key="wm_batch", help="Diagnose the state as of this batch.")
    op_info = info.operator(op_id)
    join_type = None
    if (op_info is not None and op_info.is_join) or (whole and any(o.is_join for o in info.operators)):
        join_type = st.selectbox(
            "Join type",
            list(JOIN_TYPES),
            format_func=lambda j: JOIN_TYPES[j],
            key="wm_join_type",
            help="The checkpoint does not record the join type; the query's event log (sidebar) does, in its plan. "
            "Outer joins emit a preserved side's evicted unmatched rows with nulls; inner joins drop them.",
        )
    for inferred in [o for o in info.operators if o.inferred_from and (whole or o is op_info)]:
        st.caption(
            f"No operator metadata (written before Spark 4.0): operator {inferred.operator_id}'s kind was inferred from "
            f"{inferred.inferred_from}."
        )
    if op_info is not None and op_info.lists_unmatched:
        _never_matched(info.path, op_id, batch, join_type, event_log)
    input_root = sink = None
    if whole:
        with st.expander("Input and output files", expanded=False):
            input_root = (
                st.text_input(
                    "Input folder, if the files moved",
                    value=sample_input_root(info.path),
                    key=f"wm_input_root_{info.path}",
                    help="The checkpoint lists every file each batch read. When they are no longer where the query read "
                    "them, give the folder holding the sources' folders now.",
                ).strip()
                or None
            )
            sink = (
                st.text_input(
                    "File sink folder, if it moved",
                    value=sample_sink(info.path),
                    key=f"wm_sink_{info.path}",
                    help="A file sink's folder (with _spark_metadata): the key's rows are found in the files each batch wrote. "
                    "By default the one the event log's progress names.",
                ).strip()
                or None
            )
    keys_text = st.text_area(
        "Keys that never showed up in the output (one per line)", key="wm_keys", height=110, placeholder="ord-42\nord-43"
    )
    keys = [k for k in (line.strip() for line in keys_text.splitlines()) if k]
    event_time_text = st.text_input(
        "Event time of the missing record (optional)",
        key="wm_event_time",
        placeholder="2026-01-01T00:07:15 (UTC), or epoch milliseconds",
        help="When the record that never showed up happened. State Lens finds the first batch whose watermark makes "
        "such a record late and, with the query's event log (sidebar), whether the operator dropped late rows then: "
        "only that evidence gives the verdict Dropped as late." + ("" if event_log else " No event log is given in the sidebar."),
    ).strip()
    # never disabled: a key typed but not yet sent (the box still has focus) arrives with the click
    clicked = st.button("Diagnose", type="primary", key="wm_run")
    run = (clicked and bool(keys)) or st.session_state.pop("wm_autorun", False)
    if clicked and not keys:
        st.warning("Type at least one key above, one per line.")
    typed = (info.path, op_id, batch, key_field, tuple(keys), join_type, event_time_text, event_log, input_root, sink)
    if run or (keys and st.session_state.get("wm_last") == typed):
        st.session_state["wm_last"] = typed
        link = {"checkpoint": info.path, "batch": str(batch), "key": keys} | ({} if whole else {"operator": str(op_id)})
        if whole:
            st.query_params.pop("operator", None)
        optional = {"key_field": key_field, "join_type": join_type, "event_time": event_time_text}
        link |= {k: v for k, v in optional.items() if v}
        st.query_params.update(link)
        for k in optional.keys() - link.keys():
            st.query_params.pop(k, None)
        with guard():
            event_time = parse_event_time(event_time_text) if event_time_text else None
            question = statelens.KeyQuestion(
                tuple(keys),
                key_field,
                event_log,
                input_root if whole else None,
                sink if whole else None,
                None if whole else op_id,
                batch,
                join_type,
                event_time,
            )

            def ask(near_misses: bool) -> statelens.Answers:
                return why_missing_cached(info.path, question.but(near_misses=near_misses))

            # the verdicts first; the search for look-alike keys in the other partitions follows
            answers = with_progress(
                "Reading the input files, the state and its history" if whole else "Reading the state and its history",
                lambda: ask(False),
                "why-missing",
            )
            if any(r.looks_for_near_misses for r in answers.report.results):
                first = st.empty()
                with first.container():
                    show_verdicts(answers.report.results)
                answers = with_progress("Looking for look-alike keys in the other partitions", lambda: ask(True), "near-misses")
                first.empty()
            report = answers.report.operator_report  # its operator, join and history: the first key's, in the whole query
            searched = answers.report.input_search if isinstance(answers, statelens.QueryAnswers) else None
            heading = answers.heading()
            st.caption(
                (heading[0].upper() + heading[1:] + f" · verdicts of operator {report.operator_id} ({report.operator_name}) · ")
                if isinstance(answers, statelens.QueryAnswers)
                else heading[0].upper()
                + heading[1:]
                + " · "
                + (
                    f"history: batches {report.history[0]}–{report.history[1]} ({report.history_method})"
                    if report.history
                    else "history not searched"
                )
                + (
                    f" · join type {report.join_type.replace('_', ' ')}, from the event log's plan"
                    if report.join_plan and join_type is None and report.join_type
                    else ""
                )
                + " · this page's URL links to this diagnosis"
            )
            input_note = searched.note() if searched is not None else None  # the query's, said once
            if input_note:
                st.caption(f"Input: {input_note}")
            engine_caption(report.engine, "; ".join(report.engine_notes) or None)
            check_with_spark(report.engine, lambda: opened(info.path).check_answers(answers, question), "why-missing")
            if report.lateness is not None and report.lateness.late_from_batch is not None:
                late = report.lateness
                st.caption(
                    f"A record with that event time is late from batch {late.late_from_batch} on"
                    + (
                        f"; rows dropped by the watermark from then on: {sum(late.drops.values()):,}"
                        if late.progress_read
                        else " (no event log given: whether rows were dropped is unknown)"
                    )
                )
            if report.history_error:
                st.warning(
                    f"The key's history could not be read, so keys not in state get the verdict Unknown. {report.history_error}"
                )
            for r in answers.report.results:
                with st.container(border=True):
                    verdict_heading(r)
                    if r.whole_query:
                        render_fate(r.fate, current_tz(), input_note)
                    if r.near_misses and not (r.whole_query and r.fate.near_fates):  # else shown with their own fate
                        st.markdown(
                            "**Near misses:** "
                            + ", ".join(
                                f"`{visible(n['key'])}` ({n['reason']}; {n['where']}, {n['seen']})" for n in r.near_misses
                            )
                        )
                    tabs = st.tabs(["Evidence", "Timeline", "SQL"])
                    with tabs[0]:
                        if r.evidence:
                            shown = display_rows(r.evidence, current_tz())
                            st.dataframe(shown, hide_index=True, width="stretch", height=grid_height(len(shown)))
                        else:
                            st.caption("No row holds this key in any searched batch.")
                    with tabs[1]:
                        if r.timeline:
                            timeline = key_timeline_figure(r, report.watermarks, current_tz())
                            chart(timeline, key=f"tl-{r.key}")
                            chart_downloads(f"timeline-{r.key}", timeline, None, f"dl-tl-{r.key}")
                        else:
                            st.caption("The key has no history in the searched batches.")
                    with tabs[2]:
                        st.caption("DuckDB queries over the SQL page's tables that reproduce the evidence.")
                        for q in r.queries:
                            st.markdown(f"*{q['title']}*")
                            st.code(q["sql"], language="sql")
elif info is not None:
    st.info("This checkpoint has no committed state to diagnose.")
