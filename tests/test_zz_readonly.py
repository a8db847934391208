"""Runs last: after every other test read the samples (CLI, Spark, AppTest, the browser),
bundled and compatibility samples alike, not one file under any sample checkpoint was created, changed or removed.

In a parallel run this file's worker may finish before the others: the controller makes the same
check after all of them (``conftest.pytest_sessionfinish``)."""

from __future__ import annotations

from support import BASELINE, changed_samples


def test_sample_checkpoints_are_byte_for_byte_unchanged() -> None:
    assert BASELINE, "the baseline is taken at session start"
    assert len(BASELINE) > 40, "bundled and compatibility samples"
    assert changed_samples() == []
