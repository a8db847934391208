"""Rebuild the state for a changed job (pure): what a replay needs, what it may not do, what it did.

``statelens rebuild`` (``spark_io.preflight.rebuild``) runs the changed query over the input the old
checkpoint's batches read, batch for batch, into a new checkpoint: the old offsets (and the file
sources' logs) as Spark wrote them, the state and commits written by Spark for the changed query.
This module decides from the old checkpoint's logs whether that replay is possible, and shapes
its outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.checkpoint.change import Preflight, Warning
from statelens.analysis.core.model import CheckpointInfo
from statelens.analysis.inputs.sources import SourceBatch

# the sources whose batches Spark reads again from their logged offsets
REPLAYABLE = {
    "file": "the files its log names",
    "kafka": "the topic's offsets, while they are within its retention",
    "rate": "rows computed from the offsets",
    "rate-micro-batch": "rows computed from the offsets",
}


@dataclass
class ReplayedBatch:
    batch: int
    input_rows: int
    seconds: float


@dataclass
class OperatorCount:
    """An operator's state at the last batch: in the old checkpoint, and rebuilt for the changed query
    (``None``: not counted, the operator is not in that checkpoint or not read natively)."""

    operator_id: int
    old_rows: int | None
    old_keys: int | None
    new_rows: int | None
    new_keys: int | None


@dataclass
class Rebuild:
    checkpoint: str
    to: str
    batches: list[ReplayedBatch]
    seconds: float  # the replay, from the first batch's start to the last batch's end
    operators: list[OperatorCount]
    check: Preflight  # the changed job judged on the new checkpoint
    accepted: list[Warning] = field(default_factory=list)  # what differs, accepted by the user
    pending: int | None = None  # the old checkpoint's uncommitted batch, logged for the job to run
    sources: list[str] = field(default_factory=list)  # what was read again, per source
    sink: str | None = None  # the job's file sink folder, when it writes one
    sink_to: str | None = None  # a new folder prepared for it (--sink-to): its log holds every batch before the next

    @property
    def last_batch(self) -> int | None:
        return self.batches[-1].batch if self.batches else None

    @property
    def next_batch(self) -> int:
        return self.pending if self.pending is not None else (self.last_batch if self.last_batch is not None else -1) + 1

    @property
    def next_steps(self) -> list[str]:
        n = self.next_batch
        steps = [
            f"Point the changed job's checkpointLocation at {self.to} and deploy it: it continues at batch {n}, from new "
            "input only."
        ]
        if self.sink_to:
            steps.append(
                f"Point its file sink's path at {self.sink_to}: its _spark_metadata log holds an entry for each of batches "
                f"0-{n - 1} (empty: the old output stays in {self.sink}), as Spark's file sink log needs at its compactions, "
                f"so the changed job writes there past them; readers of {self.sink_to} see its rows from batch {n} on."
            )
        elif self.sink:
            steps.append(
                f"Keep its file sink's path at {self.sink}: its _spark_metadata log holds the old job's batches 0-{n - 1}, and "
                "the changed job continues it past its compactions. Not an empty new folder: Spark's file sink log fails at "
                f"its next compaction without every earlier batch's entry (rebuild with --sink-to NEW_FOLDER to prepare one)."
            )
        steps.append(
            f"Keep {self.checkpoint} until the changed job has run well on the new one: the old job can still go back to it."
        )
        return steps

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "to": self.to,
            "batches": [b.__dict__ for b in self.batches],
            "batches_replayed": len(self.batches),
            "seconds": self.seconds,
            "operators": [o.__dict__ for o in self.operators],
            "check": self.check.to_dict(),
            "accepted": [w.__dict__ for w in self.accepted],
            "pending": self.pending,
            "sources": self.sources,
            "sink": self.sink,
            "sink_to": self.sink_to,
            "next_steps": self.next_steps,
        }


def replay_refusal(info: CheckpointInfo, sources: dict[int, list[SourceBatch]]) -> str | None:
    """Why the old checkpoint's batches cannot be replayed, or None. ``sources``: what each batch read
    (``spark_io.logs.checkpoint.read_source_offsets``)."""
    committed = [b.batch_id for b in info.committed_batches]
    if not committed:
        return f"{info.path} has no committed batch: there is no state to rebuild; start the changed job on a new checkpoint."
    logged = sorted(b.batch_id for b in info.batches)
    if logged[0] != 0:
        return (
            f"{info.path} keeps the offsets of batches {logged[0]}-{logged[-1]} only (older ones were purged): what "
            f"batches 0-{logged[0] - 1} read is not recorded, so their state cannot be rebuilt."
        )
    gaps = sorted(set(range(logged[-1] + 1)) - set(logged))
    if gaps:
        return f"{info.path} has no offsets for batch {gaps[0]}: what it read is not recorded."
    for batch in committed:
        for s in sources.get(batch, []):
            if s.kind not in REPLAYABLE:
                what = f"{s.name} " if s.name else ""
                return (
                    f"Source {s.source} ({what}offsets {str(s.end_offset)[:80]}) cannot be replayed: State Lens replays "
                    f"{', '.join(sorted(REPLAYABLE))} sources."
                )
    return None


def source_notes(sources: dict[int, list[SourceBatch]]) -> list[str]:
    """What the replay reads again, per source."""
    seen: dict[int, SourceBatch] = {}
    files: dict[int, int] = {}
    for batch in sorted(sources):
        for s in sources[batch]:
            seen.setdefault(s.source, s)
            files[s.source] = files.get(s.source, 0) + len(s.files)
    out = []
    for i, s in sorted(seen.items()):
        name = f" {s.name}" if s.name else ""
        count = f": {files[i]:,} files" if s.kind == "file" else ""
        out.append(f"source {i} ({s.kind}{name}){count}, {REPLAYABLE.get(s.kind, 'not replayable')}")
    return out
