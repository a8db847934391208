"""Why a restart failed: Spark's state errors explained against the checkpoint (pure).

Given the failed run's error text (``query.exception()``, the driver log, or an event log's
``QueryTerminatedEvent``) and the checkpoint's operators, it names the operator, what changed and
how, and the ways out. Error classes as Spark 4.x raises them:

* ``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE`` / ``STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE``: "Existing
  key_schema=StructType(...) and new key_schema=StructType(...)" (fields compared by position and
  type: a count changed into a sum of the same type passes unnoticed);
* ``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``: the operators in the metadata and in
  the new plan;
* ``CANNOT_LOAD_STATE_STORE.*``: the state file that could not be read;
* ``STREAMING_UNFINISHED_REPARTITION_DETECTED`` / ``STATE_REPARTITION_INVALID_CHECKPOINT.*``: an offline
  state repartition (Spark 4.2+) that did not finish.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.core.model import CheckpointInfo

_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)?)\]")
_SCHEMA = re.compile(r"Existing (key|value)_schema=(StructType\(.*?\)) and new \1_schema=(StructType\(.*?\))\.?\s*$", re.M)
_FIELD = re.compile(r"StructField\((\w+),(\w+(?:\([^)]*\))?),(true|false)\)")
_OPS = re.compile(r"OperatorId: (\d+) -> OperatorName: (\w+)")
_STATE_FILE = re.compile(
    r"(?:file:|[a-z0-9]+://)?\S*?/(state/(\d+)/(\d+)/(?:([^/\s]+)/)?(\d+)(?:_[0-9a-f-]+)?\.(delta|snapshot|changelog|zip))"
)


@dataclass
class RestartExplanation:
    error_class: str | None
    title: str
    operator_id: int | None = None
    changes: list[str] = field(default_factory=list)  # what changed, one line each
    ways_out: list[str] = field(default_factory=list)


def error_text(raw: str) -> str:
    """The error in a file: the text itself, or the exceptions of an event log's JSON lines."""
    found = []
    for line in raw.splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        for value in event.values() if isinstance(event, dict) else []:
            if isinstance(value, str) and _CLASS.search(value):
                found.append(value)
    return "\n".join(found) if found else raw


def _fields(struct: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _FIELD.finditer(struct)]


def _diff(old: list[tuple[str, str]], new: list[tuple[str, str]]) -> list[str]:
    out = []
    old_names, new_names = dict(old), dict(new)
    out += [f"field {n} ({t}) added" for n, t in new if n not in old_names]
    out += [f"field {n} ({t}) removed" for n, t in old if n not in new_names]
    out += [f"field {n} changed from {old_names[n]} to {t}" for n, t in new if n in old_names and old_names[n] != t]
    if not out and [n for n, _ in old] != [n for n, _ in new]:
        out.append(f"fields reordered: {', '.join(n for n, _ in old)} -> {', '.join(n for n, _ in new)}")
    return out or ["the field types or nullability differ"]


def _operator_with_key(info: CheckpointInfo, keys: dict[int, list[dict[str, Any]]], fields: list[tuple[str, str]]) -> int | None:
    """The operator whose stored key fields are these (by name), else the only operator."""
    names = [n for n, _ in fields]
    found = [op_id for op_id, fs in keys.items() if [f.get("name") for f in fs] == names]
    if len(found) == 1:
        return found[0]
    return info.operators[0].operator_id if len(info.operators) == 1 else None


def explain(raw: str, info: CheckpointInfo, keys: dict[int, list[dict[str, Any]]]) -> RestartExplanation:
    """``keys``: each operator's stored key fields (its state schema files)."""
    text = error_text(raw)
    classes = [c for c in _CLASS.findall(text) if c != "STREAM_FAILED"]
    cls = classes[0] if classes else None
    new_checkpoint = "Start the changed query on a new checkpoint (it reprocesses its input from the sources' start offsets)."
    fresh = "start the query on a new checkpoint (it reprocesses its input from the sources' start offsets)."
    m = _SCHEMA.search(text)
    if cls and cls.startswith(("STATE_STORE_KEY_SCHEMA", "STATE_STORE_VALUE_SCHEMA")) and m:
        which, old, new = m.group(1), _fields(m.group(2)), _fields(m.group(3))
        op = (
            _operator_with_key(info, keys, old)
            if which == "key"
            else (info.operators[0].operator_id if len(info.operators) == 1 else None)
        )
        what = (
            "key (the grouping, deduplication or join keys, the window)"
            if which == "key"
            else "value (the aggregates or the kept row)"
        )
        ways = [f"Revert the change to the operator's {which}: the query then restarts where it stopped."]
        if which == "value":
            ways.append(
                "Value schemas may evolve only for transformWithState with "
                "spark.sql.streaming.stateStore.encodingFormat=avro set from the query's first run, and only compatibly."
            )
        ways.append(new_checkpoint)
        where = f"operator {op}" if op is not None else "a stateful operator"
        return RestartExplanation(cls, f"The {which} schema of {where}'s state changed: {what}", op, _diff(old, new), ways)
    if cls == "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA":
        parts = text.split("Stateful operators in current batch:")
        stored = dict(_OPS.findall(parts[0])) if parts else {}
        now = dict(_OPS.findall(parts[1])) if len(parts) > 1 else {}
        changes = [f"operator {i} ({n}) added" for i, n in now.items() if i not in stored]
        changes += [f"operator {i} ({n}) removed" for i, n in stored.items() if i not in now]
        changes += [f"operator {i} was {stored[i]}, now {n}" for i, n in now.items() if i in stored and stored[i] != n]
        return RestartExplanation(
            cls,
            "The query's stateful operators changed: Spark numbers them in plan order and keeps each one's state by that number",
            int(min((i for i in now if now.get(i) != stored.get(i)), default="0", key=int)),
            changes,
            ["Remove the added operator, or restore the removed one, in the same order.", new_checkpoint],
        )
    if cls and cls.startswith("CANNOT_LOAD_STATE_STORE"):
        f = _STATE_FILE.search(text)
        changes = []
        op = None
        if f:
            op = int(f.group(2))
            missing = "does not exist" in text or "NOT_EXISTS" in cls
            changes.append(
                f"{f.group(1)} (operator {op}, partition {f.group(3)}, version {f.group(5)}) "
                + ("is missing" if missing else "cannot be read")
            )
        return RestartExplanation(
            cls,
            "Spark could not load a state file the restart needs",
            op,
            changes,
            [
                "Restore the file from a backup of the checkpoint (the doctor above lists every file each batch needs).",
                "Without it the state of that partition cannot be rebuilt: " + fresh,
            ],
        )
    if cls and (cls == "STREAMING_UNFINISHED_REPARTITION_DETECTED" or cls.startswith("STATE_REPARTITION_INVALID_CHECKPOINT")):
        last = info.repartitions[-1] if info.repartitions else None
        return RestartExplanation(
            cls,
            "An offline state repartition did not finish",
            None,
            [
                f"batch {last.batch_id} repartitions the state from {last.before} to {last.after} partitions"
                + (" and has no commit" if not last.committed else "")
            ]
            if last
            else [],
            [
                "Run the repartition again with the same partition count and let it finish, then start the query.",
                "To repartition to another count, first finish the one that was started.",
            ],
        )
    if cls and cls.startswith("STATE_STORE_INVALID_CONFIG_AFTER_RESTART"):
        said = next((x for x in text.splitlines() if cls in x), "")
        said = said.split(f"[{cls}]", 1)[-1].split(" SQLSTATE")[0].strip()
        return RestartExplanation(
            cls,
            "A setting of the stateful operator that its state depends on changed" + (f": {said}" if said else ""),
            None,
            [said] if said else [],
            ["Set it back to what the checkpoint was written with: the query then restarts where it stopped.", new_checkpoint],
        )
    if cls == "PYTHON_EXCEPTION" or (cls is None and "PythonException" in text):
        return _python_failure(text)
    if cls:
        first = next((x for x in text.splitlines() if cls in x), cls)
        return RestartExplanation(cls, f"Spark stopped with {cls}", None, [first.split(f"[{cls}]", 1)[-1].strip()[:300]], [])
    return RestartExplanation(
        None, "No Spark error class found in the text", None, [], ["Give the failed run's error text or its event log."]
    )


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
_RAISED = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (?P<msg>.*)$")


def _python_failure(text: str) -> RestartExplanation:
    """The job's Python code (a stateful function, a UDF) raised in a Python worker: where, and what."""
    frames = [m for m in _FRAME.finditer(text) if "/pyspark/" not in m.group("file") and "pyspark.zip" not in m.group("file")]
    lines = [x.strip() for x in text.splitlines()]
    raised = [m for m in (_RAISED.match(x) for x in lines) if m and not m.group("type").startswith(("pyspark.", "py4j."))]
    what = f"{raised[-1].group('type')}: {raised[-1].group('msg')[:200]}" if raised else "an exception"
    where = (
        f"{frames[-1].group('file').rsplit('/', 1)[-1]}:{frames[-1].group('line')} in {frames[-1].group('fn')}"
        if frames
        else None
    )
    return RestartExplanation(
        "PYTHON_EXCEPTION",
        f"The query's Python code raised {what}" + (f" ({where})" if where else ""),
        None,
        [f"{what}" + (f" at {where}" if where else "")],
        [
            "Fix the function: it runs on the stored state as the changed code reads it. A transformWithState value "
            "field added or renamed with Avro encoding reads as null in the state stored before; a state field "
            "of another type does not convert.",
            "Or revert the change to the state the function keeps.",
        ],
    )
