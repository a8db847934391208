"""A key across the pipeline: each query's own whole-query answer, composed hop by hop.

The answer is the last query's, unless it never saw the key: then the query upstream of it answers
(it dropped the key, holds it waiting, or wrote it in a batch the downstream query has not read yet),
and so on up to the first query. A query that wrote the key in a batch the next one read, while the
next finds no record of it, is ``unknown`` (a key column renamed between them, most likely): never a
guess."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.pipeline.model import Hop, norm

NEVER = "never_in_input"
REACHED = ("written", "partly_written", "written_unmatched")  # a query's outcomes that wrote the key to its table
NOT_READ_YET = "not_read_yet"  # written upstream in a batch the downstream query has not read yet
KEY_NOT_FOLLOWED = "key_not_followed"  # written upstream, read downstream, and no record of the key there


@dataclass(frozen=True)
class HopAnswer:
    """One query's answer for a key (its whole-query answer, or, for a query without state, what its
    input and its table hold)."""

    query: str
    outcome: str
    cause: str | None
    cause_at: Mapping[str, Any] | None
    headline: str
    read: tuple[tuple[int | None, str], ...] = ()  # (this query's batch, file) of each record of the key
    written: tuple[int, ...] = ()  # this query's batches that wrote the key to its table
    answer: Mapping[str, Any] = field(default_factory=dict)  # the query's own answer, as its JSON
    key_field: str | None = None  # the column it was asked by (a query after a rename: the new name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "key_field": self.key_field,
            "outcome": self.outcome,
            "cause": self.cause,
            "headline": self.headline,
            "answer": dict(self.answer),
        }


def hop_answer(query: str, result: Mapping[str, Any]) -> HopAnswer:
    """A query's whole-query answer for one key (a ``why-missing --json`` result) as a hop's."""
    fate = result.get("fate") or {}
    read = tuple((r.get("batch_id"), str(r.get("file") or "")) for r in fate.get("records") or [])
    outputs = [o for o in fate.get("outputs") or [] if o.get("batch_id") is not None]
    # the batches whose sink files hold it; else, for a key that reached the output, the batches that
    # emitted it to the sink (its files were not searched by this column: a query writing it renamed)
    written = {o["batch_id"] for o in outputs if o.get("kind") == "written"}
    if not written and str(result.get("outcome") or fate.get("outcome")) in REACHED:
        written = {o["batch_id"] for o in outputs}
    return HopAnswer(
        query,
        str(result.get("outcome") or fate.get("outcome") or "unknown"),
        result.get("cause"),
        result.get("cause_at"),
        str(fate.get("headline") or result.get("explanation") or ""),
        read,
        tuple(sorted(written)),
        result,
    )


@dataclass(frozen=True)
class PipelineKeyAnswer:
    key: str
    outcome: str
    cause: str | None
    cause_at: Mapping[str, Any] | None  # the query's cause_at, with ``query`` and the upstream batch that wrote the record's file
    headline: str
    hops: tuple[HopAnswer, ...]  # each query's own answer, upstream first

    def place(self) -> list[tuple[str, Any]]:
        """Where its cause happened, as (word, value): query, operator, batch, upstream batch (those told)."""
        at = self.cause_at or {}
        words = (("query", "query"), ("operator_id", "operator"), ("batch_id", "batch"), ("upstream_batch_id", "upstream batch"))
        return [(word, at[k]) for k, word in words if at.get(k) is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "outcome": self.outcome,
            "cause": self.cause,
            "cause_at": dict(self.cause_at) if self.cause_at is not None else None,
            "headline": self.headline,
            "hops": [h.to_dict() for h in self.hops],
        }


def _upstream_batch(file: str | None, into: str, hops: Sequence[Hop]) -> tuple[str, int | None] | None:
    """The query and batch that wrote a file ``into`` read (from the table's sink log)."""
    if not file:
        return None
    for h in hops:
        if h.downstream == into and norm(file) in h.written:
            return h.upstream, h.written[norm(file)]
    return None


def _at(a: HopAnswer, hops: Sequence[Hop]) -> dict[str, Any]:
    at = dict(a.cause_at or {})
    at["query"] = a.query
    up = _upstream_batch(at.get("file"), a.query, hops)
    if up is not None:
        at["upstream_query"], at["upstream_batch_id"] = up
    return at


def pipeline_fate(key: str, order: Sequence[str], hops: Sequence[Hop], answers: Mapping[str, HopAnswer]) -> PipelineKeyAnswer:
    """The key's answer at the pipeline's end (the last query of ``order`` that no other reads), from
    each query's own answer and the hops between them."""
    shown = tuple(answers[q] for q in order if q in answers)
    feeding = {h.upstream for h in hops}
    ends = [q for q in order if q in answers and q not in feeding]
    q = ends[-1] if ends else order[-1]
    visited: set[str] = set()
    while True:
        visited.add(q)
        a = answers[q]
        if a.outcome != NEVER:
            return PipelineKeyAnswer(key, a.outcome, a.cause, _at(a, hops), f"{a.query}: {a.headline}", shown)
        ups = [h for h in hops if h.downstream == q and h.upstream in answers and h.upstream not in visited]
        wrote = [(h, answers[h.upstream]) for h in ups if answers[h.upstream].written]
        for h, u in wrote:
            waiting = [b for b in u.written if b in h.unread]
            if waiting and len(waiting) == len(u.written):
                at = {"query": q, "upstream_query": u.query, "upstream_batch_id": waiting[0], "table": h.table}
                said = (
                    f"{u.query} wrote it in batch {', '.join(map(str, waiting))}, which {q} has not read yet "
                    f"(it lags {len(h.unread)} batch(es) behind)"
                )
                return PipelineKeyAnswer(key, "waiting", NOT_READ_YET, at, f"Waiting: {said}.", shown)
            read = [b for b in u.written if b not in h.unread]
            if read:
                at = {"query": q, "upstream_query": u.query, "upstream_batch_id": read[0], "table": h.table}
                said = (
                    f"{u.query} wrote it in batch {read[0]}, which {q} read, yet no record {q} read holds it in the "
                    f"column asked: the key column may be named otherwise there (name it for {q}: --key-field "
                    f"<column>,{q}=<its column>)"
                )
                return PipelineKeyAnswer(key, "unknown", KEY_NOT_FOLLOWED, at, f"Unknown: {said}.", shown)
        untold = [answers[h.upstream] for h in ups if answers[h.upstream].outcome in REACHED]
        if untold:  # it reached that table, in batches not told: whether this query read them is not known
            u = untold[0]
            at = {"query": q, "upstream_query": u.query}
            said = (
                f"{u.query} wrote it to its table (in which batch is not told), and no record {q} read holds it: whether "
                f"{q} has not read it yet or the key column is named otherwise there cannot be told"
            )
            return PipelineKeyAnswer(key, "unknown", KEY_NOT_FOLLOWED, at, f"Unknown: {said}.", shown)
        pending = [h.upstream for h in ups if answers[h.upstream].outcome != NEVER]
        if pending:
            q = pending[0]
            continue
        never = [h.upstream for h in ups]
        if never:
            q = never[0]
            continue
        return PipelineKeyAnswer(key, NEVER, NEVER, {"query": q}, f"{q}: {a.headline}", shown)
