"""How long the drill-down's edit-and-re-score loop takes in a real browser on the sample data.

Serves the dashboard (``streamlit run app.py`` on a loopback port), drives headless Chromium through the
calibration of the sample data, opens the first flagged document on the Flagged documents page, then times
``--repeat`` edits of its text: from Ctrl+Enter in the text area until the page shows the new indicative set
size and has settled (Streamlit's rerun, the attack of the edited text, the count under the stored threshold,
the highlight of what still drives the match, and the browser's rendering).

Usage: ``.venv/bin/python bench/bench_edit_loop.py [--repeat 10]``. Prints a markdown line for
``bench/RESULTS.md`` with the machine's load. Needs Chromium and chromedriver (``make test`` installs them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT))

from browser import calibrate, chromium, dashboard, edit_and_rescore_seconds, exit_if_missing, go, settled, text_present, wait  # noqa: E402

EDITS = ("Seen in clinic for a review; no changes.", "A patient was seen in the clinic.")
TARGET_S = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    exit_if_missing()

    with dashboard() as url, chromium() as driver:
        driver.get(url)
        wait(driver, text_present("Conformal Privacy Auditing"), "the home page")
        wait(driver, settled, "the home page to settle")
        calibrate(driver)
        go(driver, "Flagged documents", "Drill-down")
        wait(driver, text_present("Suggested:"), "the suggested edits")
        seconds = [edit_and_rescore_seconds(driver, EDITS[i % 2])[0] for i in range(args.repeat + 1)][1:]
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    median, worst = statistics.median(seconds), max(seconds)
    print(f"| edit and re-score one document (sample data, real browser, settled) | {median * 1000:.0f} ms median, "
          f"{worst * 1000:.0f} ms worst of {len(seconds)} | target ≤ {TARGET_S * 1000:.0f} ms: "
          f"{'met' if worst <= TARGET_S else 'missed'} | load {load} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
