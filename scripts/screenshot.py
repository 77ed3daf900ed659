"""The README's screenshot: the dashboard's Explore page after a calibration on the bundled sample data.

Run from anywhere with the project's virtualenv: ``.venv/bin/python scripts/screenshot.py`` (writes
``docs/dashboard.png``; ``--out FILE`` writes elsewhere). It serves ``app.py`` with streamlit on 127.0.0.1 and a
free port, drives a real headless Chromium with selenium (Debian's ``chromium`` and ``chromium-driver``), runs the
declared audit from the Calibrate page, opens the Explore page and saves a 1400 x 900 PNG of it. The calibration
is recorded in a throw-away audit history, never in this machine's; the server is stopped on every exit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
STREAMLIT = REPO_ROOT / ".venv" / "bin" / "streamlit"
CHROMIUM = Path("/usr/bin/chromium")
OUT = REPO_ROOT / "docs" / "dashboard.png"
WIDTH, HEIGHT = 1400, 900
STARTUP_TIMEOUT_S = 90
WAIT_S = 60
CALIBRATION_TIMEOUT_S = 300


def chromedriver() -> str:
    found = shutil.which("chromedriver") or next(
        (path for path in ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver") if Path(path).is_file()), None)
    if not CHROMIUM.exists() or found is None:
        sys.exit("needs /usr/bin/chromium and chromedriver: apt-get install -y chromium chromium-driver")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def no_errors(driver) -> None:
    """Fail at once when the page shows an exception (its details are in the server's log)."""
    from selenium.webdriver.common.by import By

    body = driver.find_element(By.TAG_NAME, "body").text
    if (driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]') or "Traceback" in body
            or "This app has encountered an error" in body):
        raise RuntimeError("the dashboard shows an error")


def wait(driver, condition, what: str, timeout: float = WAIT_S):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    def check(d):
        no_errors(d)  # an error on the page ends the wait at once
        return condition(d)
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(check)
    except TimeoutException:
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}") from None


def text_present(text: str):
    from selenium.webdriver.common.by import By

    return lambda driver: text in driver.find_element(By.TAG_NAME, "body").text


def settled(driver) -> bool:
    """Streamlit has finished running the script: no running indicator, no stale element."""
    from selenium.webdriver.common.by import By

    return not (driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
                or driver.find_elements(By.CSS_SELECTOR, '[data-stale="true"]'))


def click(driver, xpath: str, what: str) -> None:
    """Click the first element matching ``xpath`` once the page has settled; retried while Streamlit re-renders."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        ElementNotInteractableException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.common.by import By

    def attempt(d) -> bool:
        if not settled(d):
            return False
        found = d.find_elements(By.XPATH, xpath)
        try:
            if not found or not found[0].is_displayed() or not found[0].is_enabled():
                return False
            found[0].click()
        except (ElementClickInterceptedException, ElementNotInteractableException, StaleElementReferenceException):
            return False
        return True
    wait(driver, attempt, what)


def go(driver, title: str, expect: str, timeout: float = WAIT_S) -> None:
    """Open a page from the sidebar (the session is kept) and wait until it shows ``expect`` and has settled."""
    click(driver, f"//*[@data-testid='stSidebarNav']//a[contains(., '{title}')]", f"the sidebar link {title}")
    wait(driver, text_present(expect), f"the page {title}", timeout)
    wait(driver, settled, f"the page {title} to settle", timeout)




def capture(url: str, out: Path, scratch: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    profile = tempfile.mkdtemp(prefix="cpa-screenshot-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
                     f"--user-data-dir={profile}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(chromedriver()), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        driver.get(url)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNav"] a'), "the sidebar")
        wait(driver, settled, "the home page to settle")
        go(driver, "Calibrate", "Run the attack and calibrate")
        click(driver, "//button[.//p[text()='Run the attack and calibrate']]", "the calibrate button")
        wait(driver, text_present("Threshold and coverage per confidence level"), "the calibration results",
             CALIBRATION_TIMEOUT_S)
        wait(driver, settled, "the calibration to settle")
        no_errors(driver)
        go(driver, "Explore", "Documents at risk")
        # every figure drawn (plotly renders after the script has finished)
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"] .main-svg')) >= 2,
             "the Explore figures")
        no_errors(driver)
        # the viewport is exactly WIDTH x HEIGHT whatever the window decorations
        inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
        size = driver.get_window_size()
        driver.set_window_size(size["width"] + WIDTH - inner[0], size["height"] + HEIGHT - inner[1])
        time.sleep(1.5)  # the figures re-layout to the final size
        wait(driver, settled, "the Explore page to settle")
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    except Exception:
        driver.save_screenshot(str(scratch / "failed.png"))
        print(f"what the browser showed: {scratch / 'failed.png'}; the server's log: {scratch / 'streamlit.log'}",
              file=sys.stderr)
        raise
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG to write (default {OUT.relative_to(REPO_ROOT)})")
    out = parser.parse_args().out.resolve()
    chromedriver()
    start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="cpa-screenshot-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CPA_HISTORY": str(scratch / "history.sqlite")}
    log_path = scratch / "streamlit.log"
    with log_path.open("w", encoding="utf-8") as log:
        server = subprocess.Popen(
            [str(STREAMLIT), "run", "app.py", "--server.headless", "true", "--server.address", "127.0.0.1",
             "--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not healthy(url):
                if server.poll() is not None:
                    raise RuntimeError(f"streamlit exited with status {server.returncode}:\n{log_path.read_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not answer on {url} within {STARTUP_TIMEOUT_S} s")
                time.sleep(0.5)
            capture(url, out, scratch)
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"wrote {out} in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
