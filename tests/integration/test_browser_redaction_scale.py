"""The redaction flow of a release of 5,000 documents, in a real browser: the search, a tick, a word put on the deny
list (its rows rejected at once, no new search), a new search that keeps every earlier decision, the redacted
release audited and made the current audit, and its PDF certificate naming the audit it was made from and what the
decisions did. Skipped when Chromium or its driver is missing."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from browser import (
    calibrate,
    chromium,
    click,
    dashboard,
    download as save,
    downloads_into,
    go,
    metric_value,
    missing,
    no_errors,
    screenshot,
    settled,
    text_present,
    tick,
    upload,
    wait,
)

from cpa_core.io.synthetic import generate_sample_data

N_DOCUMENTS = 5_000
SLOW_S = 900  # a search or an audit of 5,000 documents on a loaded 2-core machine: a wait, not a measurement


@pytest.fixture(scope="module")
def driver():
    reason = missing()
    if reason:
        pytest.skip(reason)
    with dashboard() as url, chromium() as browser:
        browser.get(url)
        wait(browser, text_present("Conformal Privacy Auditing"), "the home page")
        yield browser


def released_rows(decisions: pd.DataFrame) -> pd.DataFrame:
    """The rows of a decisions table the review table lists first: all but the edits of documents withheld."""
    withheld = set(decisions.loc[(decisions["action"] == "withhold") & decisions["accept"], "doc_id"])
    return decisions[~((decisions["action"] == "edit") & decisions["doc_id"].isin(withheld))]


def key(row) -> tuple:
    return (row["doc_id"], row["action"], row["offset"], row["length"])


def test_a_release_of_5000_documents_is_redacted_reviewed_and_certified_in_a_real_browser(driver, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys


    paths = generate_sample_data(tmp_path / "release", seed=7, n_people=1_500, n_documents=N_DOCUMENTS)
    upload(driver, [paths["documents"], paths["registry"]])
    calibrate(driver, timeout=SLOW_S)
    downloads = downloads_into(driver, "downloads-redaction-scale")

    def download(label: str, pattern: str, timeout: float = 300):
        return save(driver, downloads, label, pattern, timeout)

    def decisions() -> pd.DataFrame:
        return pd.read_csv(download("Download the decisions (CSV)", "decisions*.csv"), keep_default_na=False)

    def search() -> None:
        click(driver, "//button[.//p[text()='Suggest redactions for the flagged documents']]", "the suggest button")
        wait(driver, lambda d: metric_value(d, "Flagged documents searched") is not None and settled(d)
             and not d.find_elements(By.XPATH, "//button[.//p[text()='Stop']]"), "the search", SLOW_S)

    go(driver, "Redact & re-audit", "Suggest redactions for the flagged documents")
    search()
    no_errors(driver)
    searched = metric_value(driver, "Flagged documents searched")
    first = decisions()
    assert len(first) > 1_000 and first["accept"].all()  # every proposed row accepted to start with
    # a tick: the first row the table shows, rejected
    ticked = key(released_rows(first).iloc[0])
    tick(driver, 0)
    after_tick = decisions()
    assert [key(r) for _, r in after_tick[~after_tick["accept"]].iterrows()] == [ticked]
    # a word on the deny list: every row of its term rejected at once, and no new search
    edits = released_rows(first)
    edits = edits[(edits["action"] == "edit") & (edits["doc_id"] != ticked[0])]
    word = edits["term"].value_counts().index[0]
    box = driver.find_element(By.XPATH, "//div[@data-testid='stTextInput'][.//p[contains(text(), 'Never redact')]]"
                                        "//input")
    box.click()
    box.send_keys(word)
    box.send_keys(Keys.ENTER)
    wait(driver, text_present("applied to the table's rows"), "the deny list applied")
    wait(driver, settled, "the deny list to settle")
    assert metric_value(driver, "Flagged documents searched") == searched
    assert driver.find_elements(By.XPATH, "//button[.//p[text()='Suggest redactions for the flagged documents']]")
    denied = decisions()
    of_word = (denied["action"] == "edit") & (denied["term"].str.casefold() == word.casefold())
    assert of_word.sum() >= 2 and not denied.loc[of_word, "accept"].any()
    assert denied[["doc_id", "action", "offset", "original"]].equals(first[["doc_id", "action", "offset", "original"]])
    assert set(map(key, (r for _, r in denied[~denied["accept"]].iterrows()))) == \
        {ticked} | set(map(key, (r for _, r in denied[of_word].iterrows())))
    screenshot(driver, "6-redact-review-5000")
    # a new search (the deny list now shapes it too): the tick is kept, the word is nowhere accepted
    search()
    no_errors(driver)
    again = decisions()
    rows = {key(r): bool(r["accept"]) for _, r in again.iterrows()}
    assert rows.get(ticked) is False
    of_word = (again["action"] == "edit") & (again["term"].str.casefold() == word.casefold())
    assert not again.loc[of_word, "accept"].any()
    withheld = set(again.loc[(again["action"] == "withhold") & again["accept"], "doc_id"])
    kept = again[(again["action"] == "edit") & again["accept"] & ~again["doc_id"].isin(withheld)
                 & (again["original"] != again["replacement"])]
    # the redacted release, audited and made the current audit; its PDF names where it comes from
    click(driver, "//button[.//p[text()='Audit the redacted release']]", "the re-audit button")
    wait(driver, text_present("Flagged after (recalibrated)"), "the re-audit", SLOW_S)
    wait(driver, settled, "the re-audit to settle")
    click(driver, "//button[.//p[text()='Make it the current audit']]", "make it current")
    wait(driver, text_present("The redacted release's audit is the current audit"), "the current audit")
    no_errors(driver)
    go(driver, "Report & export", "Before and after redaction")
    pdf = download("Certificate report (PDF)", "*-report.pdf", SLOW_S)
    import pypdfium2 as pdfium
    document = pdfium.PdfDocument(io.BytesIO(pdf.read_bytes()))
    text = " ".join(" ".join(document[i].get_textpage().get_text_range().split()) for i in range(len(document)))
    assert "A redacted release" in text and "documents.csv (5,000 documents)" in text
    assert (f"{len(withheld):,} documents withheld, {kept['doc_id'].nunique():,} edited by {len(kept):,} edits"
            in text)
    assert f"{N_DOCUMENTS - len(withheld) - kept['doc_id'].nunique():,} released untouched" in text
    assert "documents-redacted.csv" in text  # the sign-off names both files
    screenshot(driver, "8-report-redacted-5000")
