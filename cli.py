"""State Lens on the command line: the same questions as the app and the notebook, headless.

    statelens COMMAND ... (installed) or python cli.py COMMAND ... (this folder)

One module per command in ``commands/`` (its parser and its printer, asked through ``statelens``),
registered in ``commands.COMMANDS``; this is the entry that parses and dispatches. The commands
and every flag: ``statelens --help``, ``statelens COMMAND --help``, and the manual's CLI reference
(docs/cli.md, written from these parsers).

Exit codes: 0 on success, 2 on bad input or a failed read, with one line on stderr.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn

from statelens.commands import COMMANDS, command
from statelens.commands._out import invoked_as


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other error
        print(f"statelens: {message} (see {invoked_as()} --help)", file=sys.stderr)
        sys.exit(2)


class _Version(argparse.Action):
    """``--version``: the version is looked up when asked (importlib.metadata costs 0.1 s a process)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"State Lens {version()}")
        parser.exit()


def version() -> str:
    """The installed package's version, or pyproject's when run from the source folder."""
    from importlib import metadata

    try:
        return metadata.version("state-lens")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyproject.toml")
        with open(pyproject, "rb") as f:
            return str(tomllib.load(f)["project"]["version"])


# what the README's front page says, for a terminal
QUESTIONS = """the five questions users ask most:
  why did key X never reach the output?   %(prog)s why-missing CHECKPOINT KEY --event-log LOGS/
  why does the state grow? is it skewed?  %(prog)s growth CHECKPOINT; %(prog)s skew CHECKPOINT
  is the checkpoint healthy?              %(prog)s doctor CHECKPOINT; %(prog)s report CHECKPOINT --out r.html
  will my change restart?                 %(prog)s preflight CHECKPOINT -- python job.py ...
  what exactly is in the state?           %(prog)s sql CHECKPOINT "SELECT * FROM op0 LIMIT 10"

every command's flags: %(prog)s COMMAND --help; the manual: docs/ (mkdocs build), its CLI reference docs/cli.md"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of command ``only`` alone (what a run of it needs: the 17
    commands' parsers take about 15 ms to build, a twentieth of a key lookup)."""
    p = _Parser(
        prog=invoked_as(),
        description="State Lens: inspect Structured Streaming state.",
        epilog=QUESTIONS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=_Version, nargs=0, help="show program's version number and exit")
    spark = _Parser(add_help=False)
    where = spark.add_argument_group("where Spark runs (default: local, or SPARK_REMOTE when set)")
    where.add_argument("--master", default=None, help="a Spark master URL: local[4], spark://host:7077, yarn ...")
    where.add_argument("--remote", default=None, help="a Spark Connect server: sc://host:15002")
    where.add_argument(
        "--engine",
        choices=["auto", "native", "spark"],
        default=None,
        help="who reads the state: native (the state files, no JVM), spark (State Data Source), or auto "
        "(default, STATELENS_ENGINE): native for local checkpoints it supports, else Spark",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in [only] if only else COMMANDS:
        module = command(name)
        usage = getattr(module, "USAGE", None)
        q = sub.add_parser(name, parents=[spark], help=module.HELP, **({"usage": usage} if usage else {}))
        module.add(q)
        q.set_defaults(func=module.run)
    return p


@contextlib.contextmanager
def _download_progress(args: argparse.Namespace) -> Iterator[None]:
    """Downloads from object storage that take over a second: one line on stderr, rewritten in place
    (an interactive terminal only, and not with --json), cleared when the command ends."""
    if getattr(args, "json", False) or not sys.stderr.isatty():
        yield
        return
    import statelens
    from statelens.text import human_bytes

    shown = []

    def line(done: int, total: int, files: int) -> None:
        shown.append(1)
        sys.stderr.write(
            f"\rstatelens: downloading state files: {human_bytes(done)} of {human_bytes(total)} ({files} files)\033[K"
        )
        sys.stderr.flush()

    try:
        with statelens.downloads(line):
            yield
    finally:
        if shown:
            sys.stderr.write("\r\033[K")


def main(argv: list[str] | None = None, process: bool = False) -> int:
    """``process``: this process runs one command and exits (kept reads would serve no next question)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    named = next((a for a in argv if not a.startswith("-")), None)  # the command comes first: no top-level option takes a value
    parser = build_parser(named if named in COMMANDS else None)
    job: list[str] = []  # preflight's and rebuild's job command: everything after its --
    if "--" in argv and {"preflight", "rebuild"} & set(argv[: argv.index("--")]):
        cut = argv.index("--")
        argv, job = argv[:cut], argv[cut + 1 :]
    args, extra = parser.parse_known_args(argv)
    args.job = job
    if extra and args.command != "app":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.streamlit_options = extra
    import statelens

    try:
        with statelens.speaking_as("cli"):
            statelens.audit_refusals("cli", args.command)
            statelens.configure(
                args.engine,
                args.master,
                args.remote,
                single_question=process,
                served=command(args.command).SPARK,  # a warm engine `serve` started, for commands that may need Spark
            )
            with _download_progress(args), statelens.question():
                code = args.func(args)  # a command may answer with an exit code (preflight: 1 when the change fails)
    except statelens.StateLensError as e:
        statelens.refused(e)  # in the policy's audit log, when there is one
        print(f"statelens: {e.title}: {e.message}".replace("\n", " "), file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("statelens: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug: still one line and exit 2; STATELENS_DEBUG=1 shows the traceback
        if os.environ.get("STATELENS_DEBUG"):
            raise
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        print(f"statelens: unexpected error: {type(e).__name__}: {first} (set STATELENS_DEBUG=1 for details)", file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0


def run() -> NoReturn:
    """The ``statelens`` command and ``python cli.py``: one command in this process."""
    _exit(main(process=True))


def _exit(code: int) -> NoReturn:
    """End this one-command process as Python would, but for its last step: exit handlers run and the
    streams are flushed, then the process ends without the interpreter taking every module apart one
    by one (40-60 ms of a 0.3 s key lookup; 0.2 s once the compiled loops are loaded). A thread still
    at work that is not one of State Lens's read pools (a Spark gateway's) gets Python's own exit."""
    pools = ("statelens-fetch", "statelens-decode")
    others = [
        t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and not t.name.startswith(pools)
    ]
    if others:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (piped into head)
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
