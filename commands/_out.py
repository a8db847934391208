"""What every command's printer shares: JSON as the API's ``to_dict``, aligned tables, times."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def invoked_as() -> str:
    """``statelens`` (installed with pip) or ``python cli.py`` (the source folder)."""
    return "statelens" if os.path.basename(sys.argv[0]) == "statelens" else "python cli.py"


def dump(obj: Any) -> None:
    """A result's ``to_dict()`` (or a dict), as one line of JSON."""
    from statelens.results import json_value

    data = obj.to_dict() if hasattr(obj, "to_dict") else obj
    print(json.dumps(data, default=json_value, ensure_ascii=False))


def fmt_ms(ms: int) -> str:
    """A time in a table cell: the one way State Lens writes a time, "-" for none."""
    from statelens.text import fmt_time

    return fmt_time(ms).removesuffix(" UTC") if ms else "-"  # the header says UTC


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def findings(found: list[Any]) -> None:
    for f in found:
        print(f"\n[{f.severity}] {f.code}: {f.message}" + (f"\n  setting: {f.setting}" if f.setting else ""))


def store_target(p: Any, batch: bool = True) -> None:
    """The arguments naming one store: the checkpoint, ``--operator``, ``--store`` (and ``--batch``)."""
    p.add_argument("checkpoint")
    p.add_argument("--operator", type=int, default=None, help="operator id (default: the join, else the first)")
    p.add_argument("--store", default=None, help="store or transformWithState variable (default: the main one)")
    if batch:
        p.add_argument("--batch", type=int, default=None, help="batch (default: last committed)")
