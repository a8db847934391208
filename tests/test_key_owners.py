"""Which of the asked keys a state row answers (``KeyQuery.owners``, ``by_owner``): by the value's text
or its typed value, in the order asked, found by a look-up rather than a pass over every key. A
question of many keys answers each key as the question of that key alone does, on a real checkpoint."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from statelens.analysis.core.model import sources_of
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.core.state_access import KeyQuery, key_text, typed_values
from statelens.analysis.verdicts import diagnose
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.native.access import NativeState
from statelens.spark_io.readers.native.reader import NativeReader
from support import SAMPLES

TYPES = ["bigint", "double", "decimal(10,2)", "date", "timestamp", "boolean", "string"]
VALUES = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 2.5, -1.0, float("nan")]),
    st.sampled_from([decimal.Decimal("1"), decimal.Decimal("2.50")]),
    st.sampled_from([dt.date(2026, 1, 1), dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 1)]),
    st.booleans(),
    st.sampled_from(["1", "a", "2.5", "true", "2026-01-01", " 1"]),
    st.none(),
    st.just({"nested": 1}),
)
TEXTS = st.sampled_from(["1", "1.0", "2.5", "2.50", "-1", "a", "true", "2026-01-01", "2026-01-01 00:00:00", "nan", "sNaN", " 1"])


def _by_definition(q: KeyQuery, raw: Any) -> list[str]:
    """The rule, written as it reads: every asked key whose text is the value's, or whose typed value equals it."""
    typed = dict(q.typed)
    return [k for k in q.keys if k == key_text(raw) or (k in typed and typed[k] == raw)]


@settings(max_examples=300, deadline=None)
@given(type_name=st.sampled_from(TYPES), keys=st.lists(TEXTS, min_size=1, max_size=6), raws=st.lists(VALUES, max_size=8))
def test_the_owners_of_a_row_are_the_keys_the_rule_names_in_the_order_asked(
    type_name: str, keys: list[str], raws: list[Any]
) -> None:
    _, typed = typed_values(type_name, keys)
    hashable = {k: v for k, v in typed.items() if not (isinstance(v, decimal.Decimal) and v.is_snan())}
    q = KeyQuery("f", tuple(keys), tuple(hashable.items()))
    rows = [{"_raw": r} for r in raws]
    for r in rows:
        assert q.owners(r["_raw"]) == _by_definition(q, r["_raw"])
    grouped = q.by_owner(rows)
    for k in keys:
        assert grouped.get(k, []) == [r for r in rows if k in _by_definition(q, r["_raw"])]


def test_a_signalling_nan_key_owns_nothing_and_breaks_nothing() -> None:
    _, typed = typed_values("decimal(10,2)", ["sNaN", "1"])
    q = KeyQuery("f", ("sNaN", "1"), tuple(typed.items()))
    assert q.owners(decimal.Decimal("1")) == ["1"] and q.owners("sNaN") == ["sNaN"] and q.owners(2) == []


def test_a_question_of_every_key_answers_each_as_its_own_question() -> None:
    """The join sample's every key in state at its last batch and two never seen, asked at once: each
    key's verdict, the rows it shows and when it matched or left state are those of the question of it
    alone (its timeline may reach further back: a question with a key no recent batch explains reads
    the whole change feed)."""

    def answer(r: Any) -> tuple[Any, ...]:
        return (r.verdict, r.side, r.evidence, r.was_matched, r.matched_at_batch, r.evicted_at_batch, r.evicted_by_side)

    info = read_checkpoint(str(SAMPLES / "join_hdfs"))
    state = NativeState(info)
    src = sources_of(info.operators[0])[0]
    held = NativeReader(info).state(src, info.committed_batches[-1].batch_id).column("key").to_pylist()
    keys = [*sorted({k["field0"] for k in held})[:60], "ord-never-1", "ord-never-2"]
    every = {r.key: r for r in diagnose.why_missing(state, info, KeyQuestion(tuple(keys), key_field="field0")).results}
    assert len(keys) > 20 and set(every) == set(keys)
    for k in keys[:: max(1, len(keys) // 8)] + keys[-2:]:
        (alone,) = diagnose.why_missing(NativeState(info), info, KeyQuestion((k,), key_field="field0")).results
        assert answer(every[k]) == answer(alone), k
