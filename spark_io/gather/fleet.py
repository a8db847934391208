"""Every checkpoint under a local folder or a bucket prefix (``statelens ls``, the app's
*Checkpoints* page): found level by level with one listing per folder (a checkpoint's own
folders are not descended into), then per checkpoint its logs, one listing of its state tree and
the doctor on them. Only listings and small log files are read: no state file is downloaded."""

from __future__ import annotations

import contextvars
import time
from concurrent.futures import ThreadPoolExecutor

from statelens.analysis.checkpoint.doctor import examine
from statelens.analysis.core.errors import NotACheckpoint, StateLensError
from statelens.analysis.pipeline.model import SDP_FOLDER, Flow, flow_at, storage_root, with_currency
from statelens.analysis.runs.fleet import CheckpointRow, row_of
from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint
from statelens.spark_io.storage import open_storage

MAX_DEPTH = 8  # folders below the prefix a checkpoint may sit at
SDP_DEPTH = 5  # a Declarative Pipeline's flows sit this much deeper below its _checkpoints
MAX_CHECKPOINTS = 1000
# folders of a table's own bookkeeping, never holding a checkpoint; other folders starting with _ are
# searched (a Declarative Pipeline's _checkpoints, a team's table/_checkpoint)
NOT_CHECKPOINTS = ("_spark_metadata", "_delta_log", "_temporary", "_committed", "_started")
CHECKPOINTS_AT_ONCE = 8


def find_checkpoints(prefix: str) -> list[str]:
    """The folders under ``prefix`` (itself included) holding ``offsets/`` and ``commits/``, sorted.
    At most MAX_DEPTH folders down, not counting a Declarative Pipeline's own layout under its
    ``_checkpoints`` (catalog, schema, table, flow, version)."""
    storage = open_storage(prefix, what="folder")
    found: list[str] = []
    level = [("", MAX_DEPTH)]  # (folder, how many folders further down a checkpoint may be)
    while level and len(found) < MAX_CHECKPOINTS:
        listings = storage.map(storage.listdir, [rel for rel, _ in level])
        below: list[tuple[str, int]] = []
        for (rel, left), entries in zip(level, listings, strict=True):
            dirs = {e.name: e.path for e in entries if e.is_dir}
            if "offsets" in dirs and "commits" in dirs:
                found.append(storage.where(rel))
            elif left > 0:
                below += [
                    (p, left - 1 + (SDP_DEPTH if n == SDP_FOLDER else 0))
                    for n, p in dirs.items()
                    if not n.startswith((".", *NOT_CHECKPOINTS))
                ]
        level = below
    if not found and storage.info("") is None:
        raise NotACheckpoint(f"{prefix} does not exist (or holds nothing): check the path.")
    return sorted(found)[:MAX_CHECKPOINTS]


def checkpoint_row(path: str, now_ms: int) -> CheckpointRow:
    """One row; a checkpoint that cannot be read is a row saying why (the others still answer)."""
    try:
        unreadable: list[str] = []
        files = list_state_files(path, unreadable)  # first: its listing answers the operators' metadata folders
        info = read_checkpoint(path)
        return row_of(info, files, examine(info, files, unreadable, now_ms), now_ms)
    except StateLensError as e:
        return CheckpointRow(path, error=f"{e.title}: {e.message}")


def list_checkpoints(prefix: str, now_ms: int | None = None) -> list[CheckpointRow]:
    """A row for every checkpoint under ``prefix`` (read in parallel on object storage)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    paths = find_checkpoints(prefix)
    if not open_storage(prefix, check=False).remote:
        rows = [checkpoint_row(p, now) for p in paths]
    else:
        # CHECKPOINTS_AT_ONCE checkpoints at a time, each fetching its log files through the shared
        # pool (16 requests at a time, whoever asks)
        with ThreadPoolExecutor(CHECKPOINTS_AT_ONCE, thread_name_prefix="statelens-ls") as pool:
            futures = [pool.submit(contextvars.copy_context().run, checkpoint_row, p, now) for p in paths]
            rows = [f.result() for f in futures]
    flows = flows_of(paths)
    for p, r in zip(paths, rows, strict=True):
        if p in flows:
            r.flow, r.superseded = flows[p].name, not flows[p].current
    return rows


def flows_of(paths: list[str]) -> dict[str, Flow]:
    """The checkpoints of Declarative Pipeline flows among ``paths`` -> their flow, current or superseded
    (among the flows of the same storage root)."""
    found = {p: flow_at(tuple(p.rstrip("/").split("/"))) for p in paths}
    by_root: dict[str, list[str]] = {}
    for p, f in found.items():
        if f is not None:
            by_root.setdefault(storage_root(p), []).append(p)
    out: dict[str, Flow] = {}
    for group in by_root.values():
        marked = with_currency(found[p] for p in group)  # type: ignore[misc]
        out.update({p: marked[found[p]] for p in group})  # type: ignore[index]
    return out
