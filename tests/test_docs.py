"""The READMEs render as written: every table row inside a table, every fence closed, every CLI
command documented; and what the samples README says matches the samples."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from spark_io.logs.checkpoint import read_checkpoint
from support import ROOT, SAMPLES, sample

DOCS = [ROOT / "README.md", SAMPLES / "README.md"]


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


def test_readme_documents_every_cli_command() -> None:
    from cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    blocks = "\n".join(t.content for t in _parse((ROOT / "README.md").read_text()) if t.type == "fence")
    documented = set(re.findall(r"^python cli\.py ([a-z-]+)", blocks, re.M))
    assert documented == set(sub.choices), documented ^ set(sub.choices)


def test_samples_readme_gives_chained_operator_ids_as_the_checkpoint_has_them() -> None:
    text = (SAMPLES / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `chained_join_agg`"))
    join_id = int(re.search(r"join \(operator (\d+)\)", row).group(1))  # type: ignore[union-attr]
    agg_id = int(re.search(r"windows \(operator (\d+)", row).group(1))  # type: ignore[union-attr]
    names = {o.operator_id: o.operator_name for o in read_checkpoint(sample("chained_join_agg")).operators}
    assert names[join_id] == "symmetricHashJoin" and names[agg_id] == "stateStoreSave"
