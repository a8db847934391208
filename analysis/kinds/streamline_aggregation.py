"""An aggregation in real-time mode (``trigger(realTime=...)``, Spark 4.1+): Spark plans it as its own
node, which names its state ``StatefulStreamlineAggregate``. Its state is an aggregation's (a row per
group: the grouping columns, the aggregate's buffer), and it runs in update mode: a group's new value
is emitted as soon as a record changes it. A record is followed, and a key it holds answered, as any
aggregation's."""

from __future__ import annotations

from statelens.analysis.core.operator_kinds import OperatorKind
from statelens.analysis.kinds import aggregation

KIND = OperatorKind(
    "streamline_aggregation",
    ("statefulstreamlineaggregate",),
    ("StatefulStreamlineAggregate",),
    "real-time aggregation",
    emits_when_evicted=True,
    watermark_evicts=True,
    output_mode="update",
    needs_key_time=aggregation.WINDOWED,
    stage=aggregation.AggregationStage(),
    in_state=aggregation.in_state,
    evicted=aggregation.evicted,
)
