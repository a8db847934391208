"""What a served app adds to the questions ``statelens`` answers: who may read what (sign-in, its
policy and audit log), which engine reads the state and where Spark runs for the whole server, Spark
reads a user can cancel, and warming the engine up. The pages ask through this and ``statelens``.
"""

from __future__ import annotations

import threading

from statelens.analysis.core.errors import NotAllowed, SparkUnavailable
from statelens.spark_io.logs.event_logs import log_fingerprint
from statelens.spark_io.logs.files import fingerprint
from statelens.spark_io.readers.engine import NATIVE, SPARK, engine_of, fallback_of, spark_chosen_on_purpose
from statelens.spark_io.readers.engine import configure as configure_engine
from statelens.spark_io.readers.engine import current as current_engine
from statelens.spark_io.runtime.jobs import Progress, run_cancellable
from statelens.spark_io.runtime.policy import (
    Identity,
    Policy,
    audit,
    bind_jobs,
    check_job,
    download_owners,
    groups_of,
    load_policy,
    made_for,
)
from statelens.spark_io.runtime.scratch import bind as bind_scratch
from statelens.spark_io.runtime.scratch import close_session as close_scratch
from statelens.spark_io.runtime.scratch import open_session as open_scratch
from statelens.spark_io.runtime.session import connect_problem, scratch_dir, target
from statelens.spark_io.storage.gate import (
    UserRoots,
    bind_user,
    bound_user,
    check_allowed,
    permitted,
    require_user,
    skipped_links,
)
from statelens.spark_io.storage.locations import is_local

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
    "bind_jobs",
    "bind_scratch",
    "bind_user",
    "bound_roots",
    "check_allowed",
    "check_job",
    "close_scratch",
    "configure_engine",
    "configure_spark",
    "connect_problem",
    "current_engine",
    "download_owners",
    "engine_of",
    "fallback_of",
    "fingerprint",
    "groups_of",
    "is_local",
    "load_policy",
    "log_fingerprint",
    "made_for",
    "open_scratch",
    "permitted",
    "require_user",
    "run_cancellable",
    "scratch_dir",
    "skipped_links",
    "spark_chosen_on_purpose",
    "target",
    "warm_up",
]


def bound_roots() -> tuple[str, ...] | None:
    """The roots of the user bound to this run (None: nobody is signed in, nothing bounds it)."""
    user = bound_user()
    return None if user is None else user.roots


def configure_spark(master: str | None = None, remote: str | None = None) -> None:
    """Where Spark runs for every user of this server: locally (neither), a cluster ``master``, or a
    Spark Connect ``remote``."""
    from statelens.spark_io.runtime import session

    session.configure(master=master, remote=remote)


def warm_up() -> threading.Thread:
    """Warm up what will read the state, in the background: Spark when it reads the state (the Spark
    engine, or a cluster chosen), else the native reader's compiled loops (a JVM would only take the
    CPU the first answers need; the first read that needs Spark starts it)."""
    from statelens.spark_io.readers import engine
    from statelens.spark_io.runtime import session

    if engine.current() == engine.SPARK or engine.spark_chosen_on_purpose():
        return session.start_in_background()
    return engine.warm_native_in_background()
