"""A streaming global limit: its state holds one count of rows emitted so far, no key's rows; a key is
not followed through it (no stage: a key whose records pass it is answered unknown, saying so)."""

from __future__ import annotations

from statelens.analysis.core.operator_kinds import LIMIT, OperatorKind
from statelens.analysis.verdicts.stateful_verdicts import holds_state

KIND = OperatorKind(LIMIT, ("globallimit*", "streaminggloballimit*"), ("StreamingGlobalLimit",), in_state=holds_state)
