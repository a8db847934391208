"""``import statelens`` in a real notebook: the package as pip installs it, run by a real IPython
kernel (nbclient + ipykernel). Each answer's rendered HTML is in the notebook's outputs, and its
``to_dict()`` equals what the CLI prints with ``--json`` for the same question."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from support import SAMPLES, copy_package_sources, sample

CHAIN = sample("dedup_window_chain")
OUTER = sample("outer_join_clicks")
INPUTS = str(SAMPLES / "inputs")
LOGS = str(SAMPLES / "event_logs")
# the same question, asked of the CLI (its flags) and of the API (its keyword arguments)
QUESTIONS: dict[str, tuple[list[str], str]] = {
    "overview": (["overview", CHAIN], f"statelens.open({CHAIN!r}).overview()"),
    "doctor": (["doctor", CHAIN], f"statelens.open({CHAIN!r}).doctor()"),
    "skew": (["skew", OUTER, "--operator", "0"], f"statelens.open({OUTER!r}).skew(operator=0)"),
    "growth": (["growth", CHAIN], f"statelens.open({CHAIN!r}).growth()"),
    "unmatched": (
        ["unmatched", OUTER, "--event-log", f"{LOGS}/outer_join_clicks"],
        f"statelens.open({OUTER!r}).unmatched(event_log={LOGS + '/outer_join_clicks'!r})",
    ),
    "progress": (
        ["progress", CHAIN, "--event-log", f"{LOGS}/dedup_window_chain"],
        f"statelens.open({CHAIN!r}).progress(event_log={LOGS + '/dedup_window_chain'!r})",
    ),
    "why_missing": (
        [
            "why-missing",
            CHAIN,
            "user-late",
            "user-second",
            "user-7",
            "--event-log",
            f"{LOGS}/dedup_window_chain",
            "--input-root",
            f"{INPUTS}/dedup_window_chain",
        ],
        f"statelens.open({CHAIN!r}).why_missing('user-late', 'user-second', 'user-7', event_log={LOGS + '/dedup_window_chain'!r}, "
        f"input_root={INPUTS + '/dedup_window_chain'!r})",
    ),
    "why_missing_outer": (
        ["why-missing", OUTER, "ad-0-1", "ad-0-0", "--operator", "0", "--join-type", "left_outer"],
        f"statelens.open({OUTER!r}).why_missing('ad-0-1', 'ad-0-0', operator=0, join_type='left_outer')",
    ),
    "sql": (
        ["sql", CHAIN, "SELECT key.user_id AS user_id, count(*) AS n FROM op0 GROUP BY 1 ORDER BY 1", "--batch", "9"],
        f"statelens.open({CHAIN!r}).sql('SELECT key.user_id AS user_id, count(*) AS n FROM op0 GROUP BY 1 ORDER BY 1', batch=9)",
    ),
    "repartition": (["repartition", CHAIN, "--partitions", "3"], f"statelens.open({CHAIN!r}).repartition(3)"),
    "ls": (["ls", str(SAMPLES / "pipelines")], f"statelens.ls({str(SAMPLES / 'pipelines')!r})"),
}
VARYING = {"watermark_lag_ms"}  # the time now minus the watermark: it moves between the two runs


def cli_json(args: list[str]) -> Any:
    from statelens import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([*args, "--json"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def without(obj: Any, keys: set[str]) -> Any:
    if isinstance(obj, dict):
        return {k: without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [without(v, keys) for v in obj]
    return obj


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project as ``pip install`` puts it (the package's files only, not this folder)."""
    src, target = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("site")
    copy_package_sources(src)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (target / "statelens" / "__init__.py").is_file()
    return target


@pytest.fixture(scope="module")
def notebook(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """One notebook asking every question, run in a fresh kernel whose working folder is not this
    project: ``statelens`` comes from the installed package."""
    cells = [
        nbformat.v4.new_code_cell(
            f"import sys; sys.path.insert(0, {str(installed)!r})\nimport json, statelens\nprint(statelens.__file__)"
        )
    ]
    for name, (_, call) in QUESTIONS.items():
        cells.append(nbformat.v4.new_code_cell(f"r_{name} = {call}\nr_{name}"))
        cells.append(nbformat.v4.new_code_cell(f"print(json.dumps(r_{name}.to_dict()))"))
    cells += [
        nbformat.v4.new_code_cell("r_why_missing[1].to_pandas()[['key', 'outcome', 'cause']]"),
        nbformat.v4.new_code_cell(
            "try:\n    statelens.open('/no/such/checkpoint')\nexcept statelens.StateLensError as e:\n    print(type(e).__name__, '|', e)"
        ),
        nbformat.v4.new_code_cell(
            f"try:\n    statelens.open({CHAIN!r}).sql('SELECT * FROM op7')\n"
            "except statelens.StateLensError as e:\n    print(type(e).__name__, '|', e)"
        ),
        nbformat.v4.new_code_cell(
            f"try:\n    statelens.open({CHAIN!r}).repartition(0)\n"
            "except statelens.StateLensError as e:\n    print(type(e).__name__, '|', e)"
        ),
        # not caught: Jupyter shows what the exception renders (the one line), not a traceback
        nbformat.v4.new_code_cell("statelens.open('/no/such/checkpoint')", metadata={"tags": ["raises-exception"]}),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    home = tmp_path_factory.mktemp("notebook")
    env_before = os.environ.get("PYTHONPATH")
    os.environ.pop("PYTHONPATH", None)  # the kernel finds statelens where pip put it, nowhere else
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(home)}}).execute()
    finally:
        if env_before is not None:
            os.environ["PYTHONPATH"] = env_before
    nbformat.write(nb, str(home / "statelens.ipynb"))  # a real notebook file, as Jupyter saves it
    return nb


def cell_of(nb: nbformat.NotebookNode, code_start: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.source.startswith(code_start))


def html_of(nb: nbformat.NotebookNode, name: str) -> str:
    outputs = cell_of(nb, f"r_{name} = ").outputs
    return "".join(o["data"].get("text/html", "") for o in outputs if o.get("output_type") == "execute_result")


def printed(nb: nbformat.NotebookNode, code_start: str) -> str:
    return "".join(o.get("text", "") for o in cell_of(nb, code_start).outputs if o.get("name") == "stdout")


def test_the_kernel_imports_the_installed_package(notebook: nbformat.NotebookNode, installed: Path) -> None:
    assert printed(notebook, "import sys").strip() == str(installed / "statelens" / "__init__.py")


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_to_dict_is_the_cli_json(notebook: nbformat.NotebookNode, name: str) -> None:
    args, _ = QUESTIONS[name]
    from_notebook = json.loads(printed(notebook, f"print(json.dumps(r_{name}.to_dict()))"))
    assert without(from_notebook, VARYING) == without(cli_json(args), VARYING)


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_each_answer_draws_itself(notebook: nbformat.NotebookNode, name: str) -> None:
    page = html_of(notebook, name)
    assert page.startswith("<div class='statelens'>") and "</table>" in page, page[:300]


def test_why_missing_html_leads_with_the_answer_then_the_flow(notebook: nbformat.NotebookNode) -> None:
    page = html_of(notebook, "why_missing")
    answers = json.loads(printed(notebook, "print(json.dumps(r_why_missing.to_dict()))"))["results"]
    assert [a["key"] for a in answers] == ["user-late", "user-second", "user-7"]
    positions = []
    for a in answers:
        headline = a["fate"]["headline"]
        assert headline and f"<p><b>{headline}</b></p>".replace("'", "&#x27;") in page
        positions.append(page.index(f"<code>{a['key']}</code>"))
    assert positions == sorted(positions)  # in the order asked
    assert page.count("s verdict:") == len(answers)  # each operator's verdict said once
    # the flow: a record through operator 1 (the dedup) and operator 0 (the windows) to the output
    assert "<th>input record</th><th>operator 1</th><th>operator 0</th><th>output</th>" in page
    assert "Each record&#x27;s evidence" in page or "Each record's evidence" in page


def test_why_missing_one_operator_draws_the_timeline(notebook: nbformat.NotebookNode) -> None:
    page = html_of(notebook, "why_missing_outer")
    answers = json.loads(printed(notebook, "print(json.dumps(r_why_missing_outer.to_dict()))"))["results"]
    for a in answers:
        assert a["outcome"] is None and a["verdict"] in page  # one operator: its verdict, no whole-query outcome
    assert "plotly" in page and "cdn.plot.ly" in page  # the key against the watermark, a Plotly chart


def test_charts_are_plotly_figures(notebook: nbformat.NotebookNode) -> None:
    for name in ("overview", "skew", "growth", "progress", "repartition"):
        assert "Plotly.newPlot" in html_of(notebook, name), name


def test_to_pandas(notebook: nbformat.NotebookNode) -> None:
    cell = cell_of(notebook, "r_why_missing[1].to_pandas()")
    html = next(o for o in cell.outputs if o.get("output_type") == "execute_result")["data"]["text/html"]
    answers = json.loads(printed(notebook, "print(json.dumps(r_why_missing.to_dict()))"))["results"]
    assert "<th>outcome</th>" in html and answers[1]["outcome"] in html


def test_errors_are_the_cli_lines(notebook: nbformat.NotebookNode) -> None:
    from statelens import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["overview", "/no/such/checkpoint"]) == 2
    kind, line = printed(notebook, "try:\n    statelens.open('/no").strip().split(" | ")
    assert kind == "CheckpointNotFound" and err.getvalue().strip() == f"statelens: {line}"
    kind, line = printed(notebook, f"try:\n    statelens.open({CHAIN!r}).sql(").strip().split(" | ")
    assert kind == "SqlError" and "op7" in line


def test_an_error_not_caught_is_its_one_line_not_a_traceback(notebook: nbformat.NotebookNode) -> None:
    (out,) = [o for o in cell_of(notebook, "statelens.open('/no/such/checkpoint')").outputs if o["output_type"] == "error"]
    assert out["ename"] == "CheckpointNotFound"
    assert len(out["traceback"]) == 1 and out["traceback"][0].startswith(
        "CheckpointNotFound: Checkpoint not found: /no/such/checkpoint"
    )


def test_the_apis_errors_name_its_arguments_not_the_clis_flags(notebook: nbformat.NotebookNode) -> None:
    kind, line = printed(notebook, f"try:\n    statelens.open({CHAIN!r}).repartition(").strip().split(" | ")
    assert (kind, line) == ("InvalidInput", "Invalid input: partitions must be 1 or more, not 0.")
    from statelens import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["repartition", CHAIN, "--partitions", "0"]) == 2
    assert err.getvalue().strip() == "statelens: Invalid input: --partitions must be 1 or more, not 0."
