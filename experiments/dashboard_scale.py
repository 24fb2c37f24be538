"""`mcgs dashboard` at scale, in a real browser (headless Debian chromium): a 5 000-node run's page
load and the browser tab's memory, and how soon a live run's new node shows.

1. **Load**: the run of ``experiments/report_scale.py`` (``--nodes`` synthetic nodes in real
   storage), served by ``mcgs dashboard`` in its own process; the time from asking for the page to
   the graph drawn with every node (its plotly points counted in the page), best of ``--repeats``
   fresh tabs. Target: under 5 s.
2. **Memory**: the tab's renderer process (unique and resident memory, psutil) and its JavaScript heap
   (``performance.memory``) once drawn. Target: under 500 MiB.
3. **Latency**: on the demo task, a run served while the search adds nodes one at a time: for
   each node, the time from its verdict being stored (``finished_at``) to its row in the page's
   table (the page asks every ``POLL_S`` seconds).

Usage (from the repository root, after ``make install-test``)::

    .venv/bin/python experiments/dashboard_scale.py --work /tmp/mcgs-dash --nodes 5000 --report docs/results/dashboard.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_scale import build_run  # noqa: E402
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(run_dir: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcgs", "dashboard", str(run_dir), "--port", str(port)], stdout=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the dashboard did not start")


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--enable-precise-memory-info"):
        opts.add_argument(arg)
    return webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"))


POINTS_JS = "const g = document.getElementById('graph'); return (g && g.data) ? g.data.reduce((a, t) => a + (t.customdata || []).length, 0) : 0;"


def _renderer_mib(driver) -> tuple[float, float]:
    """``(resident, unique)`` memory of the tab's renderer process, MiB: the largest chromium
    renderer under this driver. Resident counts the shared libraries every chromium process maps;
    unique (USS) is what the tab alone holds."""
    root = psutil.Process(driver.service.process.pid)
    best = (0, 0)
    for p in root.children(recursive=True):
        try:
            if "--type=renderer" in " ".join(p.cmdline()):
                info = p.memory_full_info()
                best = max(best, (info.rss, info.uss))
        except psutil.Error:
            pass
    return best[0] / 2**20, best[1] / 2**20


def load(url: str, n_points: int, repeats: int) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    times, rss, heap = [], [], []
    for _ in range(repeats):
        driver = _browser()
        try:
            t0 = time.perf_counter()
            driver.get(url)
            WebDriverWait(driver, 120, poll_frequency=0.05).until(lambda d: d.execute_script(POINTS_JS) >= n_points)
            times.append(time.perf_counter() - t0)
            time.sleep(1.0)
            rss.append(_renderer_mib(driver))
            heap.append(driver.execute_script("return performance.memory ? performance.memory.usedJSHeapSize : 0;") / 2**20)
        finally:
            driver.quit()
    return {"load_s": times, "renderer_mib": rss, "js_heap_mib": heap}


def latency(work: Path, nodes: int) -> list[float]:
    """Seconds from each new node's stored verdict to its row in the page."""
    from selenium.webdriver.common.by import By

    from mcgs.coders.recipe import RecipeCoder
    from mcgs.demo import build_demo_task
    from mcgs.search import create_search, open_search
    from mcgs.settings import SearchSettings

    coder = RecipeCoder(models=("model.logistic_regression", "model.knn"))
    run_dir = work / "live"
    shutil.rmtree(run_dir, ignore_errors=True)
    settings = SearchSettings(time_budget_s=900, max_nodes=1, plan_candidates=0, ensemble=False, cpu_threads=1, coder="recipe")
    search = create_search(build_demo_task(work / "demo"), run_dir, settings=settings, coder=coder)
    search.run()
    search.storage.close()
    proc, url = _serve(run_dir)
    driver = _browser()
    seen: dict[int, float] = {}
    try:
        driver.get(url)

        def watch():
            while len(seen) < nodes + 1:  # a node's row shows while it runs: the time its state cell says finished
                try:
                    for tr in driver.find_elements(By.CSS_SELECTOR, "#node-table tbody tr.node-row"):
                        if tr.find_element(By.CSS_SELECTOR, "td.state").text not in ("pending", "running"):
                            seen.setdefault(int(tr.get_attribute("data-seq")), time.time())
                except Exception:  # the table was redrawn while it was read: read it again
                    pass
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        search = open_search(run_dir, coder=coder, time_budget_s=900)
        search.settings = search.settings.model_copy(update={"max_nodes": 1 + nodes})
        search.run()
        watcher.join(60)
        finished = {n.seq: n.finished_at.timestamp() for n in search.nodes() if n.parent_id is not None and n.finished_at is not None}
        return [seen[s] - finished[s] for s in sorted(finished) if s in seen and s > 1]
    finally:
        driver.quit()
        proc.terminate()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--live-nodes", type=int, default=4)
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    run_dir = args.work / "run"
    if not (run_dir / "mcgs.db").is_file():
        t0 = time.monotonic()
        build_run(args.work, args.nodes)
        print(f"built a {args.nodes}-node run in {time.monotonic() - t0:.0f} s", flush=True)
    proc, url = _serve(run_dir)
    try:
        big = load(url, args.nodes + 1, args.repeats)
    finally:
        proc.terminate()
    lat = latency(args.work, args.live_nodes)
    print(big, lat, flush=True)
    if args.report:
        lines = [f"# The dashboard at {args.nodes} nodes, in headless chromium ({dt.datetime.now().isoformat(timespec='minutes')})", "",
                 f"Machine: {platform.machine()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB. Command: "
                 f"`{' '.join(['python', *sys.argv])}`", "",
                 "| what | figure | target |", "|---|---|---|",
                 f"| page load to the graph drawn with all {args.nodes + 1} nodes, best of {args.repeats} fresh tabs | "
                 f"{min(big['load_s']):.2f} s (all: {', '.join(f'{t:.2f}' for t in big['load_s'])}) | under 5 s |",
                 f"| the tab's renderer process, unique memory (USS) | {max(u for _, u in big['renderer_mib']):.0f} MiB (largest of {args.repeats}) | under 500 MiB |",
                 f"| the same, resident (with the shared libraries every chromium process maps) | {max(r for r, _ in big['renderer_mib']):.0f} MiB | |",
                 f"| its JavaScript heap | {max(big['js_heap_mib']):.0f} MiB | |",
                 f"| a live run's node shown finished, after its verdict is stored (page asks every 2 s) | median {statistics.median(lat):.2f} s, "
                 f"max {max(lat):.2f} s over {len(lat)} nodes | |" if lat else "| live latency | not measured | |"]
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
