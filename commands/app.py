"""``app``: the web app (what scripts/start.sh runs)."""

from __future__ import annotations

import argparse
import os
import sys

HELP = (
    "start the web app (on 127.0.0.1; Streamlit options pass through: --server.port 8600, "
    "--server.address 0.0.0.0 to serve other machines)"
)
SPARK = False

# How the web app is served unless the user's Streamlit options say otherwise: on loopback only
# (state and SQL are data), without Streamlit's file watcher (it watches the whole folder, .venv
# included, and reloads modules under a running page), without a full garbage collection after
# every run of a page (it holds the interpreter 0.3-0.5 s a run here, every other user's page
# waiting: with 8 users at once it was half the server's time; Python still collects on its own)
# and without the Deploy button.
APP_DEFAULTS = {
    "server.address": "127.0.0.1",
    "server.fileWatcherType": "none",
    "runner.postScriptGC": "false",
    "client.toolbarMode": "viewer",
    "browser.gatherUsageStats": "false",
}


def add(p: argparse.ArgumentParser) -> None:
    p.set_defaults(streamlit_options=[])


def app_command(options: list[str]) -> list[str]:
    """``streamlit run`` of the app (``views/web.py``: ``app.py`` behind the download guard) with State
    Lens' defaults; the user's options come last and win (Streamlit takes an option's last value)."""
    for i, opt in enumerate(options):
        value_of_previous = i > 0 and options[i - 1].startswith("--") and "=" not in options[i - 1]
        if not (value_of_previous or (opt.startswith("--") and "." in opt.split("=")[0])):
            import statelens

            raise statelens.InvalidInput(f"{opt!r} is not a Streamlit option: app takes options like --server.port 8600.")
    app = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "views", "web.py")  # app.py, guarded
    defaults = [f"--{name}={value}" for name, value in APP_DEFAULTS.items()]
    return [sys.executable, "-m", "streamlit", "run", app, *defaults, *options]


def run(args: argparse.Namespace) -> None:
    env = dict(os.environ)
    for name, value in (("STATELENS_ENGINE", args.engine), ("STATELENS_MASTER", args.master), ("SPARK_REMOTE", args.remote)):
        if value:
            env[name] = value
    command = app_command(args.streamlit_options)
    sys.stdout.flush()
    os.execve(command[0], command, env)  # the server is this process: a signal to it stops the app
