"""Why a key is missing: the whole query's answer or one operator's verdicts, the key fields, the keys that never matched."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from statelens import results
from statelens.analysis.core.errors import InvalidInput
from statelens.opened import Opened, _question


class AskKey(Opened):
    """Why a key is missing: the whole query's answer or one operator's verdicts, the key fields, the keys that never matched."""

    @_question
    def why_missing(
        self,
        *keys: str,
        operator: int | None = None,
        batch: int | None = None,
        key_field: str | None = None,
        join_type: str | None = None,
        event_time: str | int | None = None,
        event_log: str | None = None,
        input_root: str | Sequence[str] | None = None,
        sink: str | None = None,
        near_misses: bool = True,
    ) -> results.Answers:
        """Why each key never reached the output: by default the whole query (each input record of
        the key followed through every operator), or one ``operator``'s verdict. One answer per key.
        ``input_root``: where the input files are now, if they moved (several folders: each in turn,
        the archive ``cleanSource`` moved the files read to and the source's folder holding the rest)."""
        from statelens.analysis.core.key_format import parse_event_time
        from statelens.analysis.core.question import KeyQuestion

        if not keys:
            raise InvalidInput("Give the keys to explain: cp.why_missing('ord-42', ...).")
        q = KeyQuestion(
            tuple(str(k) for k in keys),
            key_field,
            event_log,
            input_root,
            sink,
            operator,
            batch,
            join_type,
            parse_event_time(str(event_time)) if event_time is not None else None,
            near_misses,
        )
        return self.ask(q)

    @_question
    def ask(self, q: Any) -> results.Answers:
        """Why-missing's question as one value (``statelens.KeyQuestion``: the keys and how they are asked),
        what ``why_missing`` asks: ``cp.ask(statelens.KeyQuestion(("ord-42",), event_log=...))``.
        Kept: the state read stays for the keys asked after, and the input files searched for a
        key's verdicts are not searched again for its look-alikes."""
        from statelens.spark_io.gather.diagnosis import why_missing

        info, access = self.info(), self._access(q.operator, q.batch)
        searched = self._kept.peek("searched", q.but(near_misses=False)) if q.whole_query and q.near_misses else None
        report = why_missing(self.path, q, info, access, self._progress_log(q.event_log), searched)
        if self.keep and access is not None:
            from statelens.spark_io.readers.access import between_questions

            if q.whole_query and not q.near_misses:
                from statelens.analysis.fate.answer import QueryAnswer

                assert isinstance(report, QueryAnswer)
                self._kept.put("searched", q, report.input_search, 64)
            between_questions(access)
        return results.QueryAnswers(report) if q.whole_query else results.Answers(report)

    @_question
    def key_fields(self, operator: int) -> dict[str, str]:
        """An operator's key fields and how each reads (a join's ``field0 (order_id)``), the default one
        first. Kept and read natively: through the state its questions will read (a join's columns);
        through Spark the fields only (a job per side before any question)."""
        from statelens.spark_io.gather.diagnosis import key_field_labels
        from statelens.spark_io.readers.engine import wants_native

        info = self.info()
        if not (self.keep and wants_native(info)) or info.last_committed is None:
            return key_field_labels(info, operator, columns=False)
        return key_field_labels(info, operator, self._access(operator, info.last_committed))

    @_question
    def key_columns(self, event_log: str | None = None) -> list[str]:
        """The input columns a key may be in (every operator's key columns, operator 0's first)."""
        from statelens.spark_io.gather.fate import key_columns_of
        from statelens.spark_io.readers.access import state_access

        info = self.info()
        access = self._access(None) or state_access(info)
        return key_columns_of(info, access, self._progress_log(event_log))

    @_question
    def unmatched(
        self,
        operator: int | None = None,
        batch: int | None = None,
        since: int | None = None,
        join_type: str | None = None,
        event_log: str | None = None,
    ) -> results.Unmatched:
        """Which keys never matched: a join's keys evicted unmatched, waiting, or rejected by the
        condition; an aggregation's windows still waiting."""
        from statelens.spark_io.gather.unmatched import unmatched

        report = unmatched(self.path, operator, batch, since, info=self.info(), join_type=join_type, event_log=event_log)
        return results.Unmatched(report)

    def check_answers(self, answers: results.Answers, q: Any) -> tuple[bool, str]:
        """Why-missing's answers to ``q`` asked again with Spark reading the state."""
        from statelens.spark_io.gather import crosscheck

        progress = self._progress_log(q.event_log)
        if q.whole_query:
            return crosscheck.check_why_missing_whole(self.info(), answers.report, q, progress)
        return crosscheck.check_why_missing(self.info(), answers.report, q, progress)
