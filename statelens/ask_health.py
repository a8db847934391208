"""The state's health: skew, growth, the checkup, its charts and the one-file report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from statelens import results
from statelens.analysis.core.errors import InvalidInput
from statelens.opened import Opened, _question


class AskHealth(Opened):
    """The state's health: skew, growth, the checkup, its charts and the one-file report."""

    @_question
    def skew(self, operator: int | None = None, store: str | None = None, batch: int | None = None) -> results.Skew:
        """Rows and bytes per partition of one store, skew ratios, hot keys."""
        from statelens.spark_io.gather.checkup import skew

        return results.Skew(skew(self.path, operator, store, batch))

    @_question
    def growth(self, operator: int | None = None, store: str | None = None) -> results.Growth:
        """Rows and bytes per batch from the change feed, with findings."""
        from statelens.spark_io.gather.checkup import growth

        return results.Growth(growth(self.path, operator, store))

    @_question
    def checkup(self, event_log: str | None = None) -> Any:
        """The whole health check (``spark_io.gather.checkup.Checkup``): skew and growth of every store,
        configuration, the doctor, and with ``event_log`` the rows dropped by the watermark."""
        from statelens.spark_io.gather.checkup import checkup

        return checkup(self.path, info=self.info(), event_log=event_log)

    @_question
    def chart(self, name: str, operator: int | None = None, store: str | None = None, batch: int | None = None) -> results.Chart:
        """One of the health charts with its data: ``watermark`` (per batch), ``skew`` (rows and bytes
        per partition of a store at ``batch``) or ``growth`` (rows and bytes per batch)."""
        from statelens.analysis.charts import charts

        if name == "watermark":
            info = self.info()
            return results.Chart(name, charts.watermark_table(info.batches), charts.watermark_figure(info.batches))
        if name == "skew":
            r = self.skew(operator, store, batch).report
            return results.Chart(name, charts.skew_table(r), charts.skew_figure(r))
        if name == "growth":
            g = self.growth(operator, store).report
            return results.Chart(name, charts.growth_table(g.stores), charts.growth_figure(g.stores))
        raise InvalidInput(f"Unknown chart '{name}': use watermark, skew or growth.")

    @_question
    def report(
        self,
        event_log: str | None = None,
        keys: list[str] | tuple[str, ...] = (),
        input_root: str | Sequence[str] | None = None,
        sink: str | None = None,
    ) -> results.Report:
        """The one-file HTML health report (``.html``): summary, findings, charts, and with ``keys``
        why each never reached the output, through the whole query."""
        c = self.checkup(event_log)
        answers = None
        if keys:
            from statelens.analysis.core.question import KeyQuestion
            from statelens.spark_io.gather.diagnosis import why_missing

            q = KeyQuestion(
                tuple(str(k) for k in keys),
                event_log=event_log,
                input_root=input_root,
                sink=sink,
            )
            answers = why_missing(self.path, q, info=c.info).results
        return results.Report(c, answers)

    def check_skew(self, report: Any) -> tuple[bool, str]:
        from statelens.spark_io.gather import crosscheck

        return crosscheck.check_skew(self.info(), report)
