"""The READMEs and the manual (``docs/``) render as written: every table row inside a table, every
fence closed, every CLI command documented; the manual builds as a site with warnings as errors (its
links and anchors checked); and what the samples README says matches the samples."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from statelens.spark_io.logs.checkpoint import read_checkpoint
from support import ROOT, SAMPLES, sample

DOCS = [ROOT / "README.md", SAMPLES / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _parse(text: str) -> list:  # type: ignore[type-arg]
    return MarkdownIt("commonmark").enable("table").parse(text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_row_renders_in_a_table(doc) -> None:  # type: ignore[no-untyped-def]
    text = doc.read_text()
    covered: set[int] = set()
    for t in _parse(text):
        if t.type in ("table_open", "fence", "code_block") and t.map:
            covered.update(range(*t.map))
    stray = [i + 1 for i, line in enumerate(text.split("\n")) if line.startswith("|") and i not in covered]
    assert not stray, f"{doc.name}: lines {stray} start with '|' but render as text (a blank line splits a table?)"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_is_closed(doc) -> None:  # type: ignore[no-untyped-def]
    text = doc.read_text()
    lines = text.split("\n")
    for t in _parse(text):
        if t.type == "fence":
            start, end = t.map
            closing = lines[end - 1].strip()
            assert closing.startswith(t.markup) and len(closing.strip("`~")) == 0, (
                f"{doc.name}: the fence opened on line {start + 1} is never closed"
            )


def _commands() -> set[str]:
    from statelens.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return set(sub.choices)


def test_the_manual_documents_every_cli_command() -> None:
    blocks = "\n".join(t.content for t in _parse((ROOT / "docs" / "using.md").read_text()) if t.type == "fence")
    documented = set(re.findall(r"^python cli\.py ([a-z-]+)", blocks, re.M))
    assert documented == _commands(), documented ^ _commands()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manual built as the site, with warnings (a broken link or anchor, a page not in the nav) as errors."""
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING" not in r.stderr, r.stderr[-3000:]
    return out


def test_the_cli_reference_is_written_from_the_parsers(site: Path) -> None:
    from statelens.cli import build_parser

    page = (site / "cli.html").read_text()
    for name in _commands():
        assert f"usage: statelens {name}" in page, name
    why = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices["why-missing"]
    for flag in ("--event-log", "--input-root", "--sink", "--key-field", "--join-type", "--no-near-misses"):
        assert flag in why.format_help() and flag in page, flag


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    assert "bash scripts/start.sh" in text and "bash scripts/test.sh" in text  # the two commands
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links and all((ROOT / link).exists() for link in links if "://" not in link), links
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {Path(link).name for link in links if link.startswith("docs/") and link.endswith(".md")} == pages


def test_samples_readme_gives_chained_operator_ids_as_the_checkpoint_has_them() -> None:
    text = (SAMPLES / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `chained_join_agg`"))
    join_id = int(re.search(r"join \(operator (\d+)\)", row).group(1))  # type: ignore[union-attr]
    agg_id = int(re.search(r"windows \(operator (\d+)", row).group(1))  # type: ignore[union-attr]
    names = {o.operator_id: o.operator_name for o in read_checkpoint(sample("chained_join_agg")).operators}
    assert names[join_id] == "symmetricHashJoin" and names[agg_id] == "stateStoreSave"


def test_every_script_the_makefile_runs_is_there() -> None:
    """``make bench`` ran a benchmark removed since (``bench/bench_growth.py``, its figures now
    ``bench_native.py``'s), and stopped there: every script a recipe names exists."""
    text = (ROOT / "Makefile").read_text()
    named = set(re.findall(r"(?<![\w/.-])((?:bench|scripts|tests)/[\w/.-]+\.(?:py|sh))", text))
    assert len(named) > 5 and not sorted(n for n in named if not (ROOT / n).is_file())
