"""``Checkpoint``: one checkpoint and every question the CLI asks of it, one method each; the questions
live by kind beside this (``ask_log``, ``ask_key``, ``ask_health``, ``ask_change``, ``ask_state``), on
what they share (``opened.Opened``)."""

from __future__ import annotations

from statelens.ask_change import AskChange
from statelens.ask_health import AskHealth
from statelens.ask_key import AskKey
from statelens.ask_log import AskLog
from statelens.ask_state import AskState


class Checkpoint(AskLog, AskKey, AskHealth, AskChange, AskState):
    """One checkpoint. Each method reads it afresh (a running query commits new batches) unless it
    was opened with ``keep``; SQL keeps the tables it loaded per batch."""
