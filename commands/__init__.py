"""The CLI's commands, one module each: its parser (``add``) and what it runs and prints (``run``),
asked through ``statelens`` alone. ``COMMANDS`` is the one table of them, in the order ``--help``
lists them; ``cli.py`` is the entry that parses and dispatches."""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module (commands/<module>.py); a command is a line here and a module beside its siblings
COMMANDS: dict[str, str] = {
    "overview": "overview",
    "ls": "ls",
    "pipeline": "pipeline",
    "serve": "serve",
    "doctor": "doctor",
    "sql": "sql",
    "why-missing": "why_missing",
    "preflight": "preflight",
    "rebuild": "rebuild",
    "repartition": "repartition",
    "unmatched": "unmatched",
    "progress": "progress",
    "skew": "skew",
    "growth": "growth",
    "export": "export",
    "report": "report",
    "app": "app",
}


def command(name: str) -> ModuleType:
    """The module of command ``name``: ``HELP``, ``add(parser)``, ``run(args)``, ``SPARK`` (whether it may
    need a Spark engine in this process)."""
    if name not in COMMANDS:
        raise KeyError(f"no command {name!r}: the commands are {', '.join(COMMANDS)}")
    return importlib.import_module(f"statelens.commands.{COMMANDS[name]}")
