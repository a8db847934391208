"""State Lens for notebooks and scripts: what the CLI answers, as Python objects.

    import statelens
    cp = statelens.open("s3://lake/cp/orders")
    cp.why_missing("ord-42", event_log="s3://lake/logs/")   # one answer per key, drawn in the notebook
    cp.doctor().to_dict()                                   # the CLI's --json
    cp.sql("SELECT count(*) FROM op0").to_pandas()
    statelens.ls("s3://lake/cp/").to_pandas()

Errors are ``statelens.StateLensError`` (the CLI's one-line errors: ``title``, ``message``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from statelens.analysis.core.errors import InvalidInput, NotACheckpoint, StateLensError, speaking_as
from statelens.analysis.core.question import KeyQuestion
from statelens.api import (
    Checkpoint,
    audit_refusals,
    configure,
    downloads,
    limits,
    ls,
    open,
    open_pipeline,
    question,
    refused,
    serve,
    serving,
    shown_url,
    sql_across,
    stop_serving,
    why_missing_across,
)
from statelens.results import Answers, KeyAnswer, Listing, QueryAnswers, Result, Rows


def __getattr__(name: str) -> Any:
    """``statelens.RowFilter`` (rows to keep: partitions, or keys of a key field), imported when asked:
    its module is the state reader's, which a command that reads no state does not import."""
    if name == "RowFilter":
        from statelens.spark_io.readers.state_reader import RowFilter

        return RowFilter
    raise AttributeError(f"module 'statelens' has no attribute {name!r}")


# plotly_js: how charts in a notebook get plotly.js: "cdn" (cdn.plot.ly) or "inline" (embedded, offline)
config = SimpleNamespace(plotly_js="cdn")

__all__ = [
    "Answers",
    "Checkpoint",
    "InvalidInput",
    "KeyAnswer",
    "KeyQuestion",
    "Listing",
    "NotACheckpoint",
    "QueryAnswers",
    "Result",
    "RowFilter",
    "Rows",
    "StateLensError",
    "audit_refusals",
    "config",
    "configure",
    "downloads",
    "limits",
    "ls",
    "open",
    "open_pipeline",
    "question",
    "refused",
    "serve",
    "serving",
    "shown_url",
    "speaking_as",
    "sql_across",
    "stop_serving",
    "why_missing_across",
]
