"""mkdocs hook: the CLI reference written from the CLI's own parsers (``cli.build_parser``), so the page
says exactly what ``statelens COMMAND --help`` says. ``<!-- cli-reference -->`` in a page becomes it."""

from __future__ import annotations

import os
import sys
from typing import Any

MARK = "<!-- cli-reference -->"


def reference() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in sys.path:
        sys.path.insert(0, root)
    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width: the page's, fixed
    from statelens.cli import build_parser

    parser = build_parser()
    parser.prog = "statelens"
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    helps = {c.dest: c.help for c in sub._choices_actions}
    out = ["## `statelens`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, command in sub.choices.items():
        command.prog = f"statelens {name}"
        out += [
            f"## `statelens {name}`",
            "",
            f"{helps.get(name) or ''}".strip(),
            "",
            "```text",
            command.format_help().rstrip(),
            "```",
            "",
        ]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return markdown.replace(MARK, reference()) if MARK in markdown else markdown
