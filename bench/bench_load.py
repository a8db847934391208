"""Loading one store's batch of a 1,000,000-key aggregation into DuckDB, then warm SQL on it.

Compared in the same run (medians):
* State Lens: Workspace.load (statestore -> toArrow -> a DuckDB table);
* the plain notebook approach: spark.read.format("statestore")...toPandas(), then into DuckDB;
* Spark's bare count() scan of the same state.
Targets: >= 5x faster than the notebook, <= 1.5x the bare scan; warm SQL (group by partition,
point lookup by key) under 100 ms each.

    .venv/bin/python bench/bench_load.py [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from big_checkpoints import agg_1m, spark_session  # noqa: E402
from timing import median_seconds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    cp = str(agg_1m())
    spark = spark_session()
    import duckdb

    from statelens.spark_io.gather.workspace import Workspace

    def state():  # type: ignore[no-untyped-def]
        return spark.read.format("statestore").load(cp)

    def bare_scan() -> None:
        assert state().count() == 1_000_000

    def notebook() -> None:
        pdf = state().toPandas()
        con = duckdb.connect()
        con.register("incoming", pdf)
        con.execute("CREATE TABLE op0 AS SELECT * FROM incoming")
        assert con.execute("SELECT count(*) FROM op0").fetchone()[0] == 1_000_000  # type: ignore[index]

    holder: dict[str, Workspace] = {}

    def statelens() -> None:
        ws = Workspace(cp)
        ws.load("op0")
        assert ws.loaded["op0"].rows == 1_000_000
        holder["ws"] = ws

    bare_scan()  # warm-up
    statelens()
    t_scan = median_seconds(bare_scan, args.runs)
    t_ours = median_seconds(statelens, args.runs)
    t_nb = median_seconds(notebook, max(1, args.runs // 2))
    ws = holder["ws"]
    q_group = "SELECT partition_id, count(*) AS n FROM op0 GROUP BY partition_id ORDER BY partition_id"
    q_point = "SELECT * FROM op0 WHERE key.user_id = 'user-123456'"
    ws.execute(q_group), ws.execute(q_point)  # warm
    t_group = median_seconds(lambda: ws.execute(q_group), 20)
    t_point = median_seconds(lambda: ws.execute(q_point), 20)
    assert ws.execute(q_point).table.num_rows == 1
    print("one store's batch of a 1,000,000-key aggregation into DuckDB; medians, same run")
    print(f"  Spark bare count() scan:                    {t_scan:6.2f} s")
    print(f"  State Lens (toArrow -> DuckDB table):       {t_ours:6.2f} s   {t_ours / t_scan:4.2f}x the scan (target <= 1.5x)")
    print(
        f"  notebook (toPandas -> DuckDB):              {t_nb:6.2f} s   State Lens is {t_nb / t_ours:4.1f}x faster (target >= 5x)"
    )
    print(f"  warm SQL, group by partition:               {t_group * 1000:6.1f} ms (target < 100 ms)")
    print(f"  warm SQL, point lookup by key:              {t_point * 1000:6.1f} ms (target < 100 ms)")


if __name__ == "__main__":
    main()
