"""A key's fate drawn as a flow, outside Streamlit: the words and colours of each step and output
(the app's flow page uses them as badges), and the flow as HTML (notebooks, the health report).

One row per input record: input record -> each operator -> output, each step coloured by outcome
with its batch; then the windows or rows that reached the output or still wait, the near misses,
the notes, and each record's evidence folded away.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Any

from statelens.analysis.fate import (
    CONDITION_NOT_MET,
    DROPPED_AS_DUPLICATE,
    DROPPED_AS_LATE,
    EMITTED,
    EMITTED_UNMATCHED,
    EVICTED_UNMATCHED,
    FILTERED,
    MATCHED,
    NO_STATIC_MATCH,
    NOT_FOUND,
    PASSED,
    REACHED,
    REACHED_STATE,
    UNKNOWN,
    WRITTEN,
    KeyFate,
    Step,
    fmt_time,
)

# (colour, words): colours are Streamlit's badge colours; COLOURS gives them for HTML
STEP_STYLE = {
    PASSED: ("blue", "passed"),
    REACHED_STATE: ("green", "reached state"),
    DROPPED_AS_LATE: ("red", "dropped as late"),
    DROPPED_AS_DUPLICATE: ("orange", "dropped as a duplicate"),
    CONDITION_NOT_MET: ("red", "join condition not met"),
    FILTERED: ("violet", "filtered out"),
    NOT_FOUND: ("red", "not in state"),
    EVICTED_UNMATCHED: ("red", "evicted unmatched"),
    NO_STATIC_MATCH: ("violet", "no row in the static table"),
    UNKNOWN: ("gray", "unknown"),
}
OUTPUT_STYLE = {
    EMITTED: ("green", "Emitted"),
    MATCHED: ("green", "Matched (joined)"),
    EMITTED_UNMATCHED: ("green", "Emitted null-padded"),
    WRITTEN: ("green", "Written by the sink"),
}
NEAR_STYLE = {  # a key's outcome (analysis.fate.OUTCOMES)
    "written": ("green", "written"),
    "partly_written": ("orange", "partly written"),
    "written_unmatched": ("violet", "written null-padded"),
    "waiting": ("orange", "waiting"),
    "lost": ("red", "lost"),
    "never_in_input": ("gray", "never in the input"),
    "unknown": ("gray", "unknown"),
}
COLOURS = {  # text, background
    "blue": ("#1c4f8f", "#dbe9fb"),
    "green": ("#1d6b34", "#dcf3e2"),
    "red": ("#9b1c1c", "#fbe0e0"),
    "orange": ("#8a4b08", "#fdebd3"),
    "violet": ("#5b2a86", "#ece0f8"),
    "gray": ("#444", "#e8e8e8"),
}


def visible(text: Any) -> str:
    """A key as typed, with its whitespace shown: ``'␠user-8'`` (spaces ␠, tabs ⇥, new lines ⏎)."""
    s = str(text)
    return "'" + s.replace(" ", "␠").replace("\t", "⇥").replace("\n", "⏎") + "'"


def shown_key(key: Any) -> str:
    """A key where a user reads it (a badge, a heading): as it is, unless whitespace at its ends or inside
    would vanish when drawn; then ``visible`` (``'␠user-8'``)."""
    s = "" if key is None else str(key)
    return visible(s) if s != s.strip() or any(c in s for c in "\t\n\r") else s


def badge_html(style: tuple[str, str], suffix: str = "") -> str:
    fg, bg = COLOURS.get(style[0], COLOURS["gray"])
    return (
        f"<span class='sl-badge' style='color:{fg};background:{bg};border-radius:.6em;padding:0 .45em;"
        f"white-space:nowrap'>{html.escape(style[1] + suffix)}</span>"
    )


def table_html(head: list[str], rows: list[list[str]]) -> str:
    """A table of cells that are HTML already (escape text before)."""
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='sl-table'><tr>{th}</tr>{body}</table>"


def where_text(fate: KeyFate, code: Callable[[str], str] = str) -> str:
    """Where the root cause happened, to the record (and the record it repeated, the filter as printed,
    passed through ``code``)."""
    c = fate.cause
    if c is None or c.record is None:
        return ""
    rec = c.record
    text = f"{rec.source} · batch {rec.batch_id} · {rec.file_name}, row {rec.row}"
    if c.earlier is not None:
        text += f" · the record it repeated: {c.earlier.file_name}, row {c.earlier.row} (batch {c.earlier.batch_id})"
    if c.predicate:
        text += f" · the filter as Spark printed it: {code(c.predicate)}"
    return text


def step_style(s: Step) -> tuple[str, str]:
    """A step's colour and words, with its batch."""
    colour, words = STEP_STYLE.get(s.outcome, ("gray", s.outcome))
    return colour, words if s.batch is None else f"{words} · b{s.batch}"


def flow_rows(fate: KeyFate) -> tuple[list[int], list[tuple[str, list[list[tuple[str, str]]], list[tuple[str, str]]]]]:
    """The flow's operators (nearest the input first) and, per record: its label, per operator the
    styled steps, and its styled outputs. The app and the HTML draw the same cells."""
    ops = sorted({s.operator_id for r in fate.records for s in r.steps if s.operator_id >= 0}, reverse=True)
    groups = {o.group: o for o in fate.outputs}
    waits = {w.group for w in fate.waiting}
    rows = []
    for rf in fate.records:
        rec = rf.record
        when = fmt_time(rf.event_time_ms)[:-4] if rf.event_time_ms is not None else "no event time"
        label = f"{rec.source} · batch {rec.batch_id} · {rec.file_name}:{rec.row} · {when}"
        cells = [[step_style(s) for s in rf.steps if s.operator_id == o] for o in ops]
        out: list[tuple[str, str]] = []
        last = rf.steps[-1] if rf.steps else None
        if last is not None and last.outcome == DROPPED_AS_DUPLICATE:  # its group's output is its original's
            if rf.contribution == REACHED:
                out.append(("green", "written as the record it repeats"))
            rows.append((label, cells, out))
            continue
        for g in last.group.split("; ") if last is not None and last.group else []:
            if g in groups:
                colour, words = OUTPUT_STYLE.get(groups[g].kind, ("green", groups[g].kind))
                out.append((colour, f"{words} · b{groups[g].batch_id}"))
            elif g in waits:
                out.append(("orange", "waiting"))
        rows.append((label, cells, out))
    return ops, rows


def outputs_rows(fate: KeyFate) -> list[dict[str, Any]]:
    """The windows or rows that reached the output, then what still waits."""
    return [
        {
            "window or row": o.group,
            "what": OUTPUT_STYLE.get(o.kind, ("", o.kind))[1],
            "batch": o.batch_id,
            "where": f"operator {o.operator_id}" if o.operator_id is not None else "the sink's files",
            "detail": o.detail,
        }
        for o in fate.outputs
    ] + [
        {"window or row": w.group, "what": "Waiting", "batch": None, "where": f"operator {w.operator_id}", "detail": w.detail}
        for w in fate.waiting
    ]


def near_rows(fate: KeyFate) -> list[tuple[str, str, str, tuple[str, str], str, str]]:
    """Each near miss followed as a key of its own: (the key as shown, why it is near, where it
    was seen, its outcome's badge style, " in batch ..." and " · " its first two files, or "")."""
    return [
        (
            visible(n.key),
            n.reason,
            n.where,
            NEAR_STYLE.get(n.outcome, ("gray", n.outcome)),
            f" in batch {', '.join(map(str, n.batches))}" if n.batches else "",
            f" · {', '.join(n.files[:2])}" if n.files else "",
        )
        for n in fate.near_fates
    ]


def fate_html(fate: KeyFate) -> str:
    """The whole flow of one key as an HTML fragment."""
    e = html.escape
    parts = []
    if fate.input_note:
        parts.append(f"<p class='sl-sub'>Input: {e(fate.input_note)}</p>")
    where = where_text(fate)
    if where:
        parts.append(f"<p class='sl-sub'>Where: {e(where)}</p>")
    ops, rows = flow_rows(fate)
    if rows:
        head = ["input record", *(f"operator {o}" for o in ops), "output"]
        cells = [
            [
                e(label),
                *(" ".join(badge_html(s) for s in steps) or "·" for steps in per_op),
                " ".join(badge_html(s) for s in out) or "·",
            ]
            for label, per_op, out in rows
        ]
        parts.append(table_html(head, cells))
    outs = outputs_rows(fate)
    if outs:
        parts.append(
            table_html(
                list(outs[0]),
                [[e("" if v is None else str(v)) for v in r.values()] for r in outs],
            )
        )
    if fate.near_fates:
        items = [
            f"<li><code>{e(key)}</code> ({e(reason)}; {e(where)}): {badge_html(style, batches)}{e(files)}</li>"
            for key, reason, where, style, batches, files in near_rows(fate)
        ]
        parts.append(f"<p><b>Near misses, followed as keys of their own:</b></p><ul>{''.join(items)}</ul>")
    elif fate.near:
        parts.append(
            "<p><b>Near misses in the input:</b> "
            + ", ".join(
                f"<code>{e(visible(r.values.get(r.column)))}</code> ({e(str(r.near))}; {e(r.source)}, {e(r.where())})"
                for r in fate.near[:8]
            )
            + "</p>"
        )
    parts += [f"<p class='sl-sub'>{e(n)}</p>" for n in fate.notes]
    if fate.records:
        evidence = []
        for rf in fate.records:
            rec = rf.record
            evidence.append(
                f"<p><b>{e(f'{rec.source} · batch {rec.batch_id} · {rec.file_name}, row {rec.row}')}</b></p>"
                f"<pre>{e(json.dumps(rec.values, default=str, ensure_ascii=False))}</pre>"
            )
            for s in rf.steps:
                evidence.append(f"<p>{badge_html(STEP_STYLE.get(s.outcome, ('gray', s.outcome)))} {e(s.detail)}</p>")
                if s.evidence:
                    cols = list(dict.fromkeys(c for row in s.evidence for c in row))
                    evidence.append(
                        table_html([e(c) for c in cols], [[e(str(row.get(c, ""))) for c in cols] for row in s.evidence[:50]])
                    )
        parts.append(f"<details><summary>Each record's evidence ({len(fate.records)})</summary>{''.join(evidence)}</details>")
    return "".join(parts)
