"""The app given a pipeline's root, through Streamlit's AppTest, on the committed Declarative Pipeline:
the Pipeline page (its flows, hops and lag against the logs Spark wrote), the why-missing page (each
customer's outcome against the tables' Parquet files) and the SQL page (every query's state at once)."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest
from test_sdp import ORDERS, _truth

import statelens
from support import ROOT

APP = str(ROOT / "app.py")
STORAGE, WAREHOUSE = ORDERS / "storage", ORDERS / "warehouse"
FLOWS = STORAGE / "_checkpoints" / "spark_catalog" / "default"


def open_app(page: str, path: Path | None = STORAGE, **params: str | list[str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    if path is not None:
        at.session_state["checkpoint"] = str(path)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _log_entries(folder: Path) -> dict[int, list[str]]:
    """A log folder (a sink's _spark_metadata, a source's sources/0): batch -> the file names it lists."""
    out = {}
    for f in folder.iterdir():
        if f.name.isdigit():
            out[int(f.name)] = [json.loads(line)["path"].rsplit("/", 1)[-1] for line in f.read_text().splitlines()[1:]]
    return out


def _silver_batches_unread_by_gold() -> list[int]:
    """Silver's batches that wrote files newer than every silver file gold's current flow read."""
    written = _log_entries(WAREHOUSE / "silver" / "_spark_metadata")
    newest_gold = max(int(v.name) for v in (FLOWS / "gold" / "gold").iterdir())
    read = {
        name for names in _log_entries(FLOWS / "gold" / "gold" / str(newest_gold) / "sources" / "0").values() for name in names
    }
    seen = max(b for b, names in written.items() if set(names) & read)
    return sorted(b for b, names in written.items() if names and b > seen)


def test_pipeline_page_draws_the_flows_and_the_lag_the_logs_hold() -> None:
    at = open_app("views/pipeline.py", path=None, root=str(STORAGE), data_root=str(WAREHOUSE))
    versions = [v for v in FLOWS.glob("*/*/*") if v.name.isdigit()]
    unread = _silver_batches_unread_by_gold()
    m = {x.label: x.value for x in at.metric}
    assert (m["Queries"], m["Pipelines"], m["With a problem"]) == (str(len(versions)), "1", "0")
    assert m["Hops lagging"] == ("1" if unread else "0")
    queries, hops = at.dataframe[0].value, at.dataframe[1].value
    superseded = sorted(
        f"{v.parent.name}@v{v.name}" for v in versions if int(v.name) < max(int(w.name) for w in v.parent.iterdir())
    )
    assert sorted(queries[queries["health"] == "superseded by a full refresh"]["query"]) == superseded
    assert queries[queries["query"] == "gold"]["last batch"].item() == max(
        int(c.name) for c in (FLOWS / "gold" / "gold" / "1" / "commits").iterdir() if c.name.isdigit()
    )
    gold_hop = hops[hops["to"] == "gold"].iloc[0]
    assert (gold_hop["from"], Path(gold_hop["table"]).name) == ("silver", "silver")
    assert gold_hop["written, not read yet"] == (f"{unread[0]}-{unread[-1]}" if len(unread) > 1 else str(unread[0]))
    dot = at.get("graphviz_chart")[0].proto.spec
    for name in ("bronze", "silver", "gold", *superseded):
        assert f'label="{name}\\nlast batch' in dot, name
    assert f"lag: {len(unread)} batch(es) not read" in dot and "dashed" in dot
    # each query opens its own pages
    assert queries["overview"].str.startswith("./overview?checkpoint=").all()


def test_a_root_without_checkpoints_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["root"] = str(tmp_path)
    at.run()
    at.switch_page("views/pipeline.py").run()
    assert not at.exception and [e.value for e in at.error] == [
        f"**Not a checkpoint.** No checkpoint (a folder with offsets/ and commits/) under {tmp_path}: give the folder that holds them."
    ]


def test_why_missing_given_the_root_follows_each_customer_as_the_tables_say() -> None:
    truth = _truth(ORDERS)
    keys = sorted(truth)
    at = open_app("views/why_missing.py", key=keys, key_field="customer", data_root=str(WAREHOUSE))
    heads = [md.value for md in at.markdown if md.value.startswith("#### ")]
    assert len(heads) == len(keys)
    badge = {"written": "Written", "not_read_yet": "Waiting", "lost_at_silver": "Lost", "never_in_input": "Never in the input"}
    for key, head in zip(keys, heads, strict=True):
        assert f"`{key}`" in head
        if truth[key] in badge:
            assert f"-badge[{badge[truth[key]]}]" in head, (key, truth[key], head)
        if truth[key] == "lost_at_silver":
            assert "in silver" in head, head
        if truth[key] == "not_read_yet":
            assert "orange-badge[written upstream, not read yet · in gold" in head, head
    hops = at.dataframe[0].value  # each query's own answer, upstream first, each linking its own page
    assert hops["query"].tolist() == ["bronze", "silver", "gold"]
    assert hops["diagnosis"].str.contains("checkpoint=").all()


def test_sql_given_the_root_reads_every_querys_state() -> None:
    """The page's default query counts each current stateful query's rows: each as its own checkpoint's SQL counts them."""
    p = statelens.open_pipeline(str(STORAGE))
    expected = [
        [q, statelens.open(p.query(q).checkpoint).sql("SELECT count(*) AS n FROM op0").table.column("n")[0].as_py()]
        for q in ("silver", "gold")
    ]
    at = open_app("views/sql.py")
    assert at.text_area[0].value.count("UNION ALL") == 1  # bronze holds no state, gold@v0 is superseded
    at.button(key="sql_run").click().run()
    assert not at.error, [e.value for e in at.error]
    assert at.dataframe[0].value.values.tolist() == expected
    last = {q: p.query(q).last_batch for q in ("silver", "gold")}
    assert any(f"silver at batch {last['silver']}" in c.value and f"gold at batch {last['gold']}" in c.value for c in at.caption)
    linked = open_app("views/sql.py", sql='SELECT count(*) AS n FROM "gold@v0".op0')  # a link runs its query
    assert linked.dataframe[0].value["n"].tolist() == [
        statelens.open(p.query("gold@v0").checkpoint).sql("SELECT count(*) AS n FROM op0").table.column("n")[0].as_py()
    ]
