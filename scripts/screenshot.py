"""The README's screenshot: the dashboard's Explore page after a calibration on the bundled sample data.

Run from anywhere with the project's virtualenv: ``.venv/bin/python scripts/screenshot.py`` (writes
``docs/dashboard.png``; ``--out FILE`` writes elsewhere). It serves ``app.py`` and drives a real headless Chromium
with the browser tests' own helpers (``tests/browser.py``: streamlit on 127.0.0.1 and a free port, Debian's
``chromium`` and ``chromium-driver``), runs the declared audit from the Calibrate page as a newcomer gets it (the
default attacker panel, as the README's tour does), opens the Explore page and saves a 1400 x 1360 PNG of it from
the panel's verdict down to the set-size histogram of the attacker shown. The calibration is recorded in a throw-away
audit history, never in this machine's; the server is stopped on every exit.
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
WIDTH, HEIGHT = 1400, 1360
VERDICT = "Panel verdict"  # the verdict box of the default panel: the top of the picture
HISTOGRAM = "Certified set sizes at"  # the title of the set-size histogram: the bottom of the picture


def capture(driver, url: str, out: Path) -> None:
    """Calibrate the sample audit under the default panel, open Explore once its figures are drawn and save the
    viewport, scrolled to the verdict, as ``out``."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    browser.wait(driver, browser.text_present("Conformal Privacy Auditing"), "the home page")
    browser.wait(driver, browser.settled, "the home page to settle")
    browser.calibrate(driver, timeout=600, attackers=None)
    browser.no_errors(driver)
    browser.go(driver, "Explore", VERDICT)
    # every figure drawn (plotly renders after the script has finished), the histogram among them
    charts = '[data-testid="stPlotlyChart"] .main-svg'
    browser.wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, charts)) >= 2, "the Explore figures")
    browser.wait(driver, browser.text_present(HISTOGRAM), "the set-size histogram")
    browser.no_errors(driver)
    # the viewport is exactly WIDTH x HEIGHT whatever the window decorations
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    size = driver.get_window_size()
    driver.set_window_size(size["width"] + WIDTH - inner[0], size["height"] + HEIGHT - inner[1])
    time.sleep(1.5)  # the figures re-layout to the final size
    browser.wait(driver, browser.settled, "the Explore page to settle")
    verdict = [box for box in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stAlert"]') if VERDICT in box.text]
    assert verdict, f"no '{VERDICT}' box on the Explore page"
    # the verdict at the top of the picture (a margin above it), the histogram under it
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", verdict[0])
    driver.execute_script("""const box = arguments[0], scroller = box.closest('[data-testid="stMain"]')
                             || document.scrollingElement; scroller.scrollBy(0, -24);""", verdict[0])
    time.sleep(0.5)
    chart = driver.find_element(By.XPATH, f"//*[@data-testid='stPlotlyChart'][.//*[contains(text(), '{HISTOGRAM}')]]")
    bottom = driver.execute_script("return arguments[0].getBoundingClientRect().bottom;", chart)
    assert bottom <= HEIGHT, f"the histogram ends {bottom:.0f} px down, below the {HEIGHT} px picture"
    out.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT,
                        help=f"the PNG to write (default {OUT.relative_to(REPO_ROOT)})")
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
