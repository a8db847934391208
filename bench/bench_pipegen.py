"""Whole-query why-missing on the generated pipelines, as a user waits for it: a whole CLI process,
cold (a new process each run, native engine), for one key and for ten keys of each pipeline in
``sample_checkpoints/generated/``, beside the plain approach in the same run: a PySpark script,
also a new process, that reads the sink's rows of the key and the last operator's state of it.

Targets: one key at most 1.5 s, ten keys at most 2 s (medians).

    .venv/bin/python bench/bench_pipegen.py [--runs 3] [name ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GENERATED = ROOT / "sample_checkpoints" / "generated"
sys.path[:0] = [str(HERE), str(ROOT / "tests"), str(ROOT)]

from pipegen.differential import cli_args  # noqa: E402
from timing import median_seconds  # noqa: E402

PLAIN = """
import sys
from pyspark.sql import SparkSession
folder, fmt, column, key = sys.argv[1:5]
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
reader = spark.read.format(fmt)
if fmt == "csv":
    reader = reader.option("header", "true")
sink = reader.option("recursiveFileLookup", "true").option("pathGlobFilter", "part-*").load(folder + "/sink")  # a foreachBatch's too
# the files (the log names where they were); a sink without the column (the key asked by a column the
# windows do not hold): the plain approach has no row to look at there
print(sink.where(f"`{column}` = '{key}'").count() if column in sink.columns else 0)
import json
meta = spark.read.format("state-metadata").load(folder + "/checkpoint").where("operatorId = 0").first()
props = json.loads(meta["operatorProperties"] or "{}") if meta else {}
variables = [v["stateName"] for v in props.get("stateVariables", []) if not v["stateName"].startswith("$")]
reader = spark.read.format("statestore")
if variables:  # transformWithState: one of its state variables
    reader = reader.option("stateVarName", variables[0])
elif meta and meta["operatorName"] == "symmetricHashJoin":  # a join: one side's rows
    reader = reader.option("joinSide", "left")
state = reader.load(folder + "/checkpoint")
fields = state.schema["key"].dataType.fieldNames()
field = column if column in fields else next(f for f in fields if f not in ("window", "session_window"))
print(state.where(f"key.`{field}` = '{key}'").count())
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    names = args.names or sorted(p.name for p in GENERATED.iterdir() if (p / "pipeline.json").is_file())
    env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    env.pop("SPARK_REMOTE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules compiled once, not on every start
    print("whole-query why-missing, a whole cold process (native), median seconds of", args.runs, "runs")
    print(f"{'pipeline':28} {'1 key':>7} {'10 keys':>8} {'plain 1 key':>12} {'ratio':>6}")
    ones, tens, plains = [], [], []
    for name in names:
        folder = GENERATED / name
        spec = json.loads((folder / "pipeline.json").read_text())
        keys = [k["key"] for k in spec["keys"] if k["ask"] is None] or [k["key"] for k in spec["keys"]]
        ask = next((k["ask"] for k in spec["keys"] if k["key"] == keys[0]), None)

        def run(ks: list[str], folder: Path = folder, ask: str | None = ask) -> None:
            argv = [sys.executable, str(ROOT / "cli.py"), *cli_args(folder, ks), *(["--key-field", ask] if ask else [])]
            subprocess.run(argv, env=env, check=True, capture_output=True)

        run(keys[:1])  # the files read once before (the OS's cache), as any second question finds them
        one = median_seconds(lambda keys=keys: run(keys[:1]), args.runs)
        ten_keys = (keys + [f"absent-{i}" for i in range(10)])[:10]  # ten distinct keys: the designed ones first
        ten = median_seconds(lambda ks=ten_keys: run(ks), args.runs)
        # the column the last operator is keyed by: a static table's, a renamed key, the source's key
        static = spec.get("static")
        column = ask or (static["produces"] if static else spec.get("rename", {}).get("key") or spec["sources"][0]["cols"]["key"])
        plain_cmd = [sys.executable, "-c", PLAIN, str(folder), spec["sink_fmt"], column, keys[0]]
        plain = median_seconds(lambda c=plain_cmd: subprocess.run(c, env=env, check=True, capture_output=True), 1)
        ones.append(one)
        tens.append(ten)
        plains.append(plain)
        print(f"{name:28} {one:7.2f} {ten:8.2f} {plain:12.2f} {one / plain:6.2f}x", flush=True)
    m1, m10, mp = statistics.median(ones), statistics.median(tens), statistics.median(plains)
    print(f"{'median':28} {m1:7.2f} {m10:8.2f} {mp:12.2f} {m1 / mp:6.2f}x")
    print(f"worst: 1 key {max(ones):.2f} s, 10 keys {max(tens):.2f} s")
    print(
        f"targets: 1 key <= 1.5 s: {'met' if max(ones) <= 1.5 else 'NOT met'}; 10 keys <= 2 s: {'met' if max(tens) <= 2 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
