"""The vocabulary of 'why is key X missing': verdicts, operator kinds, join types, and the
inputs and output of one key's diagnosis (``StoreLookup``, ``Context``, ``KeyDiagnosis``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from statelens.analysis.core.near_miss import NearSeen
from statelens.analysis.core.operator_kinds import AGGREGATION, DEDUP, DEDUP_WITHIN, GROUP_STATE, JOIN, SESSION, TWS  # noqa: F401
from statelens.analysis.core.question import JOIN_TYPES  # noqa: F401

MATCHED = "matched"
WAITING_OTHER_SIDE = "waiting_for_other_side"
CONDITION_NOT_MET = "condition_not_met"
EVICTED = "evicted"
NEVER_IN_STATE = "never_in_state"
WAITING_WATERMARK = "waiting_for_watermark"
IN_STATE = "in_state"
DROPPING_DUPLICATES = "dropping_duplicates"
SESSION_OPEN = "session_open"
EMITTED_UNMATCHED = "emitted_unmatched"  # outer join: evicted unmatched on a preserved side, emitted null-padded
UNKNOWN = "unknown"  # a read the verdict depends on failed
DROPPED_AS_LATE = "dropped_as_late"  # the record's event time was behind the watermark and the operator dropped late rows
PRESERVED = {"inner": (), "left_semi": (), "left_outer": ("left",), "right_outer": ("right",), "full_outer": ("left", "right")}
MAX_EVIDENCE = 200  # rows of evidence per key; the SQL reproduces all of them


@dataclass
class StoreLookup:
    """What one store says about one key: rows at the batch, history, near-miss keys."""

    name: str  # "left" / "right" for join sides, "state" or a state variable name otherwise
    table: str  # the workspace SQL table that holds these rows
    rows: list[dict[str, Any]] = field(default_factory=list)  # state rows at the batch
    changes: list[dict[str, Any]] | None = None  # change-feed rows for the key; None: no history
    changes_table: str | None = None
    near: list[str] = field(default_factory=list)  # other keys in state at the batch that look like this one
    near_seen: list[NearSeen] = field(default_factory=list)  # and in the change feed (history)


@dataclass
class Context:
    kind: str
    operator_id: int
    operator_name: str
    batch: int
    watermarks: dict[int, int]  # batch -> watermark (ms) used by that batch
    key_field: str
    history: tuple[int, int] | None = None  # change-feed batches searched
    first_batch: int = 0  # oldest retained batch
    eviction_horizon: dict[str, tuple[int, int]] = field(default_factory=dict)  # join side -> (lo, hi) ms
    join_type: str | None = None  # not recorded in the checkpoint: given by the user or read from an event log's plan
    join_condition: str | None = None  # the join's condition besides its keys, from an event log's plan
    join_format: int = 2  # join state format 1 has no 'matched' flag
    history_method: str = "change feed"  # or "state per batch" (no change feed)
    history_error: str | None = None  # a failed history read: verdicts that depend on it are unknown
    notes: list[str] = field(default_factory=list)  # failed side reads worth saying in every explanation
    batch_times: dict[int, int] = field(default_factory=dict)  # batch -> batch timestamp (ms)
    single_operator: bool = True
    output_mode: str | None = None  # Append | Update | Complete, as the event log's plan states it; None: not known

    @property
    def watermark(self) -> int:
        return self.watermarks.get(self.batch, 0)


@dataclass
class KeyDiagnosis:
    key: str
    verdict: str
    explanation: str
    side: str | None = None  # a join side: "left", "right" or "both"
    was_matched: bool | None = None
    evicted_at_batch: int | None = None  # the last eviction (from both sides: the later one)
    evicted_by_side: dict[str, int] = field(default_factory=dict)  # a join key: each side's eviction batch
    matched_at_batch: int | None = None  # a join key: the batch its rows became matched (joined)
    dropped_in_batch: int | None = None  # dropped_as_late: the batch that dropped it, when only one can have
    evidence: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    near_misses: list[dict[str, str]] = field(default_factory=list)
    queries: list[dict[str, str]] = field(default_factory=list)  # title, sql: reproduce the evidence
    matched_as: str | None = None  # how the typed key was compared
    reason: str | None = None  # the cause, where the verdict alone is silent: late_record, duplicate, condition_not_met, filtered

    whole_query: ClassVar[bool] = False  # one operator's verdict (the whole query's: ``analysis.fate.answer.QueryKeyAnswer``)

    @property
    def side_text(self) -> str:
        return "" if not self.side else "both sides" if self.side == "both" else f"{self.side} side"

    @property
    def looks_for_near_misses(self) -> bool:
        """Whether look-alike keys are searched for this verdict: a key waiting, never seen or left
        unmatched (a malformed key is the usual cause)."""
        return self.verdict in (WAITING_OTHER_SIDE, NEVER_IN_STATE) or (
            self.verdict in (EVICTED, EMITTED_UNMATCHED) and self.was_matched is False
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            # the whole query's (``analysis.fate.answer.QueryKeyAnswer``): none for one operator's verdict
            "outcome": None,
            "cause": None,
            "cause_at": None,
            "verdict": self.verdict,
            "verdict_operator": None,
            "side": self.side,
            "was_matched": self.was_matched,
            "evicted_at_batch": self.evicted_at_batch,
            "evicted_by_side": self.evicted_by_side,
            "matched_at_batch": self.matched_at_batch,
            "dropped_in_batch": self.dropped_in_batch,
            "matched_as": self.matched_as,
            "explanation": self.explanation,
            "evidence": self.evidence,
            "timeline": self.timeline,
            "near_misses": self.near_misses,
            "queries": self.queries,
            "reason": self.reason,
            "fate": None,
        }
