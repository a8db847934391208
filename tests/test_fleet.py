"""Every checkpoint under a folder at a glance (``statelens ls``, the app's Checkpoints page): one row
per checkpoint, its figures equal to the checkpoint's own overview and doctor; read from listings
and log files only."""

from __future__ import annotations

import json
import subprocess
import sys

from streamlit.testing.v1 import AppTest

from statelens.analysis.checkpoint.overview import overview_dict
from statelens.spark_io.gather.fleet import find_checkpoints, list_checkpoints
from statelens.spark_io.logs.checkpoint import doctor, list_state_files, read_checkpoint
from support import ROOT, SAMPLE_NAMES, SAMPLES


def test_ls_finds_every_bundled_sample_with_the_figures_of_its_overview_and_doctor() -> None:
    rows = {r.path: r for r in list_checkpoints(str(SAMPLES), now_ms=1_800_000_000_000)}
    for name in SAMPLE_NAMES:
        path = str(SAMPLES / name)
        row = rows[path]
        info = read_checkpoint(path)
        report = doctor(path, now_ms=1_800_000_000_000)
        ov = overview_dict(info)
        assert row.error is None and row.query_id == ov["query_id"], name
        assert row.last_committed == info.last_committed and row.uncommitted == len(info.uncommitted), name
        assert row.operators == [op["operator_name"] for op in ov["operators"]], name
        assert row.state_bytes == sum(f.size for f in list_state_files(path)) > 0, name
        assert row.problems == len(report.problems), name
        severities = [p.severity for p in report.problems]
        assert row.worst_severity == (min(severities, key=["error", "warning", "info"].index) if severities else None), name
    # the compatibility samples and restart cases are checkpoints too; nothing under a checkpoint is
    assert len(rows) == len(find_checkpoints(str(SAMPLES))) > len(SAMPLE_NAMES)
    assert not any(p.startswith(tuple(f"{x}/" for x in rows)) for p in rows)
    broken = next(r for p, r in rows.items() if p.endswith("delta_missing/checkpoint"))
    assert broken.worst_severity == "error" and "cannot be rebuilt" in (broken.worst or "")


def test_ls_cli_json_and_one_line_for_a_missing_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "ls", str(SAMPLES / "compat" / "4.3.0"), "--json", "--sort", "path"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0 and not r.stderr, r.stderr
    data = json.loads(r.stdout)
    paths = [c["path"] for c in data["checkpoints"]]
    assert paths == sorted(paths) and len(paths) == len(
        [p for p in (SAMPLES / "compat" / "4.3.0").iterdir() if (p / "commits").is_dir()]
    )
    uncommitted = next(c for c in data["checkpoints"] if c["path"].endswith("/uncommitted"))
    assert uncommitted["uncommitted"] == 1 and uncommitted["worst_severity"] == "info"
    r = subprocess.run([sys.executable, str(ROOT / "cli.py"), "ls", str(tmp_path / "nope")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr


def test_the_checkpoints_page_lists_every_sample_with_a_link_to_open_it() -> None:
    at = AppTest.from_file(str(ROOT / "views" / "checkpoints.py"), default_timeout=300)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    frame = at.dataframe[0].value
    assert len(frame) == len(find_checkpoints(str(SAMPLES)))
    row = frame[frame["checkpoint"] == str(SAMPLES / "join_rocksdb")].iloc[0]
    assert row["open"].startswith("./?checkpoint=") and row["state bytes"] > 0 and row["doctor"] == "ok"
    at.text_input(key="fleet_prefix").set_value("/nonexistent/folder").run()
    assert at.error and "does not exist" in at.error[0].value
