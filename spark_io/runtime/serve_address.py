"""Where the warm engine ``serve`` started is: the file it records its URL in, read by every
command that may need Spark (the server's start and stop are in ``serve``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from statelens.spark_io.runtime.session import connect_problem


def serve_dir() -> Path:
    return Path(os.environ.get("STATELENS_SERVE_DIR", Path.home() / ".cache" / "statelens" / "serve"))


def state_file() -> Path:
    return serve_dir() / "server.json"


def running() -> str | None:
    """The URL (with its token) of the served engine when it answers, else None."""
    try:
        url = json.loads(state_file().read_text())["url"]
    except (OSError, ValueError, KeyError):
        return None
    return url if connect_problem(url, timeout=1.0) is None else None


def shown(url: str) -> str:
    """The URL without its token, to print."""
    return url.split("/;", 1)[0]
