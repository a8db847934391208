"""``python -m pipegen`` (``tests/`` on the path):

* ``show SEED``: the pipeline a seed makes, its parts and designed keys;
* ``generate SEED ... --out DIR``: runs them for real into DIR/seed-NNNN/ (the suite's fixed seeds:
  ``--out sample_checkpoints/generated``);
* ``check DIR ...``: State Lens against the truth on pipelines already run;
* ``wide --seeds 0-199``: generates, runs and checks each seed in a scratch folder, then prints
  right / wrong / crashed per part and per provider (``--table FILE`` writes it as Markdown);
* ``run SPEC DEST``: one pipeline in this process (what ``generate`` starts for each);
* ``chain SEED DEST [SEED DEST ...]``: generated chains of 2-4 queries through tables, one after the other in
  this process, each in Spark applications of its own (``pipegen.chains``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def seeds(text: str) -> list[int | str]:
    """``0-9,12,login_dedup_tws``: seeds, ranges of seeds, and named shapes (``compose.NAMED``)."""
    out: list[int | str] = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        if not a.isdigit():
            out.append(part)
        else:
            out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipegen")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show")
    s.add_argument("seed", type=lambda x: int(x) if x.isdigit() else x)
    g = sub.add_parser("generate")
    g.add_argument("seeds")
    g.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("folders", nargs="+")
    c.add_argument("--engines", default="native,spark")
    w = sub.add_parser("wide")
    w.add_argument("--seeds", default="0-99")
    w.add_argument("--work", default=None, help="keep the runs here (default: a scratch folder, removed)")
    w.add_argument("--table", default=None, help="write the table as Markdown to this file")
    w.add_argument("--engines", default="native")
    r = sub.add_parser("run")
    r.add_argument("spec")
    r.add_argument("dest")
    ch = sub.add_parser("chain", help="generated chains of queries, run in this process")
    ch.add_argument("pairs", nargs="+", metavar="SEED DEST")
    a = ap.parse_args(argv)
    if a.cmd == "chain":
        from pipegen.chains import chain
        from pipegen.chains import run_in_process as run_chain

        if len(a.pairs) % 2:
            ap.error("chain takes SEED DEST pairs")
        for seed, dest in zip(a.pairs[::2], a.pairs[1::2], strict=True):
            run_chain(chain(int(seed)), Path(dest))
        return 0
    if a.cmd == "run":
        from pipegen.run import run_in_process
        from pipegen.spec import Pipeline

        run_in_process(Pipeline.from_json(Path(a.spec).read_text()), Path(a.dest))
        return 0
    if a.cmd == "show":
        from pipegen.compose import pipeline

        p = pipeline(a.seed)
        print(p.name, p.shape, " ".join(p.parts()))
        for k in p.keys:
            print(f"  {k['key']!r:>16} {('by ' + k['ask']) if k['ask'] else '':>14}  {k['design']}")
        return 0
    if a.cmd == "generate":
        from pipegen.compose import pipeline
        from pipegen.run import run

        failed = 0
        for seed in seeds(a.seeds):
            p = pipeline(seed)
            if (Path(a.out) / p.name / "progress.json").exists():
                continue  # run already
            try:
                run(p, Path(a.out) / p.name)
            except RuntimeError as e:  # Spark refused the query: named, the others still run
                failed += 1
                print(f"{p.name}: NOT RUN: {str(e).splitlines()[-1]}", flush=True)
                continue
            print(f"{p.name}: {' '.join(p.parts())}", flush=True)
        return 1 if failed else 0
    from pipegen import wide

    if a.cmd == "check":
        return wide.check_folders([Path(f) for f in a.folders], a.engines.split(","))
    return wide.wide(seeds(a.seeds), a.work, a.table, a.engines.split(","))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
