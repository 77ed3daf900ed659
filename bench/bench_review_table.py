"""How long a tick and a bulk action take on a review table of 50,000 rows, in a real browser.

Serves the dashboard (``streamlit run app.py`` on a loopback port) and drives headless Chromium: a synthetic release
(``cpa_core.io.synthetic``, ``--documents`` documents about 1,000 people) uploaded and calibrated with TF-IDF, then
the Redact page's search with an allow list of common words (every occurrence of each in every document is a row of
the review table), until the table holds at least ``--rows`` rows. Then it times, from the click (the element found
before the clock starts) until the page shows the new count of accepted edits and has settled (both read in one
call to the browser every 5 ms):

- a tick: the 'accept' checkbox of a row of the review table, clicked (``--repeat`` times, alternating rows);
- a bulk action: "Reject all" and "Accept all", in turn.

The competitor, timed in the same run on the same rows: one ``st.data_editor`` holding the whole decisions table (as
the Redact page drew it before it showed a page at a time), in a Streamlit script of its own, a tick timed the same
way (until its count of accepted rows changes).

Usage: ``.venv/bin/python bench/bench_review_table.py [--repeat 15] [--rows 50000] [--documents 3000]``. Prints
markdown rows for ``bench/RESULTS.md`` with the machine and its load. Needs Chromium and chromedriver.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402
from browser import (  # noqa: E402
    REVIEW_ROWS,
    WAIT_S,
    calibrate,
    chromium,
    click,
    dashboard,
    exit_if_missing,
    go,
    page_metrics,
    settled,
    text_present,
    upload,
    wait,
)
from processes import answers, free_port, stop  # noqa: E402
from results_sections import machine, uptime  # noqa: E402

from cpa_core.io.synthetic import generate_sample_data  # noqa: E402
from cpa_ui.redaction import PAGE_ROWS  # noqa: E402

ALLOW = ("the", "a", "in", "was", "of", "with", "and", "to", "for", "on", "at", "is")
TARGET_MS = 300
COMPETITOR = '''
import pandas as pd
import streamlit as st

table = st.session_state.setdefault("table", pd.read_csv({path!r}, keep_default_na=False))
edited = st.data_editor(table, hide_index=True, key="whole", num_rows="fixed",
                        disabled=[c for c in table.columns if c != "accept"])
st.metric("Accepted", f"{{int(edited['accept'].sum()):,}}")
'''


def cell(driver, row: int):
    """The click of the first column (accept) of a row of the first table of the page (the competitor's data
    editor), to perform: the mouse at that cell."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] canvas')[0]
    width, height = canvas.size["width"], canvas.size["height"]
    return ActionChains(driver).move_to_element_with_offset(
        canvas, -width // 2 + 40, -height // 2 + 35 * (row + 1) + 17).click().perform


def row_box(driver, row: int):
    """The click of the 'accept' checkbox of a row of the Redact page's review table, scrolled into view."""
    from selenium.webdriver.common.by import By

    box = driver.find_elements(By.CSS_SELECTOR, REVIEW_ROWS)[row]
    driver.execute_script("arguments[0].scrollIntoView({block: 'nearest'});", box)
    return box.click


def button(driver, label: str):
    """The click of the button ``label``."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.XPATH, f"//button[.//p[text()='{label}']]").click


def shown_metric(driver, start: str) -> str | None:
    """The first metric of the page whose label starts with ``start``, as ``label: value`` (``None`` until one is
    shown)."""
    return first_metric(page_metrics(driver)[0], start)


def first_metric(metrics: list[tuple[str, str]], start: str) -> str | None:
    return next((f"{label}: {value}" for label, value in metrics if label.startswith(start)), None)


def timed(driver, target, start: str) -> float:
    """Seconds from the click ``target()`` gives (its element found before the clock starts) until the metric whose
    label starts with ``start`` shows another label or value and the page has settled (read every 5 ms, in one
    call each)."""
    wait(driver, settled, "the page to settle")
    before = shown_metric(driver, start)
    act = target()
    begin = time.perf_counter()
    act()
    while True:
        metrics, done = page_metrics(driver)
        if first_metric(metrics, start) not in (None, before) and done:
            return time.perf_counter() - begin
        if time.perf_counter() - begin > WAIT_S:
            raise AssertionError(f"timed out waiting for {start} to change")
        time.sleep(0.005)


@contextlib.contextmanager
def served(script: Path):
    """``streamlit run script`` on 127.0.0.1 and a free port (its URL); stopped after."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
                               "--server.address", "127.0.0.1", "--server.port", str(port),
                               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not answers(f"{url}/_stcore/health"):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the competitor's streamlit did not start")
            time.sleep(0.5)
        yield url
    finally:
        stop(server, timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--documents", type=int, default=3_000)
    args = parser.parse_args()
    exit_if_missing()
    started, load_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), uptime()
    with tempfile.TemporaryDirectory(prefix="cpa-bench-review-") as work:
        folder = Path(work)
        paths = generate_sample_data(folder / "release", seed=11, n_people=1_000, n_documents=args.documents)
        downloads = folder / "downloads"
        downloads.mkdir()
        with dashboard() as url, chromium() as driver:
            driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
            driver.get(url)
            wait(driver, text_present("Conformal Privacy Auditing"), "the home page")
            upload(driver, [paths["documents"], paths["registry"]])
            calibrate(driver, timeout=900)
            go(driver, "Redact & re-audit", "Suggest redactions for the flagged documents")
            from selenium.webdriver.common.by import By
            from selenium.webdriver.common.keys import Keys
            box = driver.find_element(By.XPATH, "//div[@data-testid='stTextInput'][.//p[contains(text(), "
                                                "'Always redact')]]//input")
            box.send_keys(", ".join(ALLOW))
            box.send_keys(Keys.ENTER)
            wait(driver, settled, "the allow list")
            click(driver, "//button[.//p[text()='Suggest redactions for the flagged documents']]", "suggest")
            wait(driver, lambda d: shown_metric(d, "Edits accepted") is not None and settled(d), "the search", 3_600)
            label, accepted = shown_metric(driver, "Edits accepted").split(": ")
            total = label.split("(of ")[1].rstrip(")")
            click(driver, "//button[.//p[text()='Download the decisions (CSV)']]", "the decisions")
            wait(driver, lambda d: any(downloads.glob("decisions*.csv")) and not any(downloads.glob("*.crdownload")),
                 "the decisions file")
            table = pd.read_csv(next(downloads.glob("decisions*.csv")), keep_default_na=False, low_memory=False)
            rows = len(table)
            if rows < args.rows:
                sys.exit(f"the review table holds {rows:,} rows, fewer than {args.rows:,}: raise --documents")
            ticks = [timed(driver, lambda i=i: row_box(driver, i % 4), "Edits accepted")
                     for i in range(args.repeat + 1)][1:]
            bulk = [timed(driver, lambda i=i: button(driver, ("Reject all", "Accept all")[i % 2]), "Edits accepted")
                    for i in range(max(4, args.repeat // 2) + 1)][1:]
        whole = folder / "whole.csv"
        table[["accept", "doc_id", "action", "original", "replacement", "term", "source", "reason"]].to_csv(
            whole, index=False)
        script = folder / "competitor.py"
        script.write_text(COMPETITOR.format(path=str(whole)), encoding="utf-8")
        with served(script) as url, chromium() as driver:
            driver.get(url)
            wait(driver, lambda d: shown_metric(d, "Accepted") is not None and settled(d), "the competitor", 600)
            competitor = [timed(driver, lambda i=i: cell(driver, i % 4), "Accepted")
                          for i in range(args.repeat + 1)][1:]
    load_end = uptime()

    def row(what: str, seconds: list[float], target: bool) -> str:
        median, worst = statistics.median(seconds), max(seconds)
        verdict = (f" target ≤ {TARGET_MS} ms median: {'met' if median * 1000 <= TARGET_MS else 'missed'}"
                   if target else "")
        return (f"| {what} | {median * 1000:.0f} ms | {worst * 1000:.0f} ms | {len(seconds)} |{verdict} |")

    print(f"Run {started} on {machine()}. `uptime` at start: `{load_start}`; at end: `{load_end}`.\n")
    proposed = int(total.replace(",", ""))
    print(f"Review table of {rows:,} rows ({proposed:,} edits in the release, {args.documents:,} documents, allow list "
          f"{', '.join(ALLOW)}); from the click until the page shows the new count and has settled.\n")
    print("| action | median | worst | repeats | |\n|---|---:|---:|---:|---|")
    print(row(f"tick one row (the Redact page: a checkbox per row, {PAGE_ROWS} rows a page, the table's fragment "
              "rerun)", ticks, True))
    print(row("accept all / reject all (the Redact page)", bulk, True))
    print(row(f"competitor: tick one row of one data editor holding all {rows:,} rows", competitor, False))
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\nload averages at the end: {load}; edits accepted when the search ended: {accepted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
