"""'Why is key X missing from the output': the whole query, from the input files to the sink.

The default of why-missing when no operator is chosen. It reads what the answer needs and hands
it to the pure parts: the query's event log (its plan: sources, filters, watermarks and operators;
its progress: late rows per operator and batch; the sink), the files each batch read searched for
the key (``spark_io.gather.inputs``), each operator's state (``state_access``: native or Spark), and a
file sink's files. ``analysis.fate`` follows each record; the verdict of the last operator whose
key holds the key column (``analysis.diagnose``) stays the key's verdict unless the fate decides it
(every record dropped as late; never in the input).
"""

from __future__ import annotations

from analysis import diagnose
from analysis import why_missing as wm
from analysis.diagnose import WhyMissingReport
from analysis.errors import InvalidInput
from analysis.fate import NEVER_IN_INPUT, WRITTEN, FateWalk, KeyFate, Output, group_text, key_fate, search_columns
from analysis.inputs import InputSearch
from analysis.model import CheckpointInfo, default_operator, require_state
from analysis.progress import ProgressLog
from analysis.query_plan import operator_watermarks
from analysis.state_access import StateAccess
from spark_io.gather.arrivals import arrivals_for
from spark_io.gather.inputs import search_inputs, search_sink, sink_folder
from spark_io.logs.checkpoint import read_checkpoint
from spark_io.runtime.engine_choice import reads_natively


def _walk(
    info: CheckpointInfo, access: StateAccess, progress: ProgressLog | None, join_type: str | None, keys: tuple[str, ...] = ()
) -> FateWalk:
    plan = progress.query_plan() if progress is not None else None
    planned = progress.operator_watermarks() if progress is not None else {}
    marks, _ = operator_watermarks(
        [(b.batch_id, b.watermark_ms) for b in info.batches], planned, [o.operator_id for o in info.operators]
    )
    tz = (progress.time_zone if progress else None) or "UTC"
    drops = progress.drops() if progress is not None else None
    return FateWalk(access, info, plan, marks, drops, join_type, {}, tz, planned=planned, asked=keys)


def key_columns_of(info: CheckpointInfo, access: StateAccess, progress: ProgressLog | None) -> list[str]:
    """The input columns a key may be in, the likeliest first (``analysis.fate.search_columns``)."""
    return search_columns(_walk(info, access, progress, None), None)


def why_missing_whole(
    path: str,
    keys: list[str],
    access: StateAccess,
    batch_id: int | None = None,
    key_field: str | None = None,
    info: CheckpointInfo | None = None,
    join_type: str | None = None,
    event_time_ms: int | None = None,
    progress: ProgressLog | None = None,
    input_root: str | None = None,
    sink: str | None = None,
    near_misses: bool = True,
    searched: InputSearch | None = None,
) -> WhyMissingReport:
    """``searched``: the input search of an earlier answer to the same question (the app asks
    without near misses first), used instead of reading the input files again."""
    info = info or read_checkpoint(path)
    keys = list(dict.fromkeys(keys))
    if not keys or not all(isinstance(k, str) for k in keys):
        raise InvalidInput("Give at least one key (one per line in the app, or as arguments to the CLI).")
    if join_type is not None and join_type not in wm.JOIN_TYPES:
        raise InvalidInput(f"Unknown join type '{join_type}': use one of {', '.join(wm.JOIN_TYPES)}.")
    require_state(info)
    walk = _walk(info, access, progress, join_type, tuple(keys))
    plan, tz = walk.plan, walk.tz
    columns = search_columns(walk, key_field)
    why_not = None
    if not reads_natively(info.path):
        search = InputSearch()
        why_not = "The input of a checkpoint read through Spark is not searched: the answer comes from the state."
    else:

        def format_of(source: str) -> str | None:  # the plan's Scan says how the files are read
            return next((s.format for s in plan.scans.values() if f"/{source}/" in s.location), None) if plan else None

        search = searched or search_inputs(info, keys, columns, input_root, format_of, tz)
        if not search.files_listed:
            why_not = search.note() or "The query reads no file source: its input cannot be searched here."
    walk.source_names = search.sources
    walk.prefetch(search.records)
    written = _written(progress, sink, keys, columns)
    fates = {k: key_fate(k, search, walk, written.get(k, []), why_not) for k in keys}
    # the verdict of the last operator whose key holds the key's column, as one operator's diagnosis gives it
    reports: dict[tuple[int, str | None], WhyMissingReport] = {}
    chosen: dict[str, tuple[int, str | None]] = {}
    for k in keys:
        chosen[k] = _verdict_operator(walk, fates[k], key_field, info)
    for op_id, field_name in dict.fromkeys(chosen.values()):
        asked = [k for k in keys if chosen[k] == (op_id, field_name)]
        arrivals = arrivals_for(info, asked, op_id, event_time_ms, progress)
        reports[(op_id, field_name)] = diagnose.why_missing(
            access, info, asked, op_id, batch_id, field_name, join_type, event_time_ms, progress, arrivals, near_misses
        )
    first = reports[chosen[keys[0]]]
    results = []
    for k in keys:
        d = next(r for r in reports[chosen[k]].results if r.key == k)
        _apply(d, fates[k])
        results.append(d)
    first.results = results
    first.whole_query = True
    first.input_search = search
    first.plan_from = progress.location if plan is not None and progress is not None else None
    return first


def _verdict_operator(walk: FateWalk, fate: KeyFate, key_field: str | None, info: CheckpointInfo) -> tuple[int, str | None]:
    """(operator, key field) whose single-operator verdict the key keeps: the operator nearest the
    output whose key holds the column the key was found in (else the default operator)."""
    column = fate.records[0].record.column if fate.records else None
    for op in sorted(info.operators, key=lambda o: o.operator_id):
        view = walk.view(op)
        for side in view.keys:
            found = view.lookup(side)
            if found and column and (found[1].source_column or found[1].name) == column:
                return op.operator_id, found[0]
    # found in a column no operator is keyed by: the default operator's own key field (the fate tells the rest)
    return default_operator(info).operator_id, None if column else key_field


def _written(progress: ProgressLog | None, given: str | None, keys: list[str], columns: list[str]) -> dict[str, list[Output]]:
    folder = sink_folder(progress.sink if progress else None, given)
    if not folder:
        return {}
    rows, why = search_sink(folder, keys, columns)
    if why:
        return {}
    return {
        k: [
            Output(
                None,
                group_text(r.values),
                r.batch_id,
                WRITTEN,
                f"{r.file}" + ("" if r.batch_id is not None else f" (written in one of batches {r.batches[0]}-{r.batches[1]})"),
            )
            for r in v
        ]
        for k, v in rows.items()
    }


def _apply(d: wm.KeyDiagnosis, fate: KeyFate) -> None:
    """The fate on one key's single-operator diagnosis: its verdict where the fate decides it, the cause."""
    d.fate = fate
    d.reason = fate.reason
    if fate.verdict == NEVER_IN_INPUT and d.verdict != wm.NEVER_IN_STATE:
        # the key is in the state but no input column holds it: the operator's key is computed (an
        # expression of the input), so its records were not found: the state's verdict stands
        fate.verdict = None
        fate.notes.append(
            "No input column holds this key as it is, yet the state does: the operator's key is computed from the input "
            "(an expression), so its records were not found; the verdict is the state's."
        )
        fate.summary = ""
    if fate.verdict in (wm.DROPPED_AS_LATE, NEVER_IN_INPUT):
        d.verdict = fate.verdict
        late = [s for r in fate.records for s in r.steps if s.outcome == wm.DROPPED_AS_LATE]
        d.dropped_in_batch = late[0].batch if late else None
        d.explanation = " ".join([fate.summary, *dict.fromkeys(s.detail for s in late)])
    elif fate.summary:
        d.explanation = f"{fate.summary} {d.explanation}"
