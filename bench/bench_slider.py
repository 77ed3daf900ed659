"""How long the Explore page takes to follow the confidence slider in a real browser, at 10,000 and 100,000
documents.

For each size: serves the dashboard (``streamlit run app.py`` on a loopback port), drives headless Chromium to
upload synthetic documents and a registry (``cpa_core.io.synthetic``, 1,000 people; the sample configuration: K2,
temperature ``auto``), declares a top-K shortlist on the threat-model page, calibrates (every document certified),
opens Explore (timed: the first visit computes the confidence curve), then times ``--repeat`` steps of the
confidence slider (the keyboard's left arrow): from the key press until the histogram's title shows the new level
and the page has settled (Streamlit's rerun, the certificate at the new level, the KPIs, figures and tables, and
the browser's rendering).

Also the server's resident memory: idle, with the data loaded, and once calibrated and explored (with its peak):
what one dashboard session holds.

Usage: ``.venv/bin/python bench/bench_slider.py [WORKDIR] [--documents 10000,100000] [--people 1000]
[--top-k 50|none] [--repeat 10]``. Prints markdown rows for ``bench/RESULTS.md`` with the machine's load. Needs
Chromium and chromedriver.
"""

from __future__ import annotations

import argparse
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


def slider_steps(driver, repeat: int) -> list[float]:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    seconds = []
    for _ in range(repeat):
        slider = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSlider"] input[type="range"]')[0]
        driver.execute_script("arguments[0].focus();", slider)
        before = driver.execute_script(f"return {TITLE};")
        start = time.perf_counter()
        ActionChains(driver).send_keys(Keys.ARROW_LEFT).perform()  # down from the declared level: new levels
        wait(driver, lambda d: d.execute_script(f"return {TITLE};") != before and settled(d),
             "the page to follow the slider", poll=0.01)
        seconds.append(time.perf_counter() - start)
    return seconds


def server_memory(url: str) -> dict[str, float]:
    """Resident memory of the dashboard's server process (the one serving ``url``): now and its peak, in MiB."""
    port = url.rsplit(":", 1)[1]
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            command = (status.parent / "cmdline").read_bytes().split(b"\0")
            if b"streamlit" not in b" ".join(command) or port.encode() not in command:
                continue
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:  # a process that ended meanwhile
            continue
        return {name: int(fields[key].split()[0]) / 1024 for name, key in (("rss", "VmRSS"), ("peak", "VmHWM"))}
    return {"rss": float("nan"), "peak": float("nan")}


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
        steps = slider_steps(driver, repeat + 1)[1:]  # the first step warms the page's caches
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
        median, worst = statistics.median(row["steps"]) * 1000, max(row["steps"]) * 1000
        print(f"| {n:,} documents ({args.people:,} people, {pool}) | {median:.0f} ms median, {worst:.0f} ms worst of "
              f"{len(row['steps'])} | target ≤ {TARGET_MS} ms: {'met' if median <= TARGET_MS else 'missed'} | "
              f"first Explore visit {row['first_visit_s']:.1f} s | calibration {row['calibration_s']:.0f} s | "
              f"server RSS idle {row['idle']['rss']:,.0f} MiB, data loaded {row['loaded']['rss']:,.0f} MiB, "
              f"calibrated {row['after']['rss']:,.0f} MiB (peak {row['after']['peak']:,.0f} MiB) | "
              f"load {before[0]:.2f} before, {after[0]:.2f} after |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
