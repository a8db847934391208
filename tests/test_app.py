"""Every page through Streamlit's AppTest, on real samples, including bad input."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from statelens.analysis.runs.progress import snapshot_lags
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.logs.event_logs import read_progress
from support import ROOT, SAMPLES, sample, scenario

APP = str(ROOT / "app.py")


def open_app(checkpoint: str | None = None, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    if checkpoint is not None:
        at.session_state["checkpoint"] = checkpoint
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def checkpoint_box(at: AppTest):  # type: ignore[no-untyped-def]
    return next(t for t in at.sidebar.text_input if t.label == "Checkpoint path")


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_overview_defaults_to_a_bundled_sample() -> None:
    at = open_app()
    info = read_checkpoint(sample("join_hdfs"))
    m = metrics(at)
    assert m["Batches"] == "17" and m["Last committed"] == "16" and m["Stateful operators"] == "1"
    assert m["Query id"] == info.query_id[:8]  # type: ignore[index]
    assert m["Watermark (UTC)"] == "00:13:45"
    # batches, snapshot lag (from the event log), what each source read, restart cost and settings, configuration
    assert len(at.dataframe) == 6 and "versions_behind" in at.dataframe[1].value.columns
    cost, settings = at.dataframe[3].value, at.dataframe[4].value
    assert len(cost) == 4 * 4  # the join's four stores, 4 partitions each: what a restart loads
    shuffle = settings[settings["setting"] == "spark.sql.shuffle.partitions"]
    assert shuffle[["value", "may change"]].values.tolist() == [[info.conf["spark.sql.shuffle.partitions"], "no"]]
    assert m["Files verified by checksum"] != "0"  # the bundled samples carry Hadoop's .crc sidecars
    ops = at.table[0].value  # operators at a glance: a table that wraps, nothing cut
    assert ops[["operator", "kind", "key", "partitions", "provider"]].values.tolist() == [
        [0, "symmetricHashJoin", "field0: string", 4, "HDFSBacked"]
    ]
    assert at.dataframe[0].value["batch_id"].tolist() == list(range(17))
    # the bundled sample's own event log is picked with it: rates, durations and late rows
    assert at.session_state["event_log"].endswith("event_logs/join_hdfs")
    assert m["Batches with progress"] == "17 / 17" and m["Late rows dropped"] == "14"
    reads = at.dataframe[2].value
    assert len(reads) == 17 * 2 and reads["read"].iloc[0] == "10 rows from 1 file(s): part-00000.json"
    assert reads["source"].tolist()[:2] == ["orders (file)", "payments (file)"]  # named by what they read


def test_choosing_a_sample_is_kept_across_pages() -> None:
    at = open_app()
    at.sidebar.button_group[0].set_value("stuck_watermark_dedup").run()  # type: ignore[attr-defined]
    assert metrics(at)["Batches"] == "12"
    at.switch_page("views/browser.py").run()
    assert at.session_state["checkpoint"].endswith("stuck_watermark_dedup")
    assert "120 rows" in at.caption[0].value


def chart_configs(at: AppTest) -> list[dict[str, Any]]:
    """Each chart's Plotly config, as the page sent it."""
    return [json.loads(el.proto.config or "{}") for el in at.get("plotly_chart")]


def open_with_event_log(name: str, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["checkpoint"] = sample(name)
    at.session_state["event_log"] = str(ROOT / "sample_checkpoints" / "event_logs" / name)
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_overview_with_an_event_log_shows_late_rows_rates_and_durations() -> None:
    at = open_with_event_log("windowed_agg")
    m = metrics(at)
    rows = sum(len(b["events"]) for b in scenario("windowed_agg").batches)
    assert m["Batches with progress"] == "13 / 13" and m["Late rows dropped"] == "6" and m["Rows read"] == f"{rows:,}"
    titles = [m.value for m in at.markdown]  # a chart's title is text above it
    assert "**Late rows dropped by the watermark**" in titles
    assert "**Input per batch \\(from the query\\'s progress\\)**" in titles and "**Batch duration by phase**" in titles
    # Plotly's own image button would save a chart untitled as plot-image.png: the page's PNG button saves it titled
    assert all(cfg["modeBarButtonsToRemove"] == ["toImage"] for cfg in chart_configs(at))
    assert {b.label for b in at.get("download_button")} >= {"PNG", "SVG", "HTML", "CSV"}
    assert not at.warning and not at.error
    info = read_checkpoint(str(ROOT / "sample_checkpoints" / "windowed_agg"))
    lags = snapshot_lags(read_progress(str(ROOT / "sample_checkpoints" / "event_logs" / "windowed_agg"), info))
    assert any(c.value.startswith(f"Snapshot lag at batch {lags[0].batch_id}") for c in at.caption)
    shown = next(d.value for d in at.dataframe if "versions_behind" in d.value.columns)
    assert shown.to_dict("records") == [x.to_dict() for x in lags]


def test_overview_event_log_of_another_query_is_one_error() -> None:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["checkpoint"] = sample("join_hdfs")
    at.session_state["event_log"] = str(ROOT / "sample_checkpoints" / "event_logs" / "dedup")
    at.run()
    assert not at.exception
    (err,) = at.error
    assert "No progress for this query" in err.value and "checkpoint's id" in err.value
    assert metrics(at)["Batches"] == "17"  # the rest of the page still renders
    assert (
        len(at.table) == 1 and len(at.dataframe) == 5
    )  # operators; batches, sources read, restart cost and settings, configuration


def test_typing_a_checkpoint_drops_the_samples_event_log() -> None:
    at = open_app()
    assert at.session_state["event_log"].endswith("event_logs/join_hdfs")
    checkpoint_box(at).set_value(sample("unbounded_agg")).run()
    assert at.session_state["event_log"] == "" and not at.error
    at.sidebar.text_input(key="event_log").set_value(str(ROOT / "nowhere")).run()
    checkpoint_box(at).set_value(sample("windowed_agg")).run()
    assert at.session_state["event_log"] == str(ROOT / "nowhere")  # typed by the user: kept
    (err,) = at.error
    assert "does not exist" in err.value


def test_health_page_with_an_event_log_flags_late_rows() -> None:
    at = open_with_event_log("windowed_agg", "views/health.py")
    codes = [w.value.split("**")[1] for w in at.warning]
    assert codes == ["late_rows_dropped"]
    assert "dropped 6 row(s) by the watermark in 3 batch(es) (4, 7, 10;" in at.warning[0].value


def test_why_missing_page_with_event_time_says_dropped_as_late() -> None:
    at = open_with_event_log("join_hdfs", "views/why_missing.py")
    at.selectbox(key="wm_op").set_value(0).run()  # the join's verdict alone
    at.text_area(key="wm_keys").set_value("ord-153").run()
    at.text_input(key="wm_event_time").set_value("2026-01-01T00:07:15").run()
    at.button(key="wm_run").click().run()
    assert not at.exception and not at.error
    cards = [m.value for m in at.markdown if m.value.startswith("####")]
    assert cards == ["#### `ord-153` &nbsp; :red-badge[Dropped as late · left side]"]
    assert at.query_params["event_time"] == "2026-01-01T00:07:15"
    at.text_input(key="wm_event_time").set_value("not a time").run()
    at.button(key="wm_run").click().run()
    assert len(at.error) == 1 and "is not an event time" in at.error[0].value


def test_overview_without_watermark_says_so() -> None:
    at = open_app(sample("unbounded_agg"))
    assert metrics(at)["Watermark (UTC)"] == "none"
    assert any("watermark is 0 in every batch" in i.value for i in at.info)


def test_operators_page_lists_stores_files_and_state_metadata() -> None:
    at = open_app(sample("join_rocksdb"), "views/operators.py")
    files, history, schemas, md = (d.value for d in at.dataframe)
    assert files["store_name"].tolist() == [
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    ]
    assert (files["partitions"] == 4).all() and (files["max_version"] == 17).all()
    assert all("changelog 68" in k for k in files["kinds"])
    assert md["stateStoreName"].tolist() == files["store_name"].tolist()
    assert set(md["maxBatchId"]) == {16}
    assert files["size"].str.endswith(("B", "KB", "MB")).all()
    assert any("versions 1–17 are batches 0–16" in c.value for c in at.caption)
    # the first store's history: one changelog per partition for every batch's version
    assert history["version"].tolist() == list(range(1, 18)) and (history["batch_id"] == history["version"] - 1).all()
    assert (history["changelog"] == 4).all() and (history["on_disk"] == "retained").all()
    assert len(schemas) == 4 and schemas["path"].str.endswith("_metadata/schema").all()


def test_operators_page_shows_transform_with_state_properties_whole() -> None:
    at = open_app(sample("transform_with_state"), "views/operators.py")
    (props,) = at.json
    value = json.loads(props.value) if isinstance(props.value, str) else props.value
    assert {v["stateName"] for v in value["stateVariables"]} >= {"count", "recent", "per_kind"}
    schemas = at.dataframe[2].value
    assert schemas["schema version"].tolist() == [0] and "_stateSchema/default/0_" in schemas["path"][0]


def test_browser_reads_join_side_at_a_chosen_batch() -> None:
    at = open_app(sample("hot_key_join"), "views/browser.py")
    # a join opens on its left side (joinSide), the rows a user means, not a store of counts
    assert at.selectbox[1].index == len(at.selectbox[1].options) - 2
    assert "1,548 rows" in at.caption[0].value and "join side left at batch 5" in at.caption[0].value
    at.selectbox[2].set_value(0).run()  # batch 0
    assert "258 rows" in at.caption[0].value
    assert at.dataframe[0].value.shape[0] == 258
    assert at.radio[0].options == ["State at batch"]  # a join side has no change feed
    at.selectbox[1].set_value(at.selectbox[1].options[1]).run()  # store left-keyWithIndexToValue
    at.radio[0].set_value("Change feed up to batch").run()
    # batch 0: every left row is inserted, and rows whose key has a right row are updated to matched
    b0 = scenario("hot_key_join").batches[0]
    right_keys = {r["k"] for r in b0["right"]}
    expected = len(b0["left"]) + sum(r["k"] in right_keys for r in b0["left"])
    assert f"**{expected} changes** · batches 0–0" in at.caption[0].value


def test_browser_labels_timers_and_shows_epoch_ms_as_times() -> None:
    at = open_app(sample("transform_with_state"), "views/browser.py")
    options = at.selectbox[1].options
    assert "registered timers (transformWithState)" in options and not any("None" in o for o in options)
    at.selectbox[1].set_value("registered timers (transformWithState)").run()
    df = at.dataframe[0].value
    assert list(df.columns[:3]) == ["key.user_id", "expiration_timestamp_ms", "expiration_timestamp_ms (time)"]
    first = df.iloc[0]
    assert first["expiration_timestamp_ms (time)"].value // 1_000_000 == first["expiration_timestamp_ms"]
    assert any("readable time column" in c.value for c in at.caption)


def test_sql_page_runs_an_example_and_offers_downloads() -> None:
    at = open_app(sample("join_hdfs"), "views/sql.py")
    at.toggle(key="sql_plain").set_value(True).run()
    examples = next(s for s in at.selectbox if s.label == "Example queries")
    assert examples.value == "Join 0: left ⋈ right state, who is waiting for whom"  # the example the editor opens with
    examples.set_value("Join 0: unmatched rows per side").run()
    assert "op0_left_keyWithIndexToValue GROUP" in at.text_area(key="sql_text").value.replace("\n", " ")
    at.button(key="sql_run").click().run()
    assert not at.error, [e.value for e in at.error]
    df = at.dataframe[-1].value
    assert set(df["side"]) == {"left", "right"}
    assert df["rows"].sum() == 72 + 72
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["CSV", "Parquet"]


def test_sql_page_counts_loaded_tables_shows_and_links_the_query() -> None:
    at = open_app(sample("unbounded_agg"), "views/sql.py")
    at.toggle(key="sql_plain").set_value(True).run()
    sql = "SELECT count(*) AS n FROM op0"
    at.text_area(key="sql_text").set_value(sql).run()
    assert any(e.label.endswith("(0 loaded)") for e in at.expander)
    at.button(key="sql_run").click().run()
    assert any(e.label == "Tables at batch 11 (1 loaded)" for e in at.expander)  # the run loaded op0
    assert any(c.value == sql for c in at.code)  # the result says which SQL produced it
    assert at.query_params["sql"] == sql and at.query_params["batch"] == "11"
    # the link opens the page with the query and runs it
    link = AppTest.from_file(APP, default_timeout=300)
    link.query_params.update({"checkpoint": sample("unbounded_agg"), "batch": "5", "sql": sql})
    link.run()
    link.switch_page("views/sql.py").run()
    assert link.selectbox(key="sql_batch").value == 5
    n = sum(len(b["events"]) for b in scenario("unbounded_agg").batches[:6])  # distinct ids in batches 0-5
    assert link.dataframe[-1].value["n"].tolist() == [n]


def test_sql_errors_show_once_and_the_page_keeps_working() -> None:
    at = open_app(sample("unbounded_agg"), "views/sql.py")
    at.toggle(key="sql_plain").set_value(True).run()
    at.text_area(key="sql_text").set_value("SELECT * FROM op42").run()
    at.button(key="sql_run").click().run()
    assert len(at.error) == 1 and "op42" in at.error[0].value and "Tables: op0" in at.error[0].value
    at.text_area(key="sql_text").set_value("SELECT count(*) AS n FROM op0").run()
    at.button(key="sql_run").click().run()
    assert not at.error and at.dataframe[-1].value["n"].tolist() == [300]


@pytest.mark.parametrize("page", ["views/overview.py", "views/operators.py", "views/browser.py", "views/sql.py"])
def test_bad_paths_show_one_error_on_every_page(tmp_path: Path, page: str) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.txt").write_text("x")
    for path, message in [
        (str(tmp_path / "missing"), "does not exist"),
        (str(tmp_path / "junk"), "not a Structured Streaming checkpoint"),
        (str(tmp_path / "junk" / "x.txt"), "is a file"),
    ]:
        at = open_app(path, page)
        assert len(at.error) == 1 and message in at.error[0].value, (page, path)


def test_corrupt_offsets_and_missing_state_in_the_app(copy_sample) -> None:  # type: ignore[no-untyped-def]
    import shutil

    cp = copy_sample("dedup")
    (cp / "offsets" / "4").write_text("v1\n{not json")
    at = open_app(str(cp))
    assert len(at.error) == 1 and "offsets/4" in at.error[0].value
    cp2 = copy_sample("unbounded_agg")
    shutil.rmtree(cp2 / "state")
    at = open_app(str(cp2), "views/browser.py")
    assert not at.error and "no state/ folder" in at.info[0].value
    assert metrics(open_app(str(cp2)))["Batches"] == "12"  # the overview still works


def test_why_missing_page_diagnoses_pasted_keys() -> None:
    at = open_app(sample("join_hdfs"), "views/why_missing.py")
    assert at.selectbox(key="wm_op").value == -1  # the whole query by default
    at.selectbox(key="wm_op").set_value(0).run()
    assert at.selectbox(key="wm_field").value == "field0"
    at.text_area(key="wm_keys").set_value("ord-154\n\nord-1000\n").run()
    at.button(key="wm_run").click().run()
    assert not at.exception and not at.error
    cards = [m.value for m in at.markdown if m.value.startswith("####")]
    assert cards == [
        "#### `ord-154` &nbsp; :red-badge[Join condition not met]",
        "#### `ord-1000` &nbsp; :red-badge[Never in state]",
    ]
    assert at.query_params["key"] == ["ord-154", "ord-1000"] and at.query_params["operator"] == "0"
    assert any("FULL OUTER JOIN op0_right_keyWithIndexToValue" in c.value for c in at.code)  # the SQL behind it


@pytest.mark.parametrize("operator", [-1, 0])
def test_why_missing_page_shows_near_misses_after_the_verdicts(operator: int) -> None:
    """The verdicts are shown while the look-alike search runs; the whole answer, near misses
    included, then takes their place (no card twice, no search line left)."""
    at = open_app(sample("join_hdfs"), "views/why_missing.py")
    at.selectbox(key="wm_op").set_value(operator).run()
    at.text_area(key="wm_keys").set_value("ORD-155\nord-156").run()
    at.button(key="wm_run").click().run()
    assert not at.exception and not at.error
    cards = [m.value for m in at.markdown if m.value.startswith("####")]
    assert [c.split("`")[1] for c in cards] == ["ORD-155", "ord-156"]
    if operator == -1:  # the whole query follows each look-alike as a key of its own: what became of that spelling
        near = [m.value for m in at.markdown if m.value.startswith("**Near misses, followed as keys of their own:**")]
        assert len(near) == 1 and "- `'ord-155'` (letter case differs; " in near[0] and ":orange-badge[waiting]" in near[0]
    else:
        near = [m.value for m in at.markdown if m.value.startswith("**Near misses:**")]
        assert len(near) == 1 and "`'ord-155'` (letter case differs; left" in near[0]
    assert not [c.value for c in at.caption if "Looking for look-alike keys" in c.value]


def test_why_missing_page_opens_from_a_link() -> None:
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["checkpoint"] = sample("session_window")
    at.query_params["operator"] = "0"
    at.query_params["key"] = ["user-3"]
    at.run()
    at.switch_page("views/why_missing.py").run()
    assert at.text_area(key="wm_keys").value == "user-3"
    # the linked diagnosis runs on open, without a click
    assert "#### `user-3` &nbsp; :violet-badge[Evicted]" in [m.value for m in at.markdown]


def test_why_missing_link_carries_batch_key_field_and_join_type() -> None:
    at = open_app(sample("join_hdfs"), "views/why_missing.py")
    at.selectbox(key="wm_op").set_value(0).run()
    at.selectbox(key="wm_batch").set_value(12).run()
    at.selectbox(key="wm_join_type").set_value("left_outer").run()
    at.text_area(key="wm_keys").set_value("ord-1").run()
    at.button(key="wm_run").click().run()
    link = {k: at.query_params[k] for k in ("batch", "key_field", "join_type")}
    assert link == {"batch": "12", "key_field": "field0", "join_type": "left_outer"}
    # the link opens the same diagnosis: at batch 12, as a left outer join
    again = AppTest.from_file(APP, default_timeout=300)
    again.query_params.update(dict(at.query_params) | {"key": ["ord-1"]})
    again.run()
    again.switch_page("views/why_missing.py").run()
    assert again.selectbox(key="wm_batch").value == 12 and again.selectbox(key="wm_join_type").value == "left_outer"
    assert any("Emitted unmatched" in m.value for m in again.markdown)  # left outer: ord-1 was emitted null-padded


def test_why_missing_page_finds_the_keys_that_never_matched() -> None:
    from statelens.spark_io.gather.unmatched import unmatched

    at = open_app(sample("join_hdfs"), "views/why_missing.py")
    at.selectbox(key="wm_op").set_value(0).run()
    at.button(key="wm_find_unmatched").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    expected = unmatched(sample("join_hdfs"))
    shown = {m.label: m.value for m in at.metric}
    assert shown == {
        {
            "condition_not_met": "Join condition not met",
            "evicted": "Evicted",
            "waiting_for_other_side": "Waiting for the other side",
        }[v]: f"{n:,} keys"
        for v, n in expected.counts().items()
    }
    table = at.dataframe[0].value
    assert expected.key_name == "order_id"  # the key column is named by the join's column (field0 = order_id)
    assert list(table["order_id"]) == [k.key for k in expected.keys]
    first = table.iloc[0]
    assert first["diagnosis"].startswith("why_missing?") and f"key={first['order_id']}" in first["diagnosis"]


def test_why_missing_link_to_a_missing_operator_says_so() -> None:
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["checkpoint"] = sample("join_hdfs")
    at.query_params["operator"] = "7"
    at.query_params["key"] = ["ord-154"]
    at.run()
    at.switch_page("views/why_missing.py").run()
    (w,) = [w for w in at.warning if "operator 7" in w.value]
    assert "does not have" in w.value and "0: symmetricHashJoin" in w.value
    assert at.selectbox(key="wm_op").value == -1  # the whole query instead


def test_health_page_flags_the_hot_key_and_offers_exports() -> None:
    at = open_app(sample("hot_key_join"), "views/health.py")
    m = metrics(at)
    assert m["Warnings"] == "4" and m["Rows in state"] == "1,573" and m["Stores"] == "4"
    assert m["Skew max/min"] == "503.3x" and m["Rows"] == "1,548"
    codes = [w.value.split("**")[1] for w in at.warning]
    assert codes[:4] == ["state_skew", "hot_key", "unbounded_growth", "watermark_missing"]
    labels = [b.label for b in at.get("download_button")]
    assert labels[0] == "Download the health report (one HTML file)"
    # skew, skew over time, growth, watermark, repartition (one per join side): each chart has its titled PNG
    # and SVG; only the heat map has no table
    assert len(at.get("plotly_chart")) == labels.count("PNG") == labels.count("SVG") == 6
    assert labels.count("CSV") == 5
    # the repartition tab: 8 -> 16 partitions; Spark refuses HDFS-backed state, the preview still shows
    # the hot key stays in one partition: against a mean over twice the partitions, it weighs twice as much
    assert m["Partitions"] == "8 → 16" and float(m["Skew after"]) > 1.9 * float(m["Skew now"])
    assert any("STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER" in e.value for e in at.error)
    assert any("_streamingCheckpointManager.repartition" in c.value for c in at.code)


def test_health_page_on_a_healthy_sample() -> None:
    at = open_app(sample("windowed_agg"), "views/health.py")
    assert metrics(at)["Warnings"] == "0"
    assert any("looks healthy" in s.value for s in at.success)


def test_spark_setting_rejects_an_unreachable_connect_server() -> None:
    from statelens.spark_io.runtime import session

    at = open_app()
    at.radio(key="spark_kind").set_value("Spark Connect").run()
    at.text_input(key="spark_url").set_value("sc://127.0.0.1:1").run()
    at.button(key="spark_apply").click().run()
    assert len(at.error) == 1 and "does not answer" in at.error[0].value
    assert session.target().remote is None  # still local: nothing was changed
    assert metrics(at)["Batches"] == "17"  # and the app keeps working


def test_sql_page_row_budget_then_spill() -> None:
    at = open_app(sample("unbounded_agg"), "views/sql.py")
    at.toggle(key="sql_plain").set_value(True).run()
    at.number_input(key="sql_budget").set_value(100).run()
    at.text_area(key="sql_text").set_value("SELECT count(*) AS n FROM op0").run()
    at.button(key="sql_run").click().run()
    assert len(at.error) == 1 and "Too many rows to load" in at.error[0].value and "more than 100 rows" in at.error[0].value
    at.toggle(key="sql_spill").set_value(True).run()
    at.button(key="sql_run").click().run()
    assert not at.error and at.dataframe[-1].value["n"].tolist() == [300]


def test_after_cancel_read_again_reads() -> None:
    """What a click on Cancel leaves (the page's cancel flag): a message and a Read again button
    that runs the read."""
    at = open_app(sample("join_hdfs"), "views/why_missing.py")
    at.text_area(key="wm_keys").set_value("ord-154").run()
    at.session_state["_cancelled:why-missing"] = True
    at.button(key="wm_run").click().run()
    assert any("cancelled" in i.value for i in at.info)
    assert not [m for m in at.markdown if m.value.startswith("####")]
    at.button(key="again-why-missing").click().run()
    cards = [m.value for m in at.markdown if m.value.startswith("####")]
    assert cards == ["#### `ord-154` &nbsp; :orange-badge[Waiting] :gray-badge[cause unknown · operator 0 · batch 15]"]


def test_time_zone_choice_shows_times_in_that_zone() -> None:
    at = open_app(sample("windowed_agg"))
    info = read_checkpoint(sample("windowed_agg"))
    wm = info.batches[-1].watermark_ms
    assert metrics(at)["Watermark (UTC)"] == dt.datetime.fromtimestamp(wm / 1000, dt.UTC).strftime("%H:%M:%S")
    at.sidebar.selectbox(key="tz").set_value("Asia/Kolkata").run()  # UTC+05:30, no daylight saving
    local = dt.datetime.fromtimestamp(wm / 1000, dt.UTC) + dt.timedelta(hours=5, minutes=30)
    assert metrics(at)["Watermark (Asia/Kolkata)"] == local.strftime("%H:%M:%S")
    batches = at.dataframe[0].value
    assert str(batches["watermark"].dt.tz) == "Asia/Kolkata"
    at.switch_page("views/browser.py").run()
    assert at.session_state["tz"] == "Asia/Kolkata"  # kept across pages


def test_browser_follows_one_key_across_two_batches() -> None:
    """ord-154 (case 4: its payment 8 minutes later) is on the left side from batch 15 on."""
    at = open_app(sample("join_hdfs"), "views/browser.py")
    left = next(o for o in at.selectbox[1].options if o.startswith("store: left-keyWithIndexToValue"))
    at.selectbox[1].set_value(left).run()
    at.text_input(key="kx_key").set_value("ord-154").run()
    at.selectbox(key="kx_a").set_value(14).run()
    at.selectbox(key="kx_b").set_value(16).run()
    assert not at.error
    caps = [c.value for c in at.caption]
    assert "**At batch 14: 0 row(s)**" in caps and "**At batch 16: 1 row(s)**" in caps
    (changes_cap,) = [c for c in caps if c.startswith("**Changes in batches 15–16")]
    changes = at.dataframe[-1].value
    assert changes["batch_id"].min() == 15 and set(changes["change_type"]) <= {"update", "delete"}
    arrived = next(
        b for b, batch in enumerate(scenario("join_hdfs").batches) for o in batch["orders"] if o["order_id"] == "ord-154"
    )
    assert arrived == 15 and changes_cap


def test_why_missing_evidence_shows_epoch_ms_as_times() -> None:
    """applyInPandasWithState keeps last_event_ms and timeoutTimestamp in its state value."""
    at = open_app(sample("apply_in_pandas_with_state"), "views/why_missing.py")
    at.text_area(key="wm_keys").set_value("user-2").run()
    at.button(key="wm_run").click().run()
    assert not at.error
    ev = at.dataframe[0].value
    assert "value.groupState.last_event_ms (time)" in ev.columns and "value.timeoutTimestamp (time)" in ev.columns
    row = ev.iloc[-1]  # every field of the value its own column, its epoch milliseconds beside it as a time
    assert row["value.groupState.last_event_ms (time)"].timestamp() * 1000 == row["value.groupState.last_event_ms"]
    assert row["value.timeoutTimestamp (time)"].timestamp() * 1000 == row["value.timeoutTimestamp"]
    assert "key.user_id" in ev.columns and "value" not in ev.columns


def test_why_missing_of_the_whole_query_follows_each_record() -> None:
    """A bundled sample opens with its event log and input files: each record of the key as a row
    through both operators, the late one dropped by the dedup, the window that went out Emitted."""
    at = open_with_event_log("dedup_window_chain", "views/why_missing.py")
    assert at.selectbox(key="wm_op").value == -1 and at.selectbox(key="wm_field").value == ""  # every key column
    at.text_area(key="wm_keys").set_value("user-second\nuser-late").run()
    at.button(key="wm_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    cards = [m.value for m in at.markdown if m.value.startswith("####")]
    assert cards == [  # what reached the output and the root cause, where and when: the answer first
        "#### `user-second` &nbsp; :orange-badge[Partly written] :red-badge[dropped as late · operator 1 · batch 10]",
        "#### `user-late` &nbsp; :red-badge[Lost] :red-badge[dropped as late · operator 1 · batch 10]",
    ]
    verdicts = [c.value for c in at.caption if c.value.startswith("Operator") and "'s verdict" in c.value]
    # the verdict is the operator's that dropped the record: the dedup's (operator 1) for the late one
    assert verdicts == ["Operator 0's verdict: :green-badge[Emitted]", "Operator 1's verdict: :red-badge[Dropped as late]"]
    flows = [m.value for m in at.markdown if m.value.startswith("| input record")]
    assert len(flows) == 2 and "| operator 1 | operator 0 | output |" in flows[0]
    assert ":blue-badge[passed · b1]" in flows[0] and ":green-badge[Emitted · b9]" in flows[0]
    assert ":red-badge[dropped as late · b10]" in flows[0] and ":red-badge[dropped as late · b10]" in flows[1]
    assert "operator" not in at.query_params and at.query_params["key"] == ["user-second", "user-late"]


def test_the_overview_explains_a_pasted_restart_error() -> None:
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    box = next(t for t in at.text_area if t.key == "restart_error_text")
    box.input((SAMPLES / "restart_errors" / "operator_added" / "error.txt").read_text()).run()
    shown = [m.value for m in at.markdown]
    assert "- operator 1 (dedupe) added" in shown
    assert any("STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in m for m in shown)
    assert not at.exception


def test_a_native_why_missing_page_starts_no_jvm() -> None:
    """Every read of the whole-query answer is native: the page must not start Spark around it (a JVM
    takes the CPU the answer needs). In a process of its own, where no other test started Spark."""
    import subprocess
    import sys

    code = f"""
import sys
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
from streamlit.testing.v1 import AppTest
from statelens.spark_io.runtime import session
P = {str(SAMPLES / "pipelines" / "user_sessions")!r}
at = AppTest.from_file({str(APP)!r}, default_timeout=300)
at.session_state["checkpoint"] = P + "/checkpoint"
at.session_state["event_log"] = P + "/event_log"
at.run()
at.switch_page("views/why_missing.py").run()
at.text_area(key="wm_keys").set_value("u-late\\nu-open").run()
at.button(key="wm_run").click().run()
assert not at.exception and not at.error, [e.value for e in at.error]
assert [m.value.split("`")[1] for m in at.markdown if m.value.startswith("####")] == ["u-late", "u-open"]
print("JVM", session.is_running())
"""
    env = {**__import__("os").environ, "STATELENS_ENGINE": "auto"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("JVM False"), r.stdout[-500:]
