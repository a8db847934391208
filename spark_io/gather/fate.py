"""'Why is key X missing from the output': the whole query, from the input files to the sink.

The default of why-missing when no operator is chosen. It reads what the answer needs and hands
it to the pure parts: the query's event log (its plan: sources, filters, watermarks and operators;
its progress: late and duplicate rows per operator and batch; the sink), the files each batch read
searched for the key and, on demand, for the records a stage needs besides (``spark_io.gather.inputs``),
each operator's state (``state_access``: native or Spark), and a file sink's files. ``analysis.fate``
follows each record and derives the key's outcome and root cause (the answer's first sentence), and
``analysis.fate.answer`` composes the answer: each key's fate with the verdict of the last operator
whose key holds the key column below it (a key whose look-alikes were followed says first what became
of them). Nothing here decides an answer.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from statelens.analysis.core.errors import InvalidInput, option
from statelens.analysis.core.model import CheckpointInfo, require_committed, require_state
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.core.state_access import StateAccess
from statelens.analysis.fate import (
    WRITTEN,
    FateWalk,
    Output,
    RecordFinder,
    StaticLookup,
    answer,
    group_text,
    search_columns,
    sink_columns,
    static_lookups,
)
from statelens.analysis.fate.key import SinkSearch, python_columns
from statelens.analysis.inputs.records import ANY, InputSearch
from statelens.analysis.plan.query_plan import operator_watermarks
from statelens.analysis.plan.static_table import StaticTable
from statelens.analysis.runs.progress import ProgressLog
from statelens.spark_io.gather.arrivals import arrivals_for
from statelens.spark_io.gather.inputs import (
    NOT_TOLD,
    Listing,
    RecordSearch,
    batch_windows,
    foreign_sink,
    listed_files,
    search_inputs,
    search_sink,
    sink_column_names,
    sink_folder,
)
from statelens.spark_io.gather.static import static_tables
from statelens.spark_io.runtime.engine_choice import reads_natively

MAX_NEAR = 3  # look-alikes of a key followed as keys of their own


def _walk(
    info: CheckpointInfo,
    access: StateAccess,
    progress: ProgressLog | None,
    join_type: str | None,
    keys: tuple[str, ...] = (),
    finder: RecordFinder | None = None,
    static: dict[int, StaticTable] | None = None,
    source_names: dict[int, str] | None = None,
    assume_renames: bool = False,
) -> FateWalk:
    plan = progress.query_plan() if progress is not None else None
    planned = progress.operator_watermarks() if progress is not None else {}
    marks, _ = operator_watermarks(
        [(b.batch_id, b.watermark_ms) for b in info.batches], planned, [o.operator_id for o in info.operators]
    )
    tz = (progress.time_zone if progress else None) or "UTC"
    return FateWalk(
        access,
        info,
        plan,
        marks,
        progress.drops() if progress is not None else None,
        join_type,
        source_names or {},
        tz,
        planned=planned,
        asked=keys,
        finder=finder,
        duplicates=progress.duplicates() if progress is not None else None,
        static_tables=static,
        assume_renames=assume_renames,
        strict=bool(os.environ.get("STATELENS_DEBUG")),
    )


def key_columns_of(info: CheckpointInfo, access: StateAccess, progress: ProgressLog | None) -> list[str]:
    """The input columns a key may be in, the likeliest first (``analysis.fate.search_columns``)."""
    return search_columns(_walk(info, access, progress, None), None)


def why_missing_whole(
    info: CheckpointInfo,
    q: KeyQuestion,
    access: StateAccess,
    progress: ProgressLog | None = None,
    searched: InputSearch | None = None,
) -> answer.QueryAnswer:
    """Each key of ``q`` followed from the input files through every operator to the output.
    ``progress``: ``q.event_log`` read; ``searched``: the input search of an earlier answer to the
    same question (the app asks without near misses first), used instead of reading the input files again."""
    keys, key_field, join_type = list(q.keys), q.key_field, q.join_type
    input_root, sink, near_misses = q.input_roots, q.sink, q.near_misses
    require_state(info)
    require_committed(info)
    walk = _walk(info, access, progress, join_type, tuple(keys))  # the operators' key columns, to search the input for
    plan, tz = walk.plan, walk.tz
    why_not = None
    listing: Listing | None = None
    finder: RecordSearch | None = None
    static: dict[int, StaticTable] = {}

    def format_of(source: str) -> str | None:  # the plan's Scan says how the files are read
        return next((s.format for s in plan.scans.values() if f"/{source}/" in s.location), None) if plan else None

    search = InputSearch()
    if not reads_natively(info.path):
        why_not = "The input of a checkpoint read through Spark is not searched: the answer comes from the state."
    else:
        listing = listed_files(info, input_root, format_of)
        finder = RecordSearch(listing)
        static = static_tables(plan, set(listing[2].values()), input_root)
        walk = _walk(info, access, progress, join_type, tuple(keys), finder, static)
    columns = search_columns(walk, None)
    lookups = static_lookups(walk, key_field) if listing is not None else []
    if key_field is not None:  # a column a static table gives is searched through the table alone
        columns = [] if lookups and not search_columns(walk, key_field) else _key_columns(walk, key_field, columns, listing)
    if listing is not None:
        if searched is not None:  # an earlier answer's whole search: the static tables' records in it already
            search = searched
        else:
            search = search_inputs(
                info,
                keys if columns or not lookups else [],
                columns,
                input_root,
                format_of,
                tz,
                listing=listing,
                any_column=plan is None and key_field is None,
            )
            if lookups:
                search = _through_static(search, lookups, keys, info, input_root, format_of, tz, listing)
        if not search.files_listed:
            why_not = search.note() or "The query reads no file source: its input cannot be searched here."
    walk = _walk(
        info, access, progress, join_type, tuple(keys), finder, static, search.sources, plan is None and key_field is None
    )
    search = dataclasses.replace(search, computed_by=python_columns(walk))
    walk.prefetch(search.records)
    windows = batch_windows(info.path) if sink else None  # a folder the user names may be a foreachBatch's
    written, sink_searched = _written(
        info, progress, sink, keys, sink_columns(walk, [*columns, *([key_field] if key_field else [])]), windows
    )
    downstream = _sink_rows(progress, sink, windows) if sink_searched else None
    held = sink_column_names(sink_folder(progress.sink if progress else None, sink) or "") if sink_searched else None
    fates = answer.key_fates(keys, search, walk, written, why_not, sink_searched, downstream, held)
    # the verdict of the last operator whose key holds the key's column, as one operator's diagnosis gives it
    chosen, reports = answer.verdicts(
        walk, fates, q, access, progress, lambda asked, op_id: arrivals_for(info, asked, op_id, q.event_time_ms, progress)
    )
    if near_misses and listing is not None:
        in_state = [next(r for r in reports[chosen[k]].results if r.key == k) for k in keys]
        wanted = answer.look_alikes(in_state, fates, MAX_NEAR)
        near_keys = sorted({n for found in wanted.values() for n, _, _ in found})
        if near_keys:  # each followed as a key of its own: was that spelling written, when, and where
            near_search = search_inputs(info, near_keys, columns, (), format_of, tz, listing=listing)
            near_written, near_sink = _written(info, progress, sink, near_keys, sink_columns(walk, columns), windows)
            fates = answer.with_near_fates(fates, wanted, near_search, walk, near_written, near_sink)
    plan_from = progress.location if plan is not None and progress is not None else None
    return answer.answer(q, fates, chosen, reports, search, plan_from)


def _through_static(
    search: InputSearch,
    lookups: list[StaticLookup],
    keys: list[str],
    info: CheckpointInfo,
    input_root: tuple[str, ...],
    format_of: Callable[[str], str | None],
    tz: str,
    listing: Listing,
) -> InputSearch:
    """The records of keys a static table gives (regions of countries): the input searched for the
    values the table maps to each key, each record then answering that key."""
    for lk in lookups:
        wanted = {k: lk.values(k) for k in keys}
        values = sorted({v for vs in wanted.values() for v in vs})
        if not values:
            continue
        found = search_inputs(info, values, [lk.stream_column], input_root, format_of, tz, listing=listing)
        for k, vs in wanted.items():
            search.records += [dataclasses.replace(r, key=k, via=lk.via(r.key, k)) for r in found.records if r.key in vs]
            if not any(r.key == k for r in search.records):  # in files beside those read, that no batch read
                search.unread += [dataclasses.replace(r, key=k, via=lk.via(r.key, k)) for r in found.unread if r.key in vs]
        search.unread_why.update(found.unread_why)
        search.unlisted_why += [w for w in found.unlisted_why if w not in search.unlisted_why]
        for source, col in found.columns.items():
            if col != ANY:
                search.columns[source] = f"{col} (through {lk.table.label})"
    search.records.sort(key=lambda r: (r.key, r.batch_id if r.batch_id is not None else -1, r.source_index, r.file, r.row))
    return search


def _key_columns(walk: FateWalk, key_field: str, columns: list[str], listing: Listing | None) -> list[str]:
    """The columns a key given with ``--key-field`` is searched in: that state key field's column, or
    that input column; a field that is neither is refused, naming the ones there are."""
    of_field = search_columns(walk, key_field)
    if of_field:
        return of_field
    inputs: set[str] = set()
    if walk.plan is not None:
        inputs |= {c for s in walk.plan.scans.values() for c in s.columns}
    if listing is not None:
        inputs |= RecordSearch(listing).columns()
    if key_field in inputs:
        return [key_field]
    known = ", ".join(columns) or "none"
    others = ", ".join(sorted(inputs - set(columns)))
    raise InvalidInput(
        f"The query has no field '{key_field}': no state key field or input column is named so. Its key columns: {known}"
        + (f"; its other input columns: {others}" if others else "")
        + (
            ". If it comes from a static table or an expression, give the query's event log (its plan shows where)"
            if walk.plan is None
            else ""
        )
        + "."
    )


def _written(
    info: CheckpointInfo,
    progress: ProgressLog | None,
    given: str | None,
    keys: list[str],
    columns: list[str],
    windows: dict[int, tuple[int, int]] | None = None,
) -> tuple[dict[str, list[Output]], bool]:
    """The keys' rows in the file sink's files, and whether a sink was searched. A sink the user gave
    that cannot be searched is refused in one line (never silently unused); the one the progress names
    is then not searched, and the answer says what the state tells."""
    folder = sink_folder(progress.sink if progress else None, given)
    if not folder:
        return {}, False
    other = foreign_sink(info, folder)
    if other and given:
        raise InvalidInput(f"{option('--sink', given, python=repr(given))} is not this query's output: {other}.")
    if other:
        return {}, False
    rows, why = search_sink(folder, keys, columns, windows if given else None)
    if why and given:
        raise InvalidInput(f"{option('--sink', given, python=repr(given))} cannot be searched: {why}.")
    if why:
        return {}, False

    def output(r: Any) -> Output:
        values = {c: x for c, x in r.values.items() if c not in ("filename", "file_row_number")}
        texts = frozenset(v for v in values.values() if isinstance(v, str))
        return Output(None, group_text(values), r.batch_id, WRITTEN, _written_where(r), file=r.file, texts=texts)

    return {k: [output(r) for r in v] for k, v in rows.items()}, True


def _written_where(r: Any) -> str:
    """Where a sink row is, and how its batch was told."""
    if r.batch_id is None:
        why = "neither the folder's layout nor the file's time tells which" if r.told == NOT_TOLD else "its log was compacted"
        return f"{r.file} (written in one of batches {r.batches[0]}-{r.batches[1]}: {why})"
    return f"{r.file} (its batch told from {r.told})" if r.told else r.file


def _sink_rows(progress: ProgressLog | None, given: str | None, windows: dict[int, tuple[int, int]] | None = None) -> SinkSearch:
    """The file sink's rows by a column's values (each search made once)."""
    folder = sink_folder(progress.sink if progress else None, given) or ""
    done: dict[tuple[str, tuple[str, ...]], list[tuple[int | None, str, dict[str, Any]]]] = {}

    def rows(column: str, values: list[str]) -> list[tuple[int | None, str, dict[str, Any]]]:
        k = (column, tuple(values))
        if k not in done:
            found, why = search_sink(folder, values, [column], windows if given else None)
            done[k] = [(r.batch_id, r.file, r.values) for v in found.values() for r in v] if not why else []
        return done[k]

    return rows
