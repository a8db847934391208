"""Which engine the user chose (``auto``, ``native``, ``spark``), and so who reads a location's
files: this process (a local folder; a cloud URI unless Spark was chosen) or Spark."""

from __future__ import annotations

import os
import threading

from statelens.analysis.core.errors import InvalidInput
from statelens.spark_io.storage.locations import cloud_of, is_local

ENGINES = ("auto", "native", "spark")
NATIVE, SPARK = "native", "spark"
_state = {"engine": os.environ.get("STATELENS_ENGINE", "auto").strip().lower() or "auto"}
_lock = threading.Lock()


def configure(engine: str) -> None:
    engine = engine.strip().lower()
    if engine not in ENGINES:
        raise InvalidInput(f"The engine must be one of {', '.join(ENGINES)}, not '{engine}'.")
    with _lock:
        _state["engine"] = engine


def current() -> str:
    engine = _state["engine"]
    if engine not in ENGINES:
        raise InvalidInput(f"STATELENS_ENGINE must be one of {', '.join(ENGINES)}, not '{engine}'.")
    return engine


def spark_chosen_on_purpose() -> bool:
    """A cluster or a Connect server was named: reads go where the user pointed them."""
    from statelens.spark_io.runtime import session

    t = session.target()
    return bool((t.remote and not t.served) or (t.master and t.master.split("[")[0] != "local"))


def reads_natively(path: str) -> bool:
    """Whether this process reads the files at ``path`` itself: a local folder always; S3, ADLS and
    GCS unless ``--engine spark`` or a cluster or Connect server was named (then Spark reads them,
    with the credentials it has there); ``hdfs://`` and other URIs never."""
    if is_local(path):
        return True
    if cloud_of(path) is None:
        return False
    return current() != SPARK and not spark_chosen_on_purpose()
