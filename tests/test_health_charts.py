"""Health a team can act on: findings only where the state really cannot shrink, projections from
the recent trend at the real cadence, rows counted as users mean them, charts that do not mislead."""

from __future__ import annotations

import pytest

from statelens.analysis.charts import charts
from statelens.analysis.charts.export import figure_bytes
from statelens.analysis.charts.report import checkup_figures
from statelens.analysis.checkpoint import health
from statelens.analysis.core.model import Batch
from statelens.spark_io.gather import checkup as spark_health
from support import COMPAT, sample

HEALTHY = [
    "join_hdfs",
    "join_rocksdb",
    "windowed_agg",
    "dedup",
    "dedup_within_watermark",
    "session_window",
    "apply_in_pandas_with_state",
    "transform_with_state",
    "chained_join_agg",
    "compat/4.3.0/processing_time_timeout",
    "compat/4.3.0/tws_ttl",
    "compat/4.3.0/restarted",
]
UNBOUNDED = [
    "unbounded_agg",
    "hot_key_join",
    "compat/4.3.0/complete_mode",
    "compat/4.3.0/complete_no_watermark",
    "compat/4.3.0/dedup_no_event_time",
]


def checkup(name: str) -> spark_health.Checkup:
    return spark_health.checkup(sample(name))


@pytest.mark.parametrize("name", HEALTHY)
def test_no_warning_and_no_projection_on_healthy_samples(name: str, spark) -> None:  # type: ignore[no-untyped-def]
    c = checkup(name)
    codes = [f.code for f in c.findings]
    assert not [f.message for f in c.findings if f.severity == "warning"], name
    assert "projection" not in codes and "unbounded_growth" not in codes


@pytest.mark.parametrize("name", UNBOUNDED)
def test_unbounded_growth_only_where_state_cannot_shrink(name: str, spark) -> None:  # type: ignore[no-untyped-def]
    c = checkup(name)
    (f,) = [f for f in c.findings if f.code == "unbounded_growth"]
    assert f.evidence["operator_id"] == 0
    assert "projection" in [x.code for x in c.findings]  # only alongside unbounded growth


def test_processing_time_timeouts_and_ttl_are_ways_out(spark) -> None:  # type: ignore[no-untyped-def]
    for name in ("compat/4.3.0/processing_time_timeout", "compat/4.3.0/tws_ttl"):
        c = checkup(name)
        assert "watermark_missing" not in [f.code for f in c.findings], name


def test_rows_in_state_count_join_rows_per_side(spark) -> None:  # type: ignore[no-untyped-def]
    c = checkup("join_hdfs")
    read = spark.read.format("statestore")
    per_side = sum(
        read.option("operatorId", 0).option("joinSide", side).load(sample("join_hdfs")).count() for side in ("left", "right")
    )
    assert health.rows_in_state(c.growth.stores) == per_side == 144
    assert "keyToNumValues stores are left out" in health.counted_stores_text(c.growth.stores)


def _batches(times: list[int]) -> list[Batch]:
    return [Batch(i, True, 0, t) for i, t in enumerate(times)]


def _store(rows: list[int], byte_rows: int = 100) -> health.StoreGrowth:
    return health.StoreGrowth(0, "default", dict(enumerate(rows)), {}, {}, {}, {i: r * byte_rows for i, r in enumerate(rows)})


def test_projection_uses_the_recent_slope_and_the_real_cadence() -> None:
    minute = 60_000
    # 20 batches a minute apart, one idle gap of 10 hours; rows grow by 5 per batch, slower early on
    times = [i * minute for i in range(10)] + [10 * 60 * minute + i * minute for i in range(10, 20)]
    rows = [i for i in range(10)] + [10 + 5 * (i - 10) for i in range(10, 20)]
    f = health.projection([_store(rows)], _batches(times), {0})
    assert f is not None
    assert f.evidence["rows_per_batch"] == pytest.approx(5.0)  # the last 10 batches, not first to last
    assert f.evidence["batches_per_day"] == pytest.approx(1440.0)  # the idle gap is left out
    assert "1 idle gap(s) left out" in f.message and "KB" in f.message
    # plateau or shrink: no projection; back to back: no daily rate
    assert health.projection([_store([5] * 20)], _batches(times), {0}) is None
    assert health.projection([_store(list(range(20, 0, -1)))], _batches(times), {0}) is None
    quick = health.projection([_store(rows)], _batches([i * 1000 for i in range(20)]), {0})
    assert quick is not None and quick.evidence["batches_per_day"] is None and "cannot be told" in quick.message


def test_charts_axes_colours_and_units(spark) -> None:  # type: ignore[no-untyped-def]
    c = checkup("hot_key_join")
    skew = c.skews[0]
    fig = charts.skew_figure(skew)
    bars, line = fig.data
    assert list(bars.x) == [str(p) for p in range(8)]  # every partition, as whole numbers
    assert bars.marker.color != line.line.color
    assert fig.layout.yaxis.rangemode == "tozero" and fig.layout.yaxis2.rangemode == "tozero"
    assert fig.layout.yaxis2.title.text == "bytes on disk (KB)"
    g = next(g for g in c.growth.stores if g.store_name == skew.store_name)
    heat = charts.skew_heatmap_figure(g, len(skew.rows_by_partition))
    assert heat.data[0].zmin == 0 and list(heat.data[0].y) == [str(p) for p in range(8)]
    growth = charts.growth_figure(c.growth.stores)
    colours = [t.line.color for t in growth.data if t.showlegend is not False]
    assert len(colours) == len(c.growth.stores) == len(set(colours))
    assert growth.layout.legend.x > 1  # beside the plot, off the axes and the title
    none = charts.watermark_figure(c.info.batches)
    assert "No watermark" in none.layout.annotations[0].text and not none.data


@pytest.mark.browser  # kaleido's Chromium draws them (the shared one: tests/conftest.py)
@pytest.mark.parametrize("name", ["hot_key_join", "unbounded_agg"])
def test_every_report_chart_renders_to_png_and_svg(name: str, spark) -> None:  # type: ignore[no-untyped-def]
    c = checkup(name)
    for title, fig in checkup_figures(c.info.batches, c.skews, c.growth.stores):
        png = figure_bytes(fig, "png")
        svg = figure_bytes(fig, "svg")
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in svg[:2000], title


def test_hot_key_advice_fits_the_operator(spark) -> None:  # type: ignore[no-untyped-def]
    c = checkup("hot_key_join")
    (hot,) = [f for f in c.findings if f.code == "hot_key"]
    assert "replicate the other side" in hot.message and '"hot"' in hot.message
    dedup = spark_health.skew(str(COMPAT / "4.3.0" / "dedup"))
    assert not any(k["rows"] > 1 for k in dedup.top_keys)  # every key one row: no hottest keys to show
