"""Many users at once: real Chromium sessions against one State Lens server, on the 1,000,000-key
aggregation (``big_checkpoints.agg_1m``).

Each session opens a why-missing link for its own key (the whole query), waits for the answer,
then opens a SQL link for the same key and waits for its row: what an on-call engineer does. Before
both, it opens a page that reads no state (the Checkpoints page on an empty folder): the floor the
browsers and Streamlit themselves set. In the same run: one session alone, then 4 and 8 at once,
each on a freshly started server (a cold server: the incident's first minutes), served as a team
serves it: an access policy, every user signed in by a proxy's headers, an audit log.

Per scenario: the median and p95 of each step's time (link opened to answer on screen), and of the
server's own time for the same runs (the audit log's ``seconds``: the script run that answers, no
browser in it), errors, the server's peak memory (RSS of the server and its children), its CPU
time, whether it started a JVM, the browsers' CPU time (per page opened: what a browser spends
drawing a Streamlit page, whatever the server does) and how idle the machine was. Target: 8 at
once with p95 within 3x one alone, no error, no JVM (every answer here is native). A team's
browsers run on their own machines: here the server runs on a core of its own and the browsers on
the others (``--shared-cores``: all on the same cores, where 8 renderers take the CPU the server's
threads wait for; a lower priority for the browsers does not hold, Chromium sets its renderers'
own). The page that reads no state shows what the browsers themselves take.

    .venv/bin/python bench/bench_app_users.py [--users 1,4,8] [--shared-cores]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from big_checkpoints import agg_1m  # noqa: E402

TIMEOUT_MS = 600_000
MOTION = os.environ.get("MOTION", "no-preference")
EMPTY = tempfile.mkdtemp(prefix="statelens-no-checkpoints-")  # a folder without checkpoints
STEPS = ("empty_page", "why_missing", "sql")  # the first reads no state: the browsers' and Streamlit's own floor
PAGES = {"empty_page": "checkpoints", "why_missing": "why_missing", "sql": "sql"}  # the audit log's page of a step
POLICY = """
[auth]
mode = "proxy"
user_header = "X-Forwarded-Email"
groups_header = "X-Forwarded-Groups"
audit_log = "{audit}"

[groups.oncall]
roots = ["{root}", "{empty}"]
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``statelens app`` as a team runs it, with a sampler of its memory and children."""

    def __init__(self, cp: str, cores: set[int] | None = None) -> None:
        import psutil

        self.port = free_port()
        tmp = Path(tempfile.mkdtemp(prefix="statelens-bench-users-"))
        self.audit = tmp / "audit.jsonl"
        policy = tmp / "policy.toml"
        policy.write_text(POLICY.format(audit=self.audit, root=Path(cp).parent, empty=EMPTY))
        self.log = open(ROOT / "test-artifacts" / "bench-users-streamlit.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "cli.py"), "app", "--server.headless", "true", "--server.port", str(self.port)],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "STATELENS_POLICY": str(policy)},
            preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/_stcore/health", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.3)
        self.ps = psutil.Process(self.proc.pid)
        self.peak_rss = 0
        self.jvm = False
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.ps, *self.ps.children(recursive=True)]
                self.peak_rss = max(self.peak_rss, sum(p.memory_info().rss for p in procs))
                self.jvm = self.jvm or any("java" in p.name() for p in procs[1:])
            except psutil.Error:
                pass
            self._stop.wait(0.2)

    def cpu_seconds(self) -> float:
        """CPU time of the server so far (user + system)."""
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def server_seconds(self) -> dict[tuple[str, str], float]:
        """(user, page) -> the seconds of that user's runs of that page, from the audit log."""
        out: dict[tuple[str, str], float] = {}
        for line in self.audit.read_text().splitlines() if self.audit.exists() else []:
            e = json.loads(line)
            if e.get("event") == "question" and "seconds" in e:
                k = (e["user"], e["page"])
                out[k] = out.get(k, 0.0) + e["seconds"]
        return out

    def close(self) -> None:
        self._stop.set()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


class BrowserCpu:
    """CPU seconds of the Chromium processes (browser, renderers, GPU and utility processes), sampled
    every 0.1 s so a tab's renderer that exits with its tab still counts (up to its last sample)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            for p in psutil.process_iter(["name", "create_time", "cpu_times"]):
                if "chrom" in (p.info["name"] or "") and p.info["cpu_times"] is not None:
                    t = p.info["cpu_times"]
                    self.seen[(p.pid, p.info["create_time"])] = t.user + t.system
            self._stop.wait(0.1)

    def total(self) -> float:
        return sum(self.seen.values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def user_of(key: str) -> str:
    return f"{key}@oncall.example.com"


async def session(ctx: Any, url: str, cp: str, key: str, out: dict[str, Any]) -> None:
    from playwright.async_api import expect

    page = await ctx.new_page()
    await page.set_extra_http_headers({"X-Forwarded-Email": user_of(key), "X-Forwarded-Groups": "oncall"})
    try:
        # the floor: the app's page with no state read (Streamlit's own page, the browser's own work)
        t0 = time.perf_counter()
        await page.goto(f"{url}/checkpoints?{urllib.parse.urlencode({'prefix': EMPTY})}")
        await page.get_by_text(f"No checkpoint under {EMPTY}").wait_for(timeout=TIMEOUT_MS)
        out["empty_page"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await page.goto(f"{url}/why_missing?{urllib.parse.urlencode({'checkpoint': cp, 'key': key})}")
        await expect(page.get_by_role("heading", level=4).filter(has_text=key)).to_be_visible(timeout=TIMEOUT_MS)
        out["why_missing"] = time.perf_counter() - t0
        sql = f"SELECT key.user_id, value FROM op0 WHERE key.user_id = '{key}'"
        t0 = time.perf_counter()
        await page.goto(f"{url}/sql?{urllib.parse.urlencode({'checkpoint': cp, 'sql': sql})}")
        await expect(page.get_by_text(re.compile(r"^1 rows · \d+ ms$"))).to_be_visible(timeout=TIMEOUT_MS)
        out["sql"] = time.perf_counter() - t0
        alerts = page.locator("[data-testid='stAlertContentError']")
        if await alerts.count():
            out["error"] = await alerts.first.inner_text()
    except Exception as e:  # counted, not hidden
        out["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        await page.close()


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def scenario(users: int, cp: str, pin: bool) -> dict[str, Any]:
    import asyncio

    from playwright.async_api import async_playwright

    cores = sorted(os.sched_getaffinity(0))
    server = Server(cp, {cores[-1]} if pin else None)
    results: list[dict[str, Any]] = [{} for _ in range(users)]
    keys = [f"user-{1000 + 97_331 * i}" for i in range(users)]

    async def run() -> float:
        """The sessions, all at once; returns the browsers' CPU seconds over them."""
        if pin:  # this process and the browsers it starts: every core but the server's
            os.sched_setaffinity(0, set(cores[:-1]))
        async with async_playwright() as p:
            browser = await p.chromium.launch(
                executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            # A user's browser has the app's scripts cached from earlier visits: one page of the app is
            # opened first (not timed), then every session is a tab of its own (its own Streamlit
            # session), all let go at once
            ctx = await browser.new_context(viewport={"width": 1400, "height": 900}, reduced_motion=MOTION)
            warm = await ctx.new_page()
            await warm.set_extra_http_headers({"X-Forwarded-Email": "warm@oncall.example.com", "X-Forwarded-Groups": "oncall"})
            await warm.goto(f"{server.url}/checkpoints?{urllib.parse.urlencode({'prefix': EMPTY})}")
            await warm.get_by_role("heading", name="Checkpoints").wait_for(timeout=TIMEOUT_MS)
            await warm.close()
            before = cpu.total()
            await asyncio.gather(*(session(ctx, server.url, cp, k, r) for k, r in zip(keys, results, strict=True)))
            spent = cpu.total() - before
            await browser.close()
            return spent

    import psutil

    cpu = BrowserCpu()
    cpu0, t0, machine0 = server.cpu_seconds(), time.perf_counter(), psutil.cpu_times()
    try:
        try:
            browser_cpu = asyncio.run(run())
        finally:
            os.sched_setaffinity(0, set(cores))
            cpu.close()
        server_cpu, wall, machine = server.cpu_seconds() - cpu0, time.perf_counter() - t0, psutil.cpu_times()
        idle = machine.idle - machine0.idle
        took = server.server_seconds()
    finally:
        server.close()
    done = [(k, r) for k, r in zip(keys, results, strict=True) if "error" not in r]
    return {
        "users": users,
        "errors": [r["error"] for r in results if "error" in r],
        **{step: [r[step] for _, r in done] for step in STEPS},
        **{
            f"server_{step}": [took[(user_of(k), PAGES[step])] for k, _ in done if (user_of(k), PAGES[step]) in took]
            for step in STEPS
        },
        "rss": server.peak_rss,
        "jvm": server.jvm,
        "server_cpu": server_cpu,
        "browser_cpu": browser_cpu,
        "idle": idle,
        "wall": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", default="1,4,8")
    ap.add_argument(
        "--shared-cores",
        action="store_true",
        help="browsers and server on the same cores (default: the server on a core of its own, as on a machine of its own)",
    )
    args = ap.parse_args()
    pin = not args.shared_cores and len(os.sched_getaffinity(0)) > 1
    cp = str(agg_1m())
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    rows = [scenario(int(n), cp, pin) for n in args.users.split(",")]
    alone = rows[0]
    cols = [*STEPS, *(f"server_{step}" for step in STEPS)]
    base = {k: statistics.median(alone[k]) for k in cols if alone[k]}
    print(f"real Chromium sessions on {cp} (1,000,000 keys), each scenario on a fresh server; seconds")
    where = "the server on a core of its own, the browsers on the others" if pin else "browsers and server on the same cores"
    print(f"({where})")
    print("(browser: link opened to answer on screen; server: the same runs' script time, from the audit log)")
    print("users  step         browser median   p95  p95/alone   server median   p95  p95/alone")
    for r in rows:
        for step in STEPS:
            cells = []
            for col in (step, f"server_{step}"):
                xs = r[col]
                if not xs:
                    cells.append("      (no answer)          ")
                    continue
                ratio = p95(xs) / base[col] if col in base else float("nan")
                cells.append(f"{statistics.median(xs):8.2f}  {p95(xs):6.2f}  {ratio:6.2f}x   ")
            print(f"{r['users']:5}  {step:11}  {cells[0]}      {cells[1]}")
    for r in rows:
        print(
            f"{r['users']} user(s): {len(r['errors'])} errors, server peak RSS {r['rss'] / 2**20:.0f} MB, "
            f"JVM {'started' if r['jvm'] else 'not started'}, {r['wall']:.1f} s wall, the server busy "
            f"{r['server_cpu']:.1f} CPU s, the browsers busy {r['browser_cpu']:.1f} CPU s "
            f"({r['browser_cpu'] / (len(STEPS) * r['users']):.2f} a page opened), "
            f"the machine idle {r['idle']:.1f} of {r['wall'] * (os.cpu_count() or 1):.1f} CPU s"
        )
    for r in rows:
        for e in r["errors"]:
            print(f"error ({r['users']} users): {e}")

    def worst(cols: list[str]) -> float:
        return max((p95(r[c]) / base[c] for r in rows for c in cols if r[c] and c in base), default=float("nan"))

    print(
        f"worst p95 against one alone: browser {worst(list(STEPS[1:])):.2f}x, "
        f"server {worst([f'server_{s}' for s in STEPS[1:]]):.2f}x (target <= 3x); "
        f"a page reading no state {worst(['empty_page']):.2f}x; JVM started: {any(r['jvm'] for r in rows)} (target: no)"
    )


if __name__ == "__main__":
    main()
