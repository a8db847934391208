"""Spark's own reads of every sample, kept as golden files (a developer tool, run with the samples).

For each bundled and compatibility sample, the pinned PySpark's State Data Source reads every
store, join side, transformWithState variable and the registered timers at every committed
batch, every change feed over the whole retained range, and the ``state-metadata`` table. They are
written to ``golden/<sample>.jsonl.gz``, one JSON line per read, each row serialised as the
equality test compares rows, so ``tests/test_native_equality.py`` checks the native reader against
Spark's reads in seconds; it still reads a few samples (one per version and per state format)
through Spark live, and checks those golden files against the live reads.

Each file starts with a header naming the Spark version that read it and a fingerprint of the
sample's files (names and sizes): a sample regenerated without its golden file is caught.

    python sample_checkpoints/generate.py --golden [sample ...]   # every sample by default
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytz

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
ROOT = HERE.parent


def _text(value: Any) -> str:
    """``repr``, with a UTC time written as pyarrow up to 22 wrote it (``tzinfo=<UTC>``, pytz's):
    pyarrow 26 gives ``zoneinfo``'s UTC, the same instant, and the stored golden rows keep one form."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None and value.utcoffset() == dt.timedelta(0):
        return repr(value.replace(tzinfo=pytz.utc))
    return repr(value)


def row_text(row: dict[str, Any]) -> str:
    """A row as the equality test compares it (multisets of these)."""
    return json.dumps(row, sort_keys=True, default=_text)


def golden_path(name: str) -> Path:
    return GOLDEN / (name.replace("/", "__") + ".jsonl.gz")


def fingerprint(checkpoint: Path) -> str:
    """The sample's files (relative names and sizes): changes whenever the sample is regenerated."""
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(checkpoint)):
        dirs.sort()
        for f in sorted(files):
            p = Path(dirpath) / f
            h.update(f"{p.relative_to(checkpoint)}\0{p.stat().st_size}\n".encode())
    return h.hexdigest()[:20]


def sample_names() -> list[str]:
    bundled = sorted(p.name for p in HERE.iterdir() if (p / "offsets").is_dir())
    compat = sorted(
        f"compat/{v.name}/{p.name}"
        for v in (HERE / "compat").iterdir()
        if v.is_dir()
        for p in v.iterdir()
        if (p / "offsets").is_dir()
    )
    return bundled + compat


def spark_at_batches(info: Any, src: Any, batches: list[int]) -> Any:
    """Spark's rows of a source at each batch, in one job (a union with the batch as a column)."""
    from pyspark.sql import functions as F

    from statelens.spark_io.readers.state_reader import state_frame, to_arrow

    frames = [state_frame(info.path, src, {"batchId": str(b)}).withColumn("_batch", F.lit(b)) for b in batches]
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    return to_arrow(df, src.describe())


def spark_feed(info: Any, src: Any, start: int, end: int) -> Any:
    """Spark's change feed: one read per piece around offline repartition batches (Spark fails across one)."""
    from statelens.spark_io.readers.state_reader import change_frame, to_arrow

    return to_arrow(change_frame(info, src, start, end), src.describe())


def spark_reads(name: str, at: Callable[[Any, Any, list[int]], list[int]] | None = None) -> list[dict[str, Any]]:
    """Every read of one sample through Spark, as golden lines (without the header): each store's
    state at every committed batch, or at the batches ``at(info, source, batches)`` picks."""
    from statelens.analysis.core.model import sources_of
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.readers import state_reader

    info = read_checkpoint(str(HERE / name))
    out: list[dict[str, Any]] = [
        {
            "read": "state-metadata",
            "rows": sorted(row_text(r) for r in state_reader.read_state_metadata(info.path, info).to_pylist()),
        }
    ]
    batches = [b.batch_id for b in info.committed_batches]
    for op in info.operators:
        for src in sources_of(op):
            chosen = at(info, src, batches) if at else batches
            table = spark_at_batches(info, src, chosen)
            out.append(
                {
                    "read": "state",
                    "source": src.describe(),
                    "batches": chosen,
                    "rows": sorted(row_text(r) for r in table.to_pylist()),
                }
            )
            if src.has_change_feed and state_reader.has_change_feed(info, op.operator_id):
                feed = spark_feed(info, src, batches[0], batches[-1])
                out.append(
                    {
                        "read": "changes",
                        "source": src.describe(),
                        "batches": [batches[0], batches[-1]],
                        "rows": sorted(row_text(r) for r in feed.to_pylist()),
                    }
                )
    return out


def write(name: str) -> Path:
    import pyspark

    header = {"sample": name, "spark": pyspark.__version__, "fingerprint": fingerprint(HERE / name)}
    lines = [header, *spark_reads(name)]
    GOLDEN.mkdir(exist_ok=True)
    path = golden_path(name)
    data = "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()
    path.write_bytes(gzip.compress(data, 9, mtime=0))
    return path


def read(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, reads) of a sample's golden file."""
    lines = [json.loads(x) for x in gzip.decompress(golden_path(name).read_bytes()).decode().splitlines() if x]
    return lines[0], lines[1:]


def state_at_batches(name: str) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Source -> batch -> the rows Spark read of it at that batch, from the sample's golden file."""
    _, reads = read(name)
    out: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for r in reads:
        if r["read"] == "state":
            by_batch = out.setdefault(r["source"], {})
            for text in r["rows"]:
                row = json.loads(text)
                by_batch.setdefault(row.pop("_batch"), []).append(row)
    return out


def rows_per_batch(name: str) -> dict[str, Counter[int]]:
    """Source -> batch -> how many rows Spark read of it at that batch (one per key; a map state's
    per user key, a list state's per element), from the sample's golden file."""
    return {
        source: Counter({b: len(rows) for b, rows in by_batch.items()}) for source, by_batch in state_at_batches(name).items()
    }


def main(names: list[str]) -> int:
    for p in (str(ROOT), str(HERE)):
        if p not in sys.path:
            sys.path.insert(0, p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    for name in names or sample_names():
        path = write(name)
        print(f"{name}: {path.relative_to(HERE)} ({path.stat().st_size:,} bytes)", flush=True)
    return 0
