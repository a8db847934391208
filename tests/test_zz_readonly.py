"""Runs last: after every other test read the samples (CLI, Spark, AppTest, the browser),
bundled and compatibility samples alike, not one file under any sample checkpoint was created, changed or removed."""

from __future__ import annotations

from support import BASELINE, sample_checksums


def test_sample_checkpoints_are_byte_for_byte_unchanged() -> None:
    assert BASELINE, "the baseline is taken at session start"
    now = sample_checksums()
    assert len(BASELINE) > 40, "bundled and compatibility samples"
    assert set(now) == set(BASELINE), "sample checkpoints created or removed"
    for name in BASELINE:
        before, after = BASELINE[name], now[name]
        assert sorted(set(after) - set(before)) == [], f"{name}: files created"
        assert sorted(set(before) - set(after)) == [], f"{name}: files removed"
        assert [p for p in before if before[p] != after[p]] == [], f"{name}: files changed"
