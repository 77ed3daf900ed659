"""End to end in a real browser: ``streamlit run app.py`` on a free loopback port, driven by headless
Chromium through the whole workflow on the sample data; a screenshot of each page is saved under
``test-artifacts/screenshots/``.

Skipped when Chromium or its driver is missing (``.ci/run`` installs Debian's ``chromium`` and
``chromium-driver``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO_ROOT / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
STARTUP_TIMEOUT_S = 90
WAIT_S = 60

pytestmark = pytest.mark.integration


def _chromedriver() -> str | None:
    found = shutil.which("chromedriver")
    if found:
        return found
    for candidate in ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"):
        if Path(candidate).is_file():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def app_url(sample_paths):
    """The dashboard served by ``streamlit run app.py`` on 127.0.0.1 and a free port; stopped afterwards."""
    if not CHROMIUM.exists() or _chromedriver() is None:
        pytest.skip("the browser test needs /usr/bin/chromium and chromedriver "
                    "(apt-get install chromium chromium-driver; .ci/run installs them)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    port = _free_port()
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
        while not _healthy(url):
            if server.poll() is not None:
                pytest.fail(f"streamlit exited with status {server.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer on {url} within {STARTUP_TIMEOUT_S} s; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser(app_url):
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


def _wait(driver, condition, what: str, timeout: float = WAIT_S):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(condition)
    except TimeoutException:
        _screenshot(driver, f"failed-{what.replace(' ', '-')}")
        raise AssertionError(f"timed out waiting for {what}") from None


def _text_present(text: str):
    from selenium.webdriver.common.by import By

    def check(driver):
        return text in driver.find_element(By.TAG_NAME, "body").text
    return check


def _settled(driver) -> bool:
    """Streamlit has finished running the script (no running indicator, no stale elements)."""
    from selenium.webdriver.common.by import By
    running = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
    stale = driver.find_elements(By.CSS_SELECTOR, '[data-stale="true"]')
    return not running and not stale


def _screenshot(driver, name: str) -> Path:
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


def _go(driver, title: str, expect: str) -> None:
    """Open a page from the sidebar navigation (keeps the session) and wait until it has rendered."""
    from selenium.webdriver.common.by import By

    links = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNav"] a')
    matching = [link for link in links if title in link.text]
    assert matching, f"no sidebar link '{title}' among {[link.text for link in links]}"
    matching[0].click()
    _wait(driver, _text_present(expect), f"page {title}")
    _wait(driver, _settled, f"page {title} to settle")


def _no_errors(driver) -> None:
    from selenium.webdriver.common.by import By

    assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]'), "an exception is shown"
    assert "Traceback" not in driver.find_element(By.TAG_NAME, "body").text


def test_workflow_in_a_real_browser(browser, app_url, sample_paths):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = browser
    n_documents, n_profiles = (len(pd.read_csv(sample_paths[name])) for name in ("documents", "registry"))
    driver.get(app_url)
    _wait(driver, _text_present("Conformal Privacy Auditing"), "the home page")
    _wait(driver, _text_present(f"{n_documents:,} documents and {n_profiles:,} profiles loaded"),
          "the sample data on the home page")
    _wait(driver, _settled, "the home page to settle")
    _no_errors(driver)
    _screenshot(driver, "0-home")

    _go(driver, "Data", f"Auditing {n_documents:,} documents against {n_profiles:,} profiles")
    _no_errors(driver)
    _screenshot(driver, "1-data")

    _go(driver, "Threat model", "Declared configuration")
    driver.find_element(By.XPATH, "//label[.//p[text()='K2']]").click()
    _wait(driver, _text_present("knowledge level K2"), "the K2 summary")
    _wait(driver, _settled, "the threat page to settle")
    _no_errors(driver)
    _screenshot(driver, "2-threat-model")
    # every attacker's form draws from its spec: the dense one (two parameters named 'model' in the past)
    driver.find_element(By.XPATH, "//label[.//p[text()='Dense retrieval (sentence embeddings)']]").click()
    _wait(driver, _text_present("Embedding model"), "the dense form")
    _wait(driver, _settled, "the dense form to settle")
    _no_errors(driver)
    _screenshot(driver, "2-threat-model-dense")
    driver.find_element(By.XPATH, "//label[.//p[text()='TF-IDF retrieval']]").click()
    _wait(driver, _text_present("Vocabulary size"), "the TF-IDF form")
    _wait(driver, _settled, "the TF-IDF form to settle")

    _go(driver, "Calibrate", "Run the attack and calibrate")
    driver.find_element(By.XPATH, "//button[.//p[text()='Run the attack and calibrate']]").click()
    _wait(driver, _text_present("Threshold and coverage per confidence level"), "the calibration results", 180)
    _wait(driver, _settled, "the calibration to settle")
    _no_errors(driver)
    _screenshot(driver, "3-calibrate")

    _go(driver, "Explore", "Documents at risk")
    metrics = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]')
    labels = " ".join(m.text for m in metrics)
    for label in ("Documents at risk", "Smallest set", "Median set", "Mean leakage proxy", "Coverage (release)"):
        assert label in labels
    before = driver.find_element(By.CSS_SELECTOR, '[data-testid="stMetric"] [data-testid="stMetricValue"]').text
    # lower the confidence to the slider's minimum with the keyboard: sets shrink, documents get flagged
    slider = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSlider"] input[type="range"]')[0]
    driver.execute_script("arguments[0].focus();", slider)
    ActionChains(driver).send_keys(Keys.HOME).perform()
    _wait(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '[data-testid="stMetric"] [data-testid="stMetricValue"]').text != before,
          "the KPIs to follow the confidence slider")
    _wait(driver, _settled, "the explore page to settle")
    charts = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"]')
    assert len(charts) >= 2
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"] .barlayer .point'),
          "the histogram bars")
    _no_errors(driver)
    _screenshot(driver, "4-explore")

    _go(driver, "Flagged documents", "Drill-down")
    count = driver.find_element(By.CSS_SELECTOR, '[data-testid="stMetric"] [data-testid="stMetricValue"]').text
    assert not count.startswith("0 of"), f"expected flagged documents at the lowest confidence, found {count}"
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] canvas'), "the flagged table")
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".cpa-document"), "the document text")
    _no_errors(driver)
    _screenshot(driver, "5-flagged-documents")

    _go(driver, "Compare", "Configurations side by side")
    driver.find_element(By.XPATH, "//button[.//p[text()='Run the comparison']]").click()
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"]')) >= 2,
          "the comparison charts", 180)
    _wait(driver, _settled, "the comparison to settle")
    driver.find_element(By.XPATH, "//button[.//p[text()='Run the drift test']]").click()
    _wait(driver, _text_present("that is why every change of configuration needs its own calibration"),
          "the drift explanation", 180)
    _wait(driver, _settled, "the drift test to settle")
    _no_errors(driver)
    _screenshot(driver, "6-compare")

    _go(driver, "History", "Reopen an audit")  # the calibration above is recorded
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] canvas'), "the audit list")
    _wait(driver, _settled, "the history page to settle")
    _no_errors(driver)
    _screenshot(driver, "8-history")

    _go(driver, "Report", "Redaction worklist")
    labels = ("Certificate report (HTML)", "Certificate report (PDF)", "Worklist (CSV)", "Worklist (JSON)",
              "Per-document records (JSONL)", "Manifest (JSON)", "Reproduce this audit (audit.toml and command, ZIP)")

    def all_buttons(d) -> bool:
        shown = " ".join(b.text for b in d.find_elements(By.CSS_SELECTOR, '[data-testid="stDownloadButton"]'))
        return all(label in shown for label in labels)
    _wait(driver, all_buttons, "the download buttons")
    _no_errors(driver)
    _screenshot(driver, "7-report-and-export")

    # download the worklist and the report as a user would, then open the report offline
    downloads = ARTIFACTS / "downloads"
    shutil.rmtree(downloads, ignore_errors=True)
    downloads.mkdir(parents=True)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    for label, suffix in (("Worklist (CSV)", ".csv"), ("Certificate report (HTML)", ".html"),
                          ("Certificate report (PDF)", ".pdf"),
                          ("Reproduce this audit (audit.toml and command, ZIP)", ".zip")):
        _wait(driver, _settled, "the page to settle before a download")
        driver.find_element(By.XPATH, f"//button[.//p[text()='{label}']]").click()
        finished = lambda d: suffix in {p.suffix for p in downloads.iterdir()} and not any(
            p.suffix == ".crdownload" for p in downloads.iterdir())
        _wait(driver, finished, f"the download of {label}", 120)
    worklist = next(downloads.glob("*-worklist.csv")).read_text(encoding="utf-8")
    assert worklist.startswith("doc_id,group,set_size,leakage,top_candidates")
    config_id = pd.read_csv(next(downloads.glob("*-worklist.csv")), dtype=str)["config_id"].iloc[0]
    # every export declares one configuration
    assert all(name.name.startswith(f"cpa-{config_id}-") for name in downloads.iterdir())
    with zipfile.ZipFile(next(downloads.glob("*-reproduce.zip"))) as bundle:
        assert f"Configuration {config_id}" in bundle.read("audit.toml").decode("utf-8")
    # the PDF as the curator downloaded it: its pages drawn as images, the verdict on the first
    import pypdfium2 as pdfium
    pdf = pdfium.PdfDocument(next(downloads.glob("*-report.pdf")).read_bytes())
    for index in range(len(pdf)):
        image = pdf[index].render(scale=1).to_pil()
        image.save(SCREENSHOTS / f"9-pdf-page-{index + 1}.png")
        assert np.asarray(image.convert("L"), dtype=float).std() > 5, f"PDF page {index + 1} is blank"
    first_page = " ".join(pdf[0].get_textpage().get_text_range().split())
    assert "Verdict:" in first_page and config_id in first_page
    driver.get(next(downloads.glob("*-report.html")).as_uri())
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")) >= 2, "the report's charts")
    assert "Re-identification risk certificate" in driver.title or driver.find_element(By.TAG_NAME, "h1").text
    driver.save_screenshot(str(SCREENSHOTS / "10-html-report.png"))


class _Listener:
    """An HTTP server on loopback that records every request it receives (a beacon must never be fetched)."""

    def __init__(self):
        import http.server
        import threading

        seen = self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the standard library's name)
                seen.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _requested_urls(driver) -> list[str]:
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_hostile_content_is_shown_as_text_and_fetches_nothing(browser, app_url, sample_paths, tmp_path):
    """A release whose ids, groups and texts carry markdown images, HTML with handlers, scripts and javascript:
    links: walking every page fetches nothing (a loopback listener sees no request), raises no alert, and no
    request of the page leaves 127.0.0.1."""
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    listener = _Listener()
    try:
        frame = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
        frame.loc[0, "doc_id"] = f"![b]({listener.url}/markdown-image.png)"
        frame.loc[1, "doc_id"] = f"<img src={listener.url}/img.png onerror=alert(1)>"
        frame.loc[frame["group"] == "ner_masking", "group"] = f"![g]({listener.url}/group-image.png)"
        frame.loc[2, "text"] = (f"[click](javascript:alert(1)) ![t]({listener.url}/text.png) "
                                f"<script>fetch('{listener.url}/script')</script> " + frame.loc[2, "text"])
        path = tmp_path / "hostile.csv"
        frame.to_csv(path, index=False)

        driver = browser
        driver.get(app_url)
        _wait(driver, _text_present("Conformal Privacy Auditing"), "the home page")
        _wait(driver, _settled, "the home page to settle")
        driver.get_log("performance")  # start counting from here
        _go(driver, "Data", "Upload your own documents")
        driver.find_element(By.XPATH, "//summary[.//p[contains(text(), 'Upload your own documents')]]").click()
        _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, 'input[type="file"]'), "the upload fields")
        driver.find_elements(By.CSS_SELECTOR, 'input[type="file"]')[0].send_keys(str(path))
        _wait(driver, _text_present("columns: doc"), "the uploaded columns")
        _wait(driver, _settled, "the upload to settle")
        driver.find_element(By.XPATH, "//button[.//p[text()='Load these files']]").click()
        _wait(driver, _text_present("New data loaded"), "the hostile release loaded")
        _go(driver, "Calibrate", "Run the attack and calibrate")
        driver.find_element(By.XPATH, "//button[.//p[text()='Run the attack and calibrate']]").click()
        _wait(driver, _text_present("Threshold and coverage per confidence level"), "the calibration results", 180)
        _wait(driver, _settled, "the calibration to settle")
        for title, expect in (("Explore", "Documents at risk"), ("Flagged documents", "Drill-down"),
                              ("Report", "Redaction worklist"), ("Data", "Auditing")):
            _go(driver, title, expect)
            _no_errors(driver)
            try:
                driver.switch_to.alert
                raise AssertionError(f"an alert opened on {title}")
            except NoAlertPresentException:
                pass
        _go(driver, "Flagged documents", "Drill-down")
        assert "group-image.png" in driver.find_element(By.TAG_NAME, "body").text  # the group shown as text
        _screenshot(driver, "9-hostile-content")
        time.sleep(1.0)
        assert listener.requests == [], listener.requests
        outside = [u for u in _requested_urls(driver)
                   if u.split("://", 1)[0] in ("http", "https", "ws", "wss")
                   and u.split("://", 1)[1].split("/", 1)[0].split(":")[0] not in ("127.0.0.1", "localhost")]
        assert outside == [], outside
    finally:
        listener.close()
