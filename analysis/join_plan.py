"""A stream-stream join as its physical plan states it: keys, join type and condition.

The checkpoint records none of these; a Spark event log does. Each micro-batch's
``SparkListenerSQLExecutionStart`` carries ``physicalPlanDescription``, whose
``StreamingSymmetricHashJoin`` node lists its arguments::

    Arguments: [order_id#19], [order_id#25], Inner, condition = [ leftOnly = null, rightOnly = null,
    both = ((order_time#23-T120000ms >= payment_time#27-T120000ms + INTERVAL '-05' MINUTE) AND ...),
    full = (...) ], state info [ checkpoint = ..., runId = ..., opId = 0, ver = 0, numPartitions = 4] ...

(``StreamingSymmetricHashJoinExec``'s fields: left and right keys, join type, the condition split
by ``JoinConditionSplitPredicates``, ``StatefulOperatorStateInfo``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

JOIN_TYPES = {
    "Inner": "inner",
    "LeftOuter": "left_outer",
    "RightOuter": "right_outer",
    "FullOuter": "full_outer",
    "LeftSemi": "left_semi",
}

_ARGS = re.compile(
    r"Arguments: \[(?P<left>.*?)\], \[(?P<right>.*?)\], (?P<type>\w+), condition = \[ leftOnly = .*?, rightOnly = .*?, "
    r"both = .*?, full = (?P<full>.*?) \], state info \[[^\]]*?opId = (?P<op>\d+)"
)


@dataclass(frozen=True)
class JoinPlan:
    operator_id: int
    join_type: str | None  # inner | left_outer | ... (None: a type this reader does not name)
    plan_join_type: str  # as the plan writes it: Inner, LeftOuter ...
    left_keys: tuple[str, ...]  # field0, field1 ... of the left side's state key
    right_keys: tuple[str, ...]
    condition: str | None  # the condition besides the keys (usually the event-time range); None: keys only

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "join_type": self.join_type,
            "left_keys": list(self.left_keys),
            "right_keys": list(self.right_keys),
            "condition": self.condition,
        }


def readable(expr: str) -> str:
    """An expression of the plan as the query wrote it: without expression ids (``#19``), watermark
    tags (``-T120000ms``) and with intervals in words (``+ INTERVAL '-05' MINUTE`` -> ``- 5 minutes``)."""
    text = re.sub(r"#\d+(-T\d+ms)?", "", expr)

    def interval(m: re.Match[str]) -> str:
        sign = "-" if (m.group(1) == "+") == (m.group(2) == "-") else "+"
        n, unit = int(m.group(3)), m.group(4).lower()
        return f"{sign} {n} {unit}{'' if n == 1 else 's'}"

    text = re.sub(r"([+-]) INTERVAL '(-?)0*(\d+)' (DAY|HOUR|MINUTE|SECOND)\b", interval, text)
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1]
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
    return depth == 0


def _keys(text: str) -> tuple[str, ...]:
    parts, depth, cur = [], 0, ""
    for c in text:
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    return tuple(readable(p.strip()) for p in [*parts, cur] if p.strip())


def join_plans(plan: str) -> dict[int, JoinPlan]:
    """Operator id -> the join, for every StreamingSymmetricHashJoin node of a physical plan description."""
    out: dict[int, JoinPlan] = {}
    for m in _ARGS.finditer(plan):
        full = m.group("full").strip()
        out[int(m.group("op"))] = JoinPlan(
            int(m.group("op")),
            JOIN_TYPES.get(m.group("type")),
            m.group("type"),
            _keys(m.group("left")),
            _keys(m.group("right")),
            None if full == "null" else readable(full),
        )
    return out
