"""A key's fate drawn as a flow (the why-missing page's whole-query answer): input -> each operator ->
output, one row per input record and one per window or row that reached the output or still waits,
coloured by outcome, each step's evidence (the input line, the state rows, the progress figures)
a click away."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from analysis.core.export import display_rows
from analysis.fate import (
    CONDITION_NOT_MET,
    DROPPED_AS_DUPLICATE,
    DROPPED_AS_LATE,
    EMITTED,
    EMITTED_UNMATCHED,
    EVICTED_UNMATCHED,
    FILTERED,
    MATCHED,
    NOT_FOUND,
    PASSED,
    REACHED_STATE,
    UNKNOWN,
    WRITTEN,
    KeyFate,
    fmt_time,
)
from views.common import grid_height

STEP_STYLE = {
    PASSED: ("blue", "passed"),
    REACHED_STATE: ("green", "reached state"),
    DROPPED_AS_LATE: ("red", "dropped as late"),
    DROPPED_AS_DUPLICATE: ("orange", "dropped as a duplicate"),
    CONDITION_NOT_MET: ("red", "join condition not met"),
    FILTERED: ("violet", "filtered out"),
    NOT_FOUND: ("red", "not in state"),
    EVICTED_UNMATCHED: ("red", "evicted unmatched"),
    UNKNOWN: ("gray", "unknown: a read failed"),
}
OUTPUT_STYLE = {
    EMITTED: ("green", "Emitted"),
    MATCHED: ("green", "Matched (joined)"),
    EMITTED_UNMATCHED: ("green", "Emitted null-padded"),
    WRITTEN: ("green", "Written by the sink"),
}
NEAR_STYLE = {
    "written": ("green", "written"),
    "partly_written": ("orange", "partly written"),
    "written_unmatched": ("violet", "written null-padded"),
    "waiting": ("orange", "waiting"),
    "lost": ("red", "lost"),
    "never_in_input": ("gray", "never in the input"),
    "unknown": ("gray", "unknown"),
}


def visible(text: Any) -> str:
    """A key as typed, with its whitespace shown: ``'␠user-8'`` (spaces ␠, tabs ⇥, new lines ⏎)."""
    s = str(text)
    return "'" + s.replace(" ", "␠").replace("\t", "⇥").replace("\n", "⏎") + "'"


def _badge(style: tuple[str, str], suffix: str = "") -> str:
    color, label = style
    return f":{color}-badge[{label}{suffix}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_fate(fate: KeyFate, tz: str) -> None:
    """The flow of one key: a table of its records through the operators, then its outputs and what waits."""
    if fate.input_note:
        st.caption(f"Input: {fate.input_note}")
    if fate.cause is not None and fate.cause.record is not None:
        c = fate.cause
        rec = c.record
        assert rec is not None
        where = f"{rec.source} · batch {rec.batch_id} · {rec.file_name}, row {rec.row}"
        extra = ""
        if c.earlier is not None:
            extra = f" · the record it repeated: {c.earlier.file_name}, row {c.earlier.row} (batch {c.earlier.batch_id})"
        if c.predicate:
            extra = f" · the filter as Spark printed it: `{c.predicate}`"
        st.caption(f"Where: {where}{extra}")
    if fate.records:
        ops = sorted({s.operator_id for r in fate.records for s in r.steps if s.operator_id >= 0}, reverse=True)
        head = ["input record", *(f"operator {o}" for o in ops), "output"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        groups = {o.group: o for o in fate.outputs}
        waits = {w.group: w for w in fate.waiting}
        for rf in fate.records:
            rec = rf.record
            when = fmt_time(rf.event_time_ms)[:-4] if rf.event_time_ms is not None else "no event time"
            cells = [_cell(f"{rec.source} · batch {rec.batch_id} · {rec.file_name}:{rec.row} · {when}")]
            for o in ops:
                steps = [s for s in rf.steps if s.operator_id == o]
                cells.append(
                    " ".join(
                        _badge(STEP_STYLE.get(s.outcome, ("gray", s.outcome)), f" · b{s.batch}" if s.batch is not None else "")
                        for s in steps
                    )
                    or "·"
                )
            last = rf.steps[-1] if rf.steps else None
            out = ""
            if last is not None and last.group:
                for g in last.group.split("; "):
                    if g in groups:
                        o_ = groups[g]
                        out += _badge(OUTPUT_STYLE.get(o_.kind, ("green", o_.kind)), f" · b{o_.batch_id}") + " "
                    elif g in waits:
                        out += _badge(("orange", "waiting")) + " "
            cells.append(out.strip() or "·")
            lines.append("| " + " | ".join(cells) + " |")
        st.markdown("\n".join(lines))
    if fate.outputs or fate.waiting:
        rows = [
            {
                "window or row": o.group,
                "what": OUTPUT_STYLE.get(o.kind, ("", o.kind))[1],
                "batch": o.batch_id,
                "where": f"operator {o.operator_id}" if o.operator_id is not None else "the sink's files",
                "detail": o.detail,
            }
            for o in fate.outputs
        ] + [
            {
                "window or row": w.group,
                "what": "Waiting",
                "batch": None,
                "where": f"operator {w.operator_id}",
                "detail": w.detail,
            }
            for w in fate.waiting
        ]
        st.dataframe(
            rows,
            hide_index=True,
            width="stretch",
            height=grid_height(len(rows), 420),
            column_config={"batch": st.column_config.NumberColumn("batch", format="%d")},
        )
    if fate.near_fates:
        lines = []
        for n in fate.near_fates:
            batches = f" in batch {', '.join(map(str, n.batches))}" if n.batches else ""
            files = f" · {', '.join(n.files[:2])}" if n.files else ""
            lines.append(
                f"- `{visible(n.key)}` ({n.reason}; {n.where}): {_badge(NEAR_STYLE.get(n.outcome, ('gray', n.outcome)), batches)}{files}"
            )
        st.markdown("**Near misses, followed as keys of their own:**\n" + "\n".join(lines))
    elif fate.near:
        st.markdown(
            "**Near misses in the input:** "
            + ", ".join(f"`{visible(r.values.get(r.column))}` ({r.near}; {r.source}, {r.where()})" for r in fate.near[:8])
        )
    for note in fate.notes:
        st.caption(note)
    if fate.records:
        with st.expander(f"Each record's evidence ({len(fate.records)})"):
            for i, rf in enumerate(fate.records):
                st.markdown(f"**{rf.record.source} · batch {rf.record.batch_id} · {rf.record.file_name}, row {rf.record.row}**")
                st.code(json.dumps(rf.record.values, default=str, ensure_ascii=False), language="json", wrap_lines=True)
                for s in rf.steps:
                    st.markdown(f"{_badge(STEP_STYLE.get(s.outcome, ('gray', s.outcome)))} {s.detail}")
                    if s.evidence:
                        shown = display_rows(s.evidence, tz)
                        st.dataframe(
                            shown,
                            hide_index=True,
                            width="stretch",
                            height=grid_height(len(shown)),
                            key=f"ev-{fate.key}-{i}-{s.operator_id}-{s.batch}",
                        )
