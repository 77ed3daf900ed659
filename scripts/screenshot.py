"""The README's screenshot: the dashboard's Explore page after a calibration on the bundled sample data.

Run from anywhere with the project's virtualenv: ``.venv/bin/python scripts/screenshot.py`` (writes
``docs/dashboard.png``; ``--out FILE`` writes elsewhere). It serves ``app.py`` and drives a real headless Chromium
with the browser tests' own helpers (``tests/browser.py``: streamlit on 127.0.0.1 and a free port, Debian's
``chromium`` and ``chromium-driver``), runs the declared audit from the Calibrate page, opens the Explore page and
saves a 1400 x 900 PNG of it. The calibration is recorded in a throw-away audit history, never in this machine's;
the server is stopped on every exit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

import browser  # noqa: E402  (the browser tests' helpers)

OUT = REPO_ROOT / "docs" / "dashboard.png"
WIDTH, HEIGHT = 1400, 900


def capture(driver, url: str, out: Path) -> None:
    """Calibrate the sample audit, open Explore once its figures are drawn and save the viewport as ``out``."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    browser.wait(driver, browser.text_present("Conformal Privacy Auditing"), "the home page")
    browser.wait(driver, browser.settled, "the home page to settle")
    browser.calibrate(driver, timeout=300)
    browser.no_errors(driver)
    browser.go(driver, "Explore", "Documents at risk")
    # every figure drawn (plotly renders after the script has finished)
    browser.wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"] .main-svg')) >= 2,
                 "the Explore figures")
    browser.no_errors(driver)
    # the viewport is exactly WIDTH x HEIGHT whatever the window decorations
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    size = driver.get_window_size()
    driver.set_window_size(size["width"] + WIDTH - inner[0], size["height"] + HEIGHT - inner[1])
    time.sleep(1.5)  # the figures re-layout to the final size
    browser.wait(driver, browser.settled, "the Explore page to settle")
    out.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG to write (default {OUT.relative_to(REPO_ROOT)})")
    out = parser.parse_args().out.resolve()
    browser.exit_if_missing(prefix="")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cpa-screenshot-") as scratch:
        os.environ["CPA_HISTORY"] = str(Path(scratch) / "history.sqlite")  # the server inherits it
        with browser.dashboard() as url, browser.chromium() as driver:
            try:
                capture(driver, url, out)
            except Exception:
                print(f"what the browser showed: {browser.screenshot(driver, 'screenshot-failed')}; the server's log: "
                      f"{browser.ARTIFACTS / 'streamlit-server.log'}", file=sys.stderr)
                raise
    print(f"wrote {out} in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
