"""One import name, from any folder: after ``scripts/setup.sh`` (the README's commands run it), ``.venv``
has ``statelens`` (the command) and ``import statelens`` wherever they run, and a folder holding
modules named as this folder's layers (``analysis.py``, ``spark_io.py``, ``commands/``, ``views/``,
``cli.py``) changes nothing. The installed wheel: ``tests/browser/test_browser_install.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, sample

STATELENS = Path(sys.executable).parent / "statelens"


@pytest.fixture
def notebook_folder(tmp_path: Path) -> Path:
    """A user's folder whose own modules are named as this folder's layers: importing any of them fails."""
    (tmp_path / "commands").mkdir()
    (tmp_path / "views").mkdir()
    for name in ("analysis.py", "spark_io.py", "cli.py", "app.py", "commands/__init__.py", "views/__init__.py"):
        (tmp_path / name).write_text(f"raise SystemExit('the folder\\'s own {name} was imported')\n")
    return tmp_path


def test_the_command_answers_from_any_folder_as_from_this_one(notebook_folder: Path) -> None:
    assert STATELENS.is_file(), "scripts/setup.sh installs this folder into .venv (pip install -e .)"
    args = ["why-missing", sample("dedup"), "ev-100", "ev-9999", "--engine", "native", "--json"]
    there = subprocess.run([str(STATELENS), *args], cwd=notebook_folder, capture_output=True, text=True, timeout=300)
    here = subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert there.returncode == 0 and there.stderr == "", there.stderr
    assert there.stdout == here.stdout and '"key": "ev-100"' in there.stdout  # byte for byte


def test_import_statelens_from_any_folder(notebook_folder: Path) -> None:
    code = (
        "import statelens, sys\n"
        f"cp = statelens.open({sample('dedup')!r})\n"
        "print(cp.doctor().to_dict()['restart_batch'], statelens.__file__)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('analysis', 'spark_io', 'commands', 'views', 'cli', 'app')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=notebook_folder, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    said, bare = r.stdout.splitlines()
    restart, where = said.split()
    assert restart == "13"  # dedup: batches 0-12 committed (its offsets and commits logs)
    assert Path(where).resolve() == (ROOT / "statelens" / "__init__.py").resolve()
    assert bare == "[]"  # no module under a bare layer name
