"""``serve``: a warm local Spark Connect engine that later commands use on their own."""

from __future__ import annotations

import argparse

HELP = "start a local Spark Connect server once; later commands use it (warm)"
SPARK = False


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stop", action="store_true", help="stop the served engine")
    p.add_argument("--status", action="store_true", help="say whether an engine is served")


def run(args: argparse.Namespace) -> None:
    import statelens

    if args.stop:
        print("stopped the served Spark engine" if statelens.stop_serving() else "no served Spark engine was running")
        return
    if args.status:
        url = statelens.serving()
        print(f"serving at {statelens.shown_url(url)}" if url else "not serving")
        return
    url, started = statelens.serve()
    print(
        f"{'started' if started else 'already serving'}: Spark Connect at {statelens.shown_url(url)} (it answers only with its "
        "token, kept for your user in the serve folder); commands that need Spark use it (stop: statelens serve --stop)"
    )
