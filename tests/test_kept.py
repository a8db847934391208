"""A kept checkpoint (``statelens.open(path, keep=True)``: the app's one object per checkpoint and
committed batch) answers as a fresh one does, asked in the app's order, and reads once what its
questions share: the state every operator's questions read, and the input files searched for the
keys' verdicts, not searched again for their look-alikes."""

from __future__ import annotations

import json

import pytest

import statelens
from statelens.results import jsonable
from support import SAMPLES, sample

CASES = {  # sample -> keys a user asks about (in state, emitted, never seen) and its event log
    "dedup_window_chain": ("user-0", "user-2", "no-such-user"),
    "outer_join_clicks": ("ad-8-0", "ad-9-2", "ad-999"),
    "join_rocksdb": ("ord-1", "ord-2", "ord-999"),
}


def _json(answers: statelens.Answers) -> str:
    return json.dumps(jsonable(answers.to_dict()), sort_keys=True, default=str)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_kept_checkpoint_answers_as_a_fresh_one(name: str) -> None:
    path, log, inputs = sample(name), str(SAMPLES / "event_logs" / name), str(SAMPLES / "inputs" / name)
    kept = statelens.open(path, keep=True)
    last = kept.info().last_committed
    for q in (
        statelens.KeyQuestion(CASES[name], event_log=log, input_root=inputs),
        statelens.KeyQuestion(CASES[name], event_log=log, operator=0, batch=last),
    ):
        for near in (False, True):  # the page asks for the verdicts first, then for the look-alikes
            asked = q.but(near_misses=near)
            assert _json(kept.ask(asked)) == _json(statelens.open(path).ask(asked)), (name, asked)


def test_a_kept_checkpoint_reads_the_shared_state_and_input_once() -> None:
    path = sample("outer_join_clicks")
    kept = statelens.open(path, keep=True)
    q = statelens.KeyQuestion(("ad-8-0",), input_root=str(SAMPLES / "inputs" / "outer_join_clicks"), near_misses=False)
    first = kept.ask(q)
    access = kept._access(None)
    assert kept.ask(q.but(keys=("ad-9-2",)))[0].key == "ad-9-2"
    assert kept._access(None) is access  # the second key read the same state
    searched = kept._kept.peek("searched", q)
    assert searched is first.report.input_search and searched.files_searched > 0
    # the look-alikes' question reuses that search: its answer names the same files searched
    near = kept.ask(q.but(near_misses=True)).report.input_search
    assert near.files_searched == searched.files_searched
    # a fresh checkpoint keeps nothing
    fresh = statelens.open(path)
    fresh.ask(q)
    assert fresh._access(None) is None and fresh._kept.peek("searched", q) is None
