"""A real browser on the dashboard: ``streamlit run app.py`` on a free loopback port and headless Chromium
driven by selenium, with the waits the end-to-end tests and the dashboard benchmarks share."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from processes import answers, free_port, stop

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO_ROOT / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
STARTUP_TIMEOUT_S = 90
WAIT_S = 240  # a page settling on a loaded 2-core machine (load 10): a wait, not a measurement


def missing() -> str | None:
    """Why no browser can run here (``None``: it can)."""
    if not CHROMIUM.exists() or _chromedriver() is None:
        return ("the browser test needs /usr/bin/chromium and chromedriver "
                "(apt-get install chromium chromium-driver; .ci/run installs them)")
    return None


def exit_if_missing(prefix: str = "skipped: ") -> None:
    """For a script run by hand: exit with status 1 and ``prefix`` + the reason on stderr where no browser can
    run here."""
    reason = missing()
    if reason:
        sys.exit(f"{prefix}{reason}")


def _chromedriver() -> str | None:
    found = shutil.which("chromedriver")
    if found:
        return found
    for candidate in ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"):
        if Path(candidate).is_file():
            return candidate
    return None


@contextlib.contextmanager
def dashboard() -> Iterator[str]:
    """The dashboard served by ``streamlit run app.py`` on 127.0.0.1 and a free port (its URL); stopped after."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (ARTIFACTS / "streamlit-server.log").open("w", encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.address",
         "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not answers(f"{url}/_stcore/health"):
            if server.poll() is not None:
                raise RuntimeError(f"streamlit exited with status {server.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not answer on {url} within {STARTUP_TIMEOUT_S} s; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        stop(server, timeout=20)
        log.close()


@contextlib.contextmanager
def chromium() -> Iterator:
    """Headless Chromium under selenium, logging every request the page makes; closed after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="cpa-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", "--window-size=1500,1200", f"--user-data-dir={profile}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # every request the page makes
    driver = webdriver.Chrome(service=Service(_chromedriver()), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver, condition, what: str, timeout: float = WAIT_S, poll: float = 0.25):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=poll).until(condition)
    except TimeoutException:
        screenshot(driver, f"failed-{what.replace(' ', '-')}")
        raise AssertionError(f"timed out waiting for {what}") from None


def text_present(text: str):
    from selenium.webdriver.common.by import By

    def check(driver):
        return text in driver.find_element(By.TAG_NAME, "body").text
    return check


def settled(driver) -> bool:
    """Streamlit has finished running the script (no running indicator, no stale elements)."""
    from selenium.webdriver.common.by import By
    running = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
    stale = driver.find_elements(By.CSS_SELECTOR, '[data-stale="true"]')
    return not running and not stale


def screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    # the page scrolls inside Streamlit's main container: size the window to the whole page first
    height = driver.execute_script(
        "const m = document.querySelector('[data-testid=\"stMain\"]');"
        "return Math.max(document.body.scrollHeight, m ? m.scrollHeight : 0);")
    driver.set_window_size(1500, min(max(int(height) + 120, 900), 6000))
    time.sleep(0.8)
    driver.save_screenshot(str(path))
    driver.set_window_size(1500, 1200)
    return path


def click(driver, xpath: str, what: str, timeout: float = WAIT_S) -> None:
    """Click the first element matching ``xpath`` once the page has settled and the element is shown and enabled;
    a click that lands while Streamlit re-renders (stale, hidden or covered element) is tried again."""
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
    wait(driver, attempt, what, timeout)


def expand(driver, label: str) -> None:
    """Open the expander whose label contains ``label`` (left open if it already is)."""
    from selenium.webdriver.common.by import By

    details = f"//details[.//summary//p[contains(text(), '{label}')]]"

    def is_open(d) -> bool:
        found = d.find_elements(By.XPATH, details)
        return bool(found) and found[0].get_attribute("open") is not None
    if not is_open(driver):
        click(driver, f"{details}/summary", f"the expander '{label}'")
    wait(driver, is_open, f"the expander '{label}' to open")


def upload(driver, paths: list[Path], timeout: float = WAIT_S) -> None:
    """On the Data page, put each file into the upload field of its position (documents, registry, configuration),
    press "Load these files" and wait until the page confirms the new data."""
    from selenium.webdriver.common.by import By

    label = "Upload your own documents"
    go(driver, "Data", label)
    expand(driver, label)
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, 'input[type="file"]')) >= len(paths),
         "the upload fields")
    for position, path in enumerate(paths):
        driver.find_elements(By.CSS_SELECTOR, 'input[type="file"]')[position].send_keys(str(path))
        wait(driver, text_present(path.name), f"the upload of {path.name}", timeout)
        wait(driver, settled, f"the upload of {path.name} to settle", timeout)
    expand(driver, label)
    click(driver, "//button[.//p[text()='Load these files']]", "the load button")
    wait(driver, text_present("New data loaded"), "the new data to load", timeout)
    wait(driver, settled, "the new data to settle", timeout)


def go(driver, title: str, expect: str) -> None:
    """Open a page from the sidebar navigation (keeps the session) and wait until it has rendered."""
    from selenium.webdriver.common.by import By

    links = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNav"] a')
    assert any(title in link.text for link in links), f"no sidebar link '{title}' among {[link.text for link in links]}"
    click(driver, f"//*[@data-testid='stSidebarNav']//a[contains(., '{title}')]", f"the sidebar link {title}")
    wait(driver, text_present(expect), f"page {title}")
    wait(driver, settled, f"page {title} to settle")


def no_errors(driver) -> None:
    from selenium.webdriver.common.by import By

    assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]'), "an exception is shown"
    assert "Traceback" not in driver.find_element(By.TAG_NAME, "body").text


PAGE_METRICS = """
const metrics = [];
for (const metric of document.querySelectorAll('[data-testid="stMetric"]')) {
  const label = metric.querySelector('[data-testid="stMetricLabel"]');
  const value = metric.querySelector('[data-testid="stMetricValue"]');
  if (label && value) metrics.push([label.innerText.trim(), value.innerText.trim()]);
}
return [metrics, !document.querySelector('[data-testid="stStatusWidget"]')
                 && !document.querySelector('[data-stale="true"]')];
"""


def page_metrics(driver) -> tuple[list[tuple[str, str]], bool]:
    """The metrics the page shows (label, value, in order) and whether Streamlit has settled, read in one call: a
    page that re-renders meanwhile leaves no stale element to read."""
    metrics, done = driver.execute_script(PAGE_METRICS)
    return [tuple(m) for m in metrics], bool(done)


def metric_value(driver, label: str) -> str | None:
    """The value of the metric ``label`` (``None`` while none is shown)."""
    return next((value for name, value in page_metrics(driver)[0] if name == label), None)


def edit_and_rescore_seconds(driver, text: str, label: str = "|C| of the edited text (indicative)") -> tuple[float, str]:
    """Replace the drill-down's edited text, commit it (Ctrl+Enter) and time until the page shows the edited text
    re-scored (a new indicative set size, or the edited text under the metrics, when its set size is the one shown
    before) and has settled; returns the seconds and the value shown."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    area = driver.find_element(By.CSS_SELECTOR, '[data-testid="stTextArea"] textarea')
    before = metric_value(driver, label)
    area.click()
    area.send_keys(Keys.CONTROL, "a")
    area.send_keys(Keys.DELETE)
    driver.execute_script("arguments[0].value = '';", area)
    area.send_keys(text)
    start = time.perf_counter()
    area.send_keys(Keys.CONTROL, Keys.ENTER)
    wanted = " ".join(text.split())[:60]

    def rescored(d) -> bool:
        if metric_value(d, label) not in (None, before):
            return True
        try:
            shown = d.find_elements(By.CSS_SELECTOR, ".cpa-document")
            return bool(shown) and " ".join(shown[-1].text.split()).startswith(wanted)
        except StaleElementReferenceException:  # the page re-ran while it was read
            return False

    wait(driver, lambda d: rescored(d) and settled(d), "the re-scored text", poll=0.01)
    return time.perf_counter() - start, metric_value(driver, label)


def choose_attackers(driver, labels: tuple[str, ...]) -> None:
    """On the Threat model page, declare exactly the attackers ``labels`` (their labels, in order) in the attacker
    panel's multiselect: each in turn, any chosen attacker that does not belong removed first."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        ElementNotInteractableException,
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = "//*[@data-testid='stMultiSelect'][.//label[contains(., 'Attacker panel')]]"
    go(driver, "Threat model", "Attacker panel")

    def chosen(d) -> list[str]:
        try:
            return [tag.get_attribute("aria-label") for tag in d.find_elements(By.XPATH, f"{box}//*[@data-tag]")]
        except StaleElementReferenceException:
            return []
    for position, label in enumerate(labels):
        wanted = list(labels[:position + 1])

        def pick(d) -> bool:
            """Done once exactly the attackers up to ``label`` are chosen, in order. Until then, on a settled page:
            remove the last chosen attacker if the chosen ones are not a start of the wanted ones; else pick the next
            wanted one: click its option if it is listed, else (a rerun may close the list, drop what was typed or
            swallow a click) open the input again and type its label again."""
            if not settled(d):
                return False
            now = chosen(d)
            if now == wanted:
                return True
            try:
                if now != wanted[:len(now)]:
                    d.find_element(By.XPATH, f"{box}//button[@aria-label='Remove {now[-1]}']").click()
                    time.sleep(0.5)  # let the rerun start before the next look
                    return False
                following = wanted[len(now)]
                shown = [o for o in d.find_elements(By.XPATH, f"//*[@role='option'][normalize-space(.)='{following}']")
                         if o.is_displayed()]
                if shown:
                    shown[0].click()
                    time.sleep(0.5)
                    return False
                field = d.find_element(By.XPATH, f"{box}//input")
                field.click()
                if field.get_attribute("value") != following:
                    field.send_keys(Keys.CONTROL, "a")
                    field.send_keys(Keys.DELETE)
                    field.send_keys(following)
            except (ElementClickInterceptedException, ElementNotInteractableException, NoSuchElementException,
                    StaleElementReferenceException):
                pass
            return False
        wait(driver, pick, f"the attacker {label} to be chosen")
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    wait(driver, settled, "the threat model to settle")


def calibrate(driver, timeout: float = 180, attackers: tuple[str, ...] | None = ("TF-IDF retrieval",)) -> None:
    """Run the declared audit from the Calibrate page and wait (``timeout`` seconds at most) for its results;
    ``attackers``: declare these attackers first (their labels; ``None``: the ones declared now, by default the default
    panel)."""
    if attackers is not None:
        choose_attackers(driver, attackers)
    go(driver, "Calibrate", "Run the attack and calibrate")
    click(driver, "//button[.//p[text()='Run the attack and calibrate']]", "the calibrate button")
    wait(driver, text_present("Threshold and coverage per confidence level"), "the calibration results", timeout)
    wait(driver, settled, "the calibration to settle")


REVIEW_ROWS = '[class*="st-key-redact-row-"] label'
"""The checkboxes of the review table's rows, in the order it shows them (keyed ``redact.row.<version>.<row>``)."""


def tick_box(driver, row: int) -> None:
    """Click the 'accept' checkbox of a row of the review table (its ``row``-th shown), scrolled into view first."""
    from selenium.webdriver.common.by import By

    box = driver.find_elements(By.CSS_SELECTOR, REVIEW_ROWS)[row]
    driver.execute_script("arguments[0].scrollIntoView({block: 'nearest'});", box)
    box.click()


def tick(driver, row: int) -> None:
    """Tick or untick a row of the review table (its ``row``-th shown), and wait for the page to settle."""
    wait(driver, lambda d: len(d.find_elements("css selector", REVIEW_ROWS)) > row and settled(d), "the review table")
    tick_box(driver, row)
    time.sleep(0.3)
    wait(driver, settled, "the review table to settle")


def downloads_into(driver, name: str) -> Path:
    """An empty folder of the artifacts (``name``) that the browser's downloads go into from now on."""
    folder = ARTIFACTS / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)})
    return folder


def download(driver, folder: Path, label: str, pattern: str, timeout: float = 180) -> Path:
    """Press the download button ``label`` once the page has settled and wait for its file (``pattern``) in
    ``folder``, any earlier file of that pattern removed first."""
    for old in folder.glob(pattern):
        old.unlink()
    wait(driver, settled, "the page to settle before a download")
    click(driver, f"//button[.//p[text()={label!r}]]", label)
    wait(driver, lambda d: any(folder.glob(pattern)) and not any(folder.glob("*.crdownload")),
         f"the download of {label}", timeout)
    return next(folder.glob(pattern))
