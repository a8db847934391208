"""Every feature on every sample checkpoint, then a byte-for-byte comparison of the checkpoint:
nothing under it was created, changed or removed."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from statelens import cli
from statelens.analysis.charts.report import checkup_report
from statelens.analysis.core.model import sources_of
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.checkup import checkup
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.gather.workspace import Workspace
from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint
from statelens.spark_io.readers.state_reader import read_changes, read_state, read_state_metadata
from support import SAMPLE_NAMES, SAMPLES, tree_checksums

pytestmark = pytest.mark.usefixtures("spark")


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_every_feature_leaves_the_checkpoint_untouched(name: str, tmp_path: Path) -> None:
    path = str(SAMPLES / name)
    before = tree_checksums(SAMPLES / name)
    info = read_checkpoint(path)
    list_state_files(path)
    read_state_metadata(path, info)
    for op in info.operators:  # the state browser: every view, and its change feed
        for src in sources_of(op):
            read_state(path, src, info=info)
            if src.has_change_feed:
                read_changes(path, src, info=info)
    ws = Workspace(path, spill_dir=str(tmp_path / "spill"), row_budget=50)  # SQL, with a spill
    first = next(iter(ws.specs.values()))
    ws.execute(f'SELECT count(*) FROM "{first.name}"')
    why_missing(path, KeyQuestion(("no-such-key", "ord-1", "user-1")))  # why-missing
    c = checkup(path)  # skew, growth, configuration
    (tmp_path / "report.html").write_text(checkup_report(c.info, c.skews, c.growth.stores, c.findings))
    for chart, ext in (("skew", "csv"), ("growth", "html"), ("watermark", "csv")):  # exports
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli.main(["export", path, "--chart", chart, "--out", str(tmp_path / f"{chart}.{ext}")]) == 0
    assert tree_checksums(SAMPLES / name) == before
