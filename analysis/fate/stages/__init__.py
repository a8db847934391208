"""One stage per operator kind, side by side behind one interface (``base.Stage``): what the operator
did with a row that reached it, what it sends on, what it emitted, what waits. Every module here is
a stage: its ``Stage`` subclass names the kinds (``analysis.core.operator_kinds``) it follows, and is
found here by itself. A new operator kind is a new file here and a line in the kinds' registry."""

from __future__ import annotations

import importlib
import pkgutil

from statelens.analysis.fate.stages.base import Stage


def _stages() -> dict[str, Stage]:
    found: dict[str, Stage] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base"):
        importlib.import_module(f"{__name__}.{module}")
    for cls in Stage.__subclasses__():
        for kind in cls.kinds:
            if kind in found:
                raise RuntimeError(f"two stages follow {kind}: {type(found[kind]).__name__} and {cls.__name__}")
            found[kind] = cls()
    return found


STAGES: dict[str, Stage] = _stages()
