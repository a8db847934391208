"""Why-missing's question as one value: which keys, and how they were asked (the CLI's flags, the
API's keywords, the page's fields). It travels whole from the front door to the stages; it is
frozen and hashable, so it is the key of the app's cached answers too."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from statelens.analysis.core.errors import InvalidInput

JOIN_TYPES = ("inner", "left_outer", "right_outer", "full_outer", "left_semi")


@dataclass(frozen=True)
class KeyQuestion:
    keys: tuple[str, ...]
    key_field: str | None = None  # the input column or state key field the keys are values of (None: the key columns)
    event_log: str | None = None  # the query's event log or progress JSON lines: its plan and progress
    # where the input files are now, when they moved: a folder, or several (the archive cleanSource moved the
    # files read to, and the source's folder beside it that holds the rest); held as a tuple
    input_root: str | Sequence[str] | None = None
    sink: str | None = None  # the file sink's folder, when it is not where the event log says
    operator: int | None = None  # one operator's verdict alone (None: the whole query)
    batch: int | None = None  # the batch asked at (None: the last committed)
    join_type: str | None = None  # a join's type, which the checkpoint does not record
    event_time_ms: int | None = None  # the event time of the record that never showed up
    near_misses: bool = True  # search look-alike keys too

    def __post_init__(self) -> None:
        keys = tuple(dict.fromkeys(self.keys))  # each key once, in the order asked
        if not keys or not all(isinstance(k, str) for k in keys):
            raise InvalidInput("Give at least one key (one per line in the app, or as arguments to the CLI).")
        if self.join_type is not None and self.join_type not in JOIN_TYPES:
            raise InvalidInput(f"Unknown join type '{self.join_type}': use one of {', '.join(JOIN_TYPES)}.")
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "input_root", self.input_roots)

    @property
    def input_roots(self) -> tuple[str, ...]:
        """Every folder given for where the input files are now, in the order given."""
        roots = (self.input_root,) if isinstance(self.input_root, str) else self.input_root or ()
        return tuple(dict.fromkeys(r for r in roots if r))  # each once; an empty one is none given

    @property
    def whole_query(self) -> bool:
        """Each key followed from the input files through every operator to the output (no operator named)."""
        return self.operator is None

    def but(self, **changes: Any) -> KeyQuestion:
        """The same question with ``changes`` (other keys, one operator, no near misses ...)."""
        return dataclasses.replace(self, **changes)
