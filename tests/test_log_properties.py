"""Property-based tests of the log reader: generated and corrupted offsets/ and commits/ files
always give a correct answer or one clear CorruptCheckpoint, never a crash."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statelens.analysis.checkpoint.overview import batches_table, overview_dict, summary
from statelens.analysis.core.errors import StateLensError
from statelens.spark_io.logs.checkpoint import MAX_MS, read_checkpoint

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ms = st.integers(min_value=0, max_value=MAX_MS)
anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20), st.lists(st.integers(), max_size=3)
)


def write(root: Path, batches: dict[int, bytes], commits: dict[int, bytes], metadata: bytes | None = b'{"id":"q-1"}') -> None:
    for folder, files in (("offsets", batches), ("commits", commits)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for b, data in files.items():
            (root / folder / str(b)).write_bytes(data)
    if metadata is not None:
        (root / "metadata").write_bytes(metadata)


def offsets_file(wm: int, ts: int) -> bytes:
    return ("v1\n" + json.dumps({"batchWatermarkMs": wm, "batchTimestampMs": ts, "conf": {}}) + '\n{"logOffset":0}').encode()


def read_all(root: Path) -> object:
    info = read_checkpoint(str(root))
    overview_dict(info), batches_table(info), summary(info)  # the views built from it must not crash either
    return info


@SETTINGS
@given(st.dictionaries(st.integers(0, 40), st.tuples(ms, ms), min_size=1, max_size=12), st.data())
def test_valid_logs_read_back_exactly(batches: dict[int, tuple[int, int]], data: st.DataObject) -> None:
    committed = data.draw(st.sets(st.sampled_from(sorted(batches))))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root, {b: offsets_file(*v) for b, v in batches.items()}, {b: b'v1\n{"nextBatchWatermarkMs":0}' for b in committed})
        info = read_all(root)
        assert [(b.batch_id, b.watermark_ms, b.timestamp_ms, b.committed) for b in info.batches] == [  # type: ignore[attr-defined]
            (b, *batches[b], b in committed) for b in sorted(batches)
        ]


def corruptions() -> st.SearchStrategy[bytes]:
    valid = offsets_file(1_000, 2_000)
    return st.one_of(
        st.binary(max_size=200),  # garbage
        st.integers(0, len(valid) - 1).map(lambda n: valid[:n]),  # truncated
        st.text(max_size=60).map(lambda t: ("v1\n" + t).encode()),  # anything after the version line
        st.tuples(st.text(max_size=5), anything).map(
            lambda kv: ("v1\n" + json.dumps({"batchWatermarkMs": kv[1], kv[0]: kv[1]})).encode()
        ),
        st.integers().map(
            lambda n: ("v1\n" + json.dumps({"batchWatermarkMs": n, "batchTimestampMs": -n})).encode()
        ),  # huge, negative
        st.sampled_from(
            [b"v\n{}", b"v99\n{}", b"V1\n{}", b"\xef\xbb\xbfv1\n{}", b"v1\r\n{}\r\n", b"v1\n[]", b"v1\nnull", b'v1\n{"conf": 3}']
        ),
    )


@SETTINGS
@given(corruptions(), st.sampled_from(["offsets", "commits", "metadata"]))
def test_corrupt_files_give_a_clear_error_or_a_correct_answer(bad: bytes, where: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        offsets = {0: offsets_file(0, 10), 1: offsets_file(1_000, 20)}
        commits = {0: b'v1\n{"nextBatchWatermarkMs":1000}', 1: b"v1\n{}"}
        if where == "metadata":
            write(root, offsets, commits, metadata=bad)
        else:
            (offsets if where == "offsets" else commits)[1] = bad
            write(root, offsets, commits)
        try:
            info = read_all(root)
        except StateLensError as e:
            assert e.message and "\n" not in e.title
            if where != "metadata":
                assert f"{where}/1" in e.message  # names the damaged file
            return
        # accepted: then it was read correctly (batch 0 always is)
        assert info.batches[0].watermark_ms == 0 and info.batches[0].timestamp_ms == 10  # type: ignore[attr-defined]


@SETTINGS
@given(st.lists(st.sampled_from(["offsets", "commits", "state", "metadata", "junk", "0", "_metadata"]), max_size=4, unique=True))
def test_odd_folder_shapes(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cp"
        root.mkdir()
        for n in names:
            (root / n).mkdir()
        with contextlib.suppress(StateLensError):
            read_all(root)
        shutil.rmtree(root)
