"""How long the Explore page takes to follow the confidence slider in a real browser, at 10,000 and 100,000
documents.

For each size: serves the dashboard (``streamlit run app.py`` on a loopback port), drives headless Chromium to
upload synthetic documents and a registry (``cpa_core.io.synthetic``, 1,000 people; the sample configuration: K2,
temperature ``auto``), declares a top-K shortlist on the threat-model page, calibrates (every document certified),
opens Explore (timed: the first visit computes the confidence curve), then times ``--repeat`` steps of the
confidence slider (the keyboard's left arrow): from the key press until the histogram's title shows the new level
and the page has settled (Streamlit's rerun, the certificate at the new level, the KPIs, figures and tables, and
the browser's rendering).

Where a step's time goes, per step (mean): the CPU time of the dashboard's server process (the rerun, the
messages, and what Streamlit does after each run), the CPU time of every Chromium process, of which the browser
main thread's busy time (Chrome's own ``TaskDuration``: scripts, plotly, layout, paint), and the bytes the page
received over its websocket (the payload).

Also the server's resident memory: idle, with the data loaded, and once calibrated and explored (with its peak):
what one dashboard session holds.

Usage: ``.venv/bin/python bench/bench_slider.py [WORKDIR] [--documents 10000,100000] [--people 1000]
[--top-k 50|none] [--repeat 10]``. Prints markdown rows for ``bench/RESULTS.md`` with the machine's load. Needs
Chromium and chromedriver.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))

from bench_scale import dataset  # noqa: E402
from browser import calibrate, chromium, click, dashboard, exit_if_missing, go, settled, text_present, upload, wait  # noqa: E402

TARGET_MS = 300
TITLE = "document.querySelector('[data-testid=\"stPlotlyChart\"] .gtitle')?.textContent || ''"


def shortlist(driver) -> None:
    """The threat model with a top-K shortlist (the page's default K) instead of the whole registry."""
    go(driver, "Threat model", "Rank the whole registry")
    click(driver, "//label[.//p[text()='Rank the whole registry']]", "the whole-registry box")
    wait(driver, text_present("Top-K"), "the top-K input")
    wait(driver, settled, "the threat model to settle")


TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def _parents() -> dict[int, int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):  # a process that ended meanwhile
            continue
    return parents


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    parents, found = _parents(), [pid]
    for child, parent in sorted(parents.items()):
        if parent in found:
            found.append(child)
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time the processes ``pids`` have used so far."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS_PER_SECOND


def websocket_bytes(driver) -> int:
    """Bytes the page received over websockets since the last call (the browser logs every frame)."""
    total = 0
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.webSocketFrameReceived":
            total += len(message["params"]["response"]["payloadData"])
    return total


def main_thread_seconds(driver) -> float:
    metrics = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "TaskDuration")


def slider_steps(driver, repeat: int, server: int | None = None) -> list[dict]:
    """``repeat`` steps of the confidence slider: each one's seconds until settled, and what it cost (CPU seconds
    of the server ``server`` and of the browser, the browser main thread's busy seconds, websocket bytes)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.execute_cdp_cmd("Performance.enable", {})
    browser = descendants(driver.service.process.pid)
    steps = []
    for _ in range(repeat):
        slider = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSlider"] input[type="range"]')[0]
        driver.execute_script("arguments[0].focus();", slider)
        before = driver.execute_script(f"return {TITLE};")
        websocket_bytes(driver)
        cpu = (cpu_seconds([server] if server else []), cpu_seconds(browser), main_thread_seconds(driver))
        start = time.perf_counter()
        ActionChains(driver).send_keys(Keys.ARROW_LEFT).perform()  # down from the declared level: new levels
        wait(driver, lambda d: d.execute_script(f"return {TITLE};") != before and settled(d),
             "the page to follow the slider", poll=0.01)
        seconds = time.perf_counter() - start
        steps.append({"seconds": seconds, "server_cpu": cpu_seconds([server] if server else []) - cpu[0],
                      "browser_cpu": cpu_seconds(browser) - cpu[1], "main_thread": main_thread_seconds(driver) - cpu[2],
                      "websocket_bytes": websocket_bytes(driver)})
    return steps


def server_pid(url: str) -> int | None:
    """The dashboard's server process (the one serving ``url``)."""
    port = url.rsplit(":", 1)[1]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes().split(b"\0")
        except OSError:  # a process that ended meanwhile
            continue
        if b"streamlit" in b" ".join(command) and port.encode() in command:
            return int(cmdline.parent.name)
    return None


def server_memory(url: str) -> dict[str, float]:
    """Resident memory of the dashboard's server process (the one serving ``url``): now and its peak, in MiB."""
    pid = server_pid(url)
    try:
        status = Path(f"/proc/{pid}/status").read_text() if pid else ""
    except OSError:
        status = ""
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in fields:
        return {"rss": float("nan"), "peak": float("nan")}
    return {name: int(fields[key].split()[0]) / 1024 for name, key in (("rss", "VmRSS"), ("peak", "VmHWM"))}


def measure(workdir: Path, n: int, people: int, top_k: bool, repeat: int) -> dict:
    data = dataset(workdir, people, n)
    with dashboard() as url, chromium() as driver:
        driver.get(url)
        wait(driver, text_present("Conformal Privacy Auditing"), "the home page")
        idle = server_memory(url)
        upload(driver, [data / "documents.csv", data / "registry.csv", REPO_ROOT / "sample_data" / "audit.toml"],
               timeout=600)
        if top_k:
            shortlist(driver)
        loaded = server_memory(url)
        start = time.perf_counter()
        calibrate(driver, timeout=900)
        calibration = time.perf_counter() - start
        start = time.perf_counter()
        go(driver, "Explore", "Documents at risk")
        wait(driver, lambda d: d.execute_script(f"return {TITLE};"), "the histogram")
        first = time.perf_counter() - start
        steps = slider_steps(driver, repeat + 1, server_pid(url))[1:]  # the first step warms the page's caches
        after = server_memory(url)
    return {"n": n, "calibration_s": calibration, "first_visit_s": first, "steps": steps, "idle": idle,
            "loaded": loaded, "after": after}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", default="/tmp/cpa_bench_scale")
    parser.add_argument("--documents", default="10000,100000")
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--top-k", choices=("50", "none"), default="50",
                        help="the threat model's shortlist: the page's default top-K 50, or the whole registry")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    exit_if_missing()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores")
    pool = "top-K 50" if args.top_k == "50" else "whole registry as pool"
    for n in (int(x) for x in args.documents.split(",")):
        before = os.getloadavg()
        row = measure(Path(args.workdir), n, args.people, args.top_k == "50", args.repeat)
        after = os.getloadavg()
        seconds = [step["seconds"] for step in row["steps"]]
        median, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
        print(f"| {n:,} documents ({args.people:,} people, {pool}) | {median:.0f} ms median, {worst:.0f} ms worst of "
              f"{len(seconds)} | target ≤ {TARGET_MS} ms: {'met' if median <= TARGET_MS else 'missed'} | "
              f"first Explore visit {row['first_visit_s']:.1f} s | calibration {row['calibration_s']:.0f} s | "
              f"server RSS idle {row['idle']['rss']:,.0f} MiB, data loaded {row['loaded']['rss']:,.0f} MiB, "
              f"calibrated {row['after']['rss']:,.0f} MiB (peak {row['after']['peak']:,.0f} MiB) | "
              f"load {before[0]:.2f} before, {after[0]:.2f} after |", flush=True)
        cost = {key: statistics.fmean(step[key] for step in row["steps"]) for key in row["steps"][0] if key != "seconds"}
        print(f"  where a step goes at {n:,} documents (mean): server CPU {1000 * cost['server_cpu']:.0f} ms, "
              f"browser CPU {1000 * cost['browser_cpu']:.0f} ms (main thread busy {1000 * cost['main_thread']:.0f} ms),"
              f" {cost['websocket_bytes'] / 1024:.0f} KiB over the websocket", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
