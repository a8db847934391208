"""Checkpoints read from where they are now, not where they were written.

transformWithState's operator metadata records absolute schema paths, and so does a join's in
join state format 3; State Lens reads a moved copy (Spark through an overlay in its scratch
folder, the native reader from the files themselves) and never writes into the checkpoint.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import golden
import pytest

from statelens.analysis.core.model import sources_of
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers import engine, state_reader
from support import COMPAT, SAMPLE_NAMES, SAMPLES, tree_checksums

RECORDED = re.compile(r"file:(/[^\"]*?)(/state/\d+/_stateSchema/)")


def row_counts(path: str, which: str = "auto") -> dict[str, int]:
    before = engine.current()
    engine.configure(which)
    try:
        info = read_checkpoint(path)
        out = {}
        for op in info.operators:
            for src in sources_of(op):
                table, _ = state_reader.read_state(path, src, info=info)
                out[src.describe()] = table.num_rows
        return out
    finally:
        engine.configure(before)


def relocate_metadata(cp: Path, new_root: str) -> int:
    """Point the copy's transformWithState metadata at ``new_root``, as if it had been written there."""
    changed = 0
    for meta in cp.glob("state/*/_metadata/v2/*"):
        if meta.name.startswith("."):
            continue
        text = meta.read_text()
        new = RECORDED.sub(lambda m: f"file:{new_root}{m.group(2)}", text)
        if new != text:
            meta.write_text(new)
            changed += 1
    for crc in cp.glob("state/*/_metadata/v2/.*.crc"):
        crc.unlink()
    return changed


@pytest.mark.parametrize("name", [*SAMPLE_NAMES, "compat/4.3.0/tws_ttl", "compat/4.3.0/join_state_format_3"])
def test_every_sample_reads_the_same_from_a_copy_elsewhere(name: str, tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    original = SAMPLES / name
    copy = tmp_path / "elsewhere" / "cp"
    shutil.copytree(original, copy)
    before = tree_checksums(copy)
    info = read_checkpoint(str(original))
    last = info.committed_batches[-1].batch_id
    spark_read = golden.state_at_batches(name)  # Spark's reads of the original, where it was written
    assert row_counts(str(copy)) == {src: len(by_batch.get(last, [])) for src, by_batch in spark_read.items()}
    assert tree_checksums(copy) == before


WRITTEN_ELSEWHERE = [
    (SAMPLES / "transform_with_state", None),
    (COMPAT / "4.3.0" / "tws_ttl", None),
    (COMPAT / "4.3.0" / "join_state_format_3", "left-keyWithIndexToValue"),
]


@pytest.mark.parametrize(("sample", "store"), WRITTEN_ELSEWHERE, ids=lambda v: getattr(v, "name", v))
def test_written_elsewhere(sample: Path, store: str | None, tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    """Its metadata points at /prod/...: Spark's reader alone fails, State Lens reads it with either
    engine, bytes unchanged."""
    cp = tmp_path / "laptop" / "moved"
    shutil.copytree(sample, cp)
    assert relocate_metadata(cp, "/prod/checkpoints/moved") > 0
    before = tree_checksums(cp)
    info = read_checkpoint(str(cp))
    var = next((v for v in info.operators[0].state_variables if not v.startswith("$")), None)
    option = ("storeName", store) if store else ("stateVarName", var)
    with pytest.raises(Exception, match=r"(?i)FileNotFound|does not exist|PATH_NOT_FOUND|No such file"):
        spark.read.format("statestore").option(*option).load(str(cp)).collect()
    expected = row_counts(str(sample), engine.SPARK)
    assert row_counts(str(cp), engine.SPARK) == expected
    assert row_counts(str(cp), engine.NATIVE) == expected
    assert tree_checksums(cp) == before
