"""Every feature over every compatibility sample (PySpark 3.4-4.3 and non-default configurations).

Expected values come from each sample's truth file, written when the sample was generated: the
rows the query emitted and, per committed batch, every store's keys as Spark's own State Data
Source read them. A verdict is right when it agrees with what happened to the key, not with
what State Lens's code would compute.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from typing import Any

import golden
import pytest

from statelens.analysis.charts.report import checkup_report
from statelens.analysis.checkpoint.doctor import examine
from statelens.analysis.core.model import StateSource, table_name
from statelens.analysis.core.operator_kinds import kind_of
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.gather import checkup
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.gather.workspace import Workspace
from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint
from statelens.spark_io.readers import state_reader
from support import COMPAT, COMPAT_NAMES

KIND = {
    "join": wm.JOIN,
    "aggregation": wm.AGGREGATION,
    "dedup": wm.DEDUP,
    "group_state": wm.GROUP_STATE,
    "transform_with_state": wm.TWS,
}
# queries with several stateful operators: Spark numbers them from the sink up
OPERATOR_KINDS = {"dedup_then_window": {0: "aggregation", 1: "dedup"}}
KEY_FIELD = {"join": "field0", "aggregation": "user_id", "dedup": "event_id", "group_state": "user_id"}


@cache
def truth(name: str) -> dict[str, Any]:
    version, scenario = name.split("/")
    return json.loads((COMPAT / version / "truth" / f"{scenario}.json").read_text())


def path(name: str) -> str:
    return str(COMPAT / name)


def keys_at(t: dict[str, Any], label: str, batch: int, field: str) -> dict[str, list[Any]]:
    """key field value -> the matched flags of its rows, in one store at one batch (read only: kept
    for the truth's every later key)."""
    return _keys_at(f"{t['spark_version']}/{t['scenario']}", label, batch, field)


@cache
def _keys_at(name: str, label: str, batch: int, field: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for key_json, matched, _pid in truth(name)["state"][label][str(batch)]:
        out.setdefault(str(json.loads(key_json)[field]), []).append(matched)
    return out


def ever(t: dict[str, Any], label: str, field: str) -> dict[str, list[Any]]:
    """key -> matched flags over every committed batch (in batch order; read only)."""
    return _ever(f"{t['spark_version']}/{t['scenario']}", label, field)


@cache
def _ever(name: str, label: str, field: str) -> dict[str, list[Any]]:
    t = truth(name)
    out: dict[str, list[Any]] = {}
    for b in t["committed_batches"]:
        for k, flags in keys_at(t, label, b, field).items():
            out.setdefault(k, []).extend(flags)
    return out


@cache
def spark_feed(name: str, side: str) -> dict[str, list[Any]]:
    """key -> matched flags of its rows in the side's change feed, read with plain Spark (no State Lens
    code): rows that entered and left state within one batch show here and in no batch's state."""
    from pyspark.sql import functions as F

    from statelens.spark_io.runtime.session import get_spark

    t = truth(name)
    if t["conf"].get("spark.sql.streaming.stateStore.providerClass", "").endswith("RocksDBStateStoreProvider") and not t[
        "conf"
    ].get("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"):
        return {}  # no change feed: the state at every batch is all there is
    df = (
        get_spark()
        .read.format("statestore")
        .option("operatorId", "0")
        .option("storeName", read_checkpoint(path(name)).operators[0].join_rows_store(side))
        .option("readChangeFeed", "true")
        .option("changeStartBatchId", str(t["committed_batches"][0]))
        .option("changeEndBatchId", str(t["committed_batches"][-1]))
        .load(path(name))
        .where("change_type = 'update'")
    )
    matched = F.col("value.matched") if "matched" in df.schema["value"].dataType.fieldNames() else F.lit(None)
    out: dict[str, list[Any]] = {}
    for r in df.select(F.col("key.field0").alias("k"), matched.alias("m")).collect():
        out.setdefault(r["k"], []).append(r["m"])
    return out


def expected_join(t: dict[str, Any], key: str) -> str:
    last = t["committed_batches"][-1]
    now = {side: keys_at(t, side, last, "field0").get(key, []) for side in ("left", "right")}
    name = f"{t['spark_version']}/{t['scenario']}"
    hist = {side: ever(t, side, "field0").get(key, []) + spark_feed(name, side).get(key, []) for side in ("left", "right")}
    fmt1 = all(m is None for flags in hist.values() for m in flags) and any(hist.values())
    if any(m for flags in now.values() for m in flags):
        return wm.MATCHED
    if now["left"] or now["right"]:
        side = "left" if now["left"] else "right"
        other = "right" if side == "left" else "left"
        other_gone = bool(hist[other]) and not now[other]
        if fmt1:
            return wm.IN_STATE if (now[other] or other_gone) else wm.WAITING_OTHER_SIDE
        if now["left"] and now["right"]:
            return wm.CONDITION_NOT_MET
        if other_gone and not any(hist[other]):
            return wm.CONDITION_NOT_MET
        return wm.WAITING_OTHER_SIDE
    if not hist["left"] and not hist["right"]:
        return wm.NEVER_IN_STATE
    preserved = wm.PRESERVED[t["join_type"]]
    if any(hist[s] and not any(hist[s]) and not fmt1 for s in preserved) and not any(m for f in hist.values() for m in f):
        return wm.EMITTED_UNMATCHED
    return wm.EVICTED


def expected_other(t: dict[str, Any], label: str, key: str, field: str, watermark: int) -> str:
    last = t["committed_batches"][-1]
    if key in keys_at(t, label, last, field):
        if t["kind"] == "aggregation":
            return wm.IN_STATE if t["output_mode"] == "complete" or not watermark else wm.WAITING_WATERMARK
        return {"dedup": wm.DROPPING_DUPLICATES}.get(t["kind"], wm.IN_STATE)
    return wm.EVICTED if key in ever(t, label, field) else wm.NEVER_IN_STATE


def input_keys(t: dict[str, Any], field: str) -> list[str]:
    """Every key the truth saw in state, plus keys that never reached state."""
    seen = sorted({k for label in t["state"] for k in ever(t, label, field)})
    return [*seen, "never-seen-key"]


@pytest.mark.parametrize("name", COMPAT_NAMES)
def test_overview_and_operator_kind(name: str) -> None:
    t = truth(name)
    info = read_checkpoint(path(name))
    assert [b.batch_id for b in info.committed_batches] == t["committed_batches"]
    kinds = OPERATOR_KINDS.get(t["scenario"], {0: t["kind"]})
    assert {o.operator_id: kind_of(o.operator_name) for o in info.operators} == {i: KIND[k] for i, k in kinds.items()}
    old = t["spark_version"].startswith("3.")
    assert all((o.inferred_from is not None) == old for o in info.operators)
    if "checkpointFormatVersion" in json.dumps(t["conf"]):
        assert info.checkpoint_format_version == 2
        assert any("_" in f.path.rsplit("/", 1)[-1] for f in list_state_files(info.path) if f.kind in ("zip", "changelog"))


@pytest.mark.parametrize("name", COMPAT_NAMES)
def test_state_rows_equal_spark_truth(name: str) -> None:
    """Every store's rows at the last committed batch (as many, in the same partitions) and its change
    feed, as State Lens's reader of Spark's State Data Source read them with the pinned Spark (the
    sample's golden file: ``test_native_equality.py`` holds it to a live read of a sample per Spark
    version and state format), against the sample's own Spark's read of them (its truth file)."""
    t = truth(name)
    info = read_checkpoint(path(name))
    header, reads = golden.read(f"compat/{name}")
    assert header["fingerprint"] == golden.fingerprint(COMPAT / name), f"compat/{name}: its golden file is older"
    (meta,) = [r for r in reads if r["read"] == "state-metadata"]
    assert (not meta["rows"]) == t["spark_version"].startswith("3."), len(meta["rows"])  # no operator metadata before 4.0
    state = golden.state_at_batches(f"compat/{name}")
    last = t["committed_batches"][-1]
    for label in t["state"]:
        src = truth_source(info, label)
        rows = state[src.describe()].get(last, [])
        want = Counter(pid for _key, _matched, pid in t["state"][label][str(last)])
        assert Counter(r["partition_id"] for r in rows) == want, (label, last)
        if src.has_change_feed and state_reader.has_change_feed(info, src.operator_id):
            (feed,) = [r for r in reads if r["read"] == "changes" and r["source"] == src.describe()]
            assert feed["batches"][-1] == last and feed["rows"], label


@pytest.mark.parametrize("name", COMPAT_NAMES)
def test_why_missing_agrees_with_what_happened(name: str, spark) -> None:  # type: ignore[no-untyped-def]
    t = truth(name)
    info = read_checkpoint(path(name))
    last = info.committed_batches[-1]
    labels = [lb for lb in t["state"] if lb not in ("right",)]
    for label in labels:
        op_id = 0 if t["kind"] == "join" else int(label.split(":")[0])
        kind = OPERATOR_KINDS.get(t["scenario"], {0: t["kind"]})[op_id]
        if kind == "transform_with_state":
            field = "user_id"
        else:
            field = KEY_FIELD[kind]
        sub = dict(t, kind=kind)
        keys = input_keys(
            {**t, "state": {k: v for k, v in t["state"].items() if k in (("left", "right") if kind == "join" else (label,))}},
            field,
        )
        report = why_missing(
            info.path, KeyQuestion(tuple(keys), operator=op_id, key_field=field, join_type=t.get("join_type")), info=info
        )
        assert report.operator_report.history_error is None
        got = {r.key: r for r in report.results}
        for key in keys:
            want = expected_join(sub, key) if kind == "join" else expected_other(sub, label, key, field, last.watermark_ms)
            assert got[key].verdict == want, (key, got[key].explanation)
            if want == wm.EMITTED_UNMATCHED:  # each preserved side's null-padded row, in its eviction batch
                assert got[key].evicted_at_batch == max(got[key].evicted_by_side.values())
                for side, batch in got[key].evicted_by_side.items():
                    col, other = ("order_id", "payment_id") if side == "left" else ("paid_order_id", "order_id")
                    padded = [r for r in t["emitted"] if r.get(col) == key and r.get(other) is None]
                    assert [r["batch_id"] for r in padded] == [batch], (key, side, padded)
            if want == wm.MATCHED:
                assert any(r.get("order_id") == key and r.get("payment_id") for r in t["emitted"]), key
            if want in (wm.NEVER_IN_STATE, wm.WAITING_OTHER_SIDE) and kind == "join" and t["join_type"] == "inner":
                assert not any(r.get("order_id") == key for r in t["emitted"]), key


def truth_source(info: Any, label: str) -> StateSource:
    if label in ("left", "right"):
        return StateSource(0, store_name=info.operator(0).join_rows_store(label))
    if ":" in label:
        op, var = label.split(":")
        return StateSource(int(op), state_var=var)
    return StateSource(int(label), store_name=info.operator(int(label)).stores[0].store_name)


@pytest.mark.parametrize("name", COMPAT_NAMES)
def test_doctor_sql_skew_growth_and_report(name: str, spark) -> None:  # type: ignore[no-untyped-def]
    t = truth(name)
    info = read_checkpoint(path(name))
    last = t["committed_batches"][-1]
    doc = examine(info, list_state_files(info.path))
    assert doc.ok, [p.title for p in doc.problems]
    assert doc.loadable_batches == t["committed_batches"]
    assert doc.restart_batch == (info.uncommitted[-1] if info.uncommitted else last + 1)
    label = next(iter(t["state"]))
    src = truth_source(info, label)
    rows_now = t["state"][label][str(last)]
    # SQL over the store's table at the last batch
    ws = Workspace(info.path)
    result = ws.execute(f"SELECT count(*) AS n FROM {table_name(src)}")
    assert result.table.to_pylist() == [{"n": len(rows_now)}]
    # skew: rows per partition as Spark read them
    store = src.state_var or src.store_name
    sk = checkup.skew(info.path, src.operator_id, store, info=info)
    want_parts: dict[int, int] = {}
    for _k, _m, pid in rows_now:
        want_parts[pid] = want_parts.get(pid, 0) + 1
    assert {p: n for p, n in sk.rows_by_partition.items() if n} == want_parts
    # growth: rows in state after every committed batch, from the change feed or the state per batch
    g = checkup.growth(info.path, src.operator_id, store, info=info)
    (sg,) = g.stores
    assert {b: sg.rows[b] for b in t["committed_batches"][-30:]} == {
        b: len(t["state"][label][str(b)]) for b in t["committed_batches"][-30:]
    }
    c = checkup.checkup(info.path, info=info)
    html = checkup_report(c.info, c.skews, c.growth.stores, c.findings)
    assert "<html" in html.lower() and "Traceback" not in html
