"""The SQL gateway's limits, in a module of their own so the CLI's help can show them without
importing DuckDB (``STATELENS_ROW_BUDGET``, ``STATELENS_SQL_TIMEOUT``)."""

from __future__ import annotations

import os

DEFAULT_MAX_ROWS = 100_000
DEFAULT_ROW_BUDGET = int(os.environ.get("STATELENS_ROW_BUDGET", "5000000"))
DEFAULT_TIMEOUT = float(os.environ.get("STATELENS_SQL_TIMEOUT", "30"))
