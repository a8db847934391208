"""What a served app adds to the questions ``statelens`` answers: who may read what (sign-in, its
policy and audit log), which engine reads the state and where Spark runs for the whole server, Spark
reads a user can cancel, and warming the engine up. The pages ask through this and ``statelens``.
"""

from __future__ import annotations

import threading

from analysis.core.errors import NotAllowed, SparkUnavailable
from spark_io.logs.event_logs import log_fingerprint
from spark_io.logs.files import fingerprint
from spark_io.readers.engine import NATIVE, SPARK, engine_of, fallback_of, spark_chosen_on_purpose
from spark_io.readers.engine import configure as configure_engine
from spark_io.readers.engine import current as current_engine
from spark_io.runtime.jobs import Progress, run_cancellable
from spark_io.runtime.policy import Identity, Policy, audit, groups_of, load_policy
from spark_io.runtime.session import connect_problem, scratch_dir, target
from spark_io.storage.locations import UserRoots, bind_user, check_allowed, is_local, require_user

__all__ = [
    "NATIVE",
    "SPARK",
    "Identity",
    "NotAllowed",
    "Policy",
    "Progress",
    "SparkUnavailable",
    "UserRoots",
    "audit",
    "bind_user",
    "check_allowed",
    "configure_engine",
    "configure_spark",
    "connect_problem",
    "current_engine",
    "engine_of",
    "fallback_of",
    "fingerprint",
    "groups_of",
    "is_local",
    "load_policy",
    "log_fingerprint",
    "require_user",
    "run_cancellable",
    "scratch_dir",
    "spark_chosen_on_purpose",
    "target",
    "warm_up",
]


def configure_spark(master: str | None = None, remote: str | None = None) -> None:
    """Where Spark runs for every user of this server: locally (neither), a cluster ``master``, or a
    Spark Connect ``remote``."""
    from spark_io.runtime import session

    session.configure(master=master, remote=remote)


def warm_up() -> threading.Thread:
    """Warm up what will read the state, in the background: Spark when it reads the state (the Spark
    engine, or a cluster chosen), else the native reader's compiled loops (a JVM would only take the
    CPU the first answers need; the first read that needs Spark starts it)."""
    from spark_io.readers import engine
    from spark_io.runtime import session

    if engine.current() == engine.SPARK or engine.spark_chosen_on_purpose():
        return session.start_in_background()
    return engine.warm_native_in_background()
