"""One flag rule everywhere: the set-size histogram colours red exactly the documents the KPIs and the verdict count
as flagged (by set size or by linkage probability), under a title that states that rule; the verdict's counts in
words; what a stale-results notice says differs."""

from __future__ import annotations

from dataclasses import replace
from html import unescape
from types import SimpleNamespace

import numpy as np
import pytest
from tables import small_audit

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.report.formatting import FLAGGED_COLOR, SAFE_COLOR, set_size_bins
from cpa_core.report.html import svg_set_size_histogram
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import release_verdict
from cpa_ui.components import stale_message, verdict_counts
from cpa_ui.figures import fig_set_size_histogram

CONFIDENCE = 0.9
POLICY = ReleasePolicy(flag_below=5, acceptable_linkage=0.5)  # its linkage flags documents whose set has k or more


def red_documents(fig) -> int:
    """The documents a figure draws in red, whether a trace is red as a whole or bar by bar."""
    total = 0
    for trace in fig.data:
        if trace.type != "bar":
            continue
        colours = trace.marker.color
        colours = [colours] * len(trace.y) if isinstance(colours, str) else list(colours)
        total += sum(int(y) for y, colour in zip(trace.y, colours) if colour == FLAGGED_COLOR)
    return total


@pytest.fixture(scope="module")
def audited():
    result = small_audit(1)
    cert = result.certificate(CONFIDENCE)
    summary = summarize(result, [CONFIDENCE], POLICY)
    return result, cert, summary


def test_the_histogram_colours_red_exactly_the_documents_the_kpis_count_as_flagged(audited):
    _, cert, summary = audited
    flagged = cert.flags(POLICY)
    assert (flagged & (cert.set_sizes >= POLICY.flag_below)).any()  # some flagged by linkage right of the k line
    n_flagged = summary.level(CONFIDENCE).n_flagged
    fig = fig_set_size_histogram(cert.set_sizes, POLICY.flag_below, flagged=flagged, rule=POLICY.rule)
    assert red_documents(fig) == n_flagged == int(flagged.sum())
    assert red_documents(fig) == release_verdict(summary, CONFIDENCE).n_flagged
    assert sum(sum(t.y) for t in fig.data if t.type == "bar") == len(cert.set_sizes)
    # bin by bin: the red bar holds the bin's flagged documents, the blue one stacked on it the others
    red, blue = (t for t in fig.data if t.type == "bar")
    bins = set_size_bins(cert.set_sizes, POLICY.flag_below)
    where = np.searchsorted(bins["upper"].to_numpy(), cert.set_sizes)
    assert list(red.y) == [int(flagged[where == i].sum()) for i in range(len(bins))]
    assert list(blue.y) == [int((~flagged[where == i]).sum()) for i in range(len(bins))]
    assert list(blue.base) == list(red.y) and blue.marker.color == SAFE_COLOR
    # the figure says what red is: the policy's rule, not "|C| < k" alone
    assert f"red: flagged, {POLICY.rule}" in fig.layout.xaxis.title.text
    assert fig.layout.annotations[0].text == f"k = {POLICY.flag_below} · flagged: {n_flagged:,} documents"


def test_without_the_flags_the_histogram_says_red_is_the_sets_smaller_than_k():
    fig = fig_set_size_histogram(np.array([0, 1, 7, 30]), 5)
    assert red_documents(fig) == 2 and "red: |C| < k = 5" in fig.layout.xaxis.title.text
    assert "flagged" not in fig.layout.xaxis.title.text


def test_two_releases_each_count_their_own_flagged_documents_in_red():
    before, after = np.array([0, 1, 1, 3, 20, 50]), np.array([3, 12, 20, 50])
    flags = {"before": np.array([1, 1, 1, 1, 1, 0], bool), "after redaction": np.array([1, 0, 1, 0], bool)}
    fig = fig_set_size_histogram({"before": before, "after redaction": after}, 4, flagged=flags, rule="|C| < 4 or x")
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["flagged (before): 5", "not flagged (before): 1",
                                      "flagged (after redaction): 2", "not flagged (after redaction): 2"]
    assert [sum(t.y) for t in bars] == [5, 1, 2, 2] and red_documents(fig) == 7
    assert bars[0].offsetgroup == bars[1].offsetgroup != bars[2].offsetgroup == bars[3].offsetgroup
    assert "red: flagged, |C| < 4 or x" in fig.layout.xaxis.title.text and not fig.layout.shapes[1:]


def test_the_report_s_static_histogram_draws_the_flagged_documents_in_red(audited):
    _, cert, _ = audited
    flagged = cert.flags(POLICY)
    svg = svg_set_size_histogram(cert.set_sizes, POLICY.flag_below, "Certified set sizes", flagged, POLICY.rule)
    bins = set_size_bins(cert.set_sizes, POLICY.flag_below)
    right_of_k = bins["upper"].to_numpy() >= POLICY.flag_below
    where = np.searchsorted(bins["upper"].to_numpy(), cert.set_sizes)
    flagged_right = sum(bool(flagged[where == i].any()) for i in np.flatnonzero(right_of_k))
    assert flagged_right  # bins right of k with documents flagged by linkage: red there too
    assert svg.count(f'fill="{FLAGGED_COLOR}"/>') == sum(bool(flagged[where == i].any()) for i in range(len(bins)))
    assert f"red: flagged, {POLICY.rule}" in unescape(svg)


def test_the_verdict_s_counts_say_flagged_n_of_n_and_every_set_that_certifies_nothing(audited):
    _, _, summary = audited
    metrics = summary.level(CONFIDENCE)
    verdict = release_verdict(summary, CONFIDENCE)
    said = verdict_counts(verdict, metrics)
    assert said.startswith(f"Flagged: {verdict.n_flagged:,} of {verdict.n_documents:,} documents "
                           f"({verdict.n_flagged_by_set:,} by set size, {verdict.n_flagged_by_linkage:,} by linkage "
                           f"probability; flagged when {POLICY.rule})")
    assert f"left to release: {verdict.n_documents - verdict.n_flagged:,}" in said
    whole = round(metrics.whole_pool_rate * metrics.n_test)
    assert ("no set is the whole candidate pool" in said) == (whole == 0)
    vacuous = replace(metrics, whole_pool_rate=0.25)
    assert f"they certify nothing, no evidence of safety): {round(0.25 * metrics.n_test):,}" in \
        verdict_counts(verdict, vacuous)


# --- what a stale-results notice says ---------------------------------------------------------------------------

def _run(fingerprint: str, config_id: str, file: str = "out/documents-redacted.csv"):
    return SimpleNamespace(data_fingerprint=fingerprint, config_id=config_id,
                           label="K2 · tfidf · rank · redacted from audit 3",
                           result=SimpleNamespace(inputs={"documents": {"file": file, "rows": 990}}))


def _data(fingerprint: str, file: str = "sample_data/documents.csv"):
    return SimpleNamespace(fingerprint=fingerprint, documents=SimpleNamespace(file=file))


def test_results_of_the_loaded_documents_under_the_declared_configuration_need_no_notice():
    assert stale_message(_run("f0", "d29b4a8f8d1c"), _data("f0"), "d29b4a8f8d1c") is None


def test_results_of_another_release_under_the_same_configuration_name_the_release_and_one_id():
    said = stale_message(_run("f1", "d29b4a8f8d1c"), _data("f0"), "d29b4a8f8d1c")
    assert said == ("These results are of the release documents-redacted.csv (K2 · tfidf · rank · redacted from audit "
                    "3), not of documents.csv, the documents loaded on the Data page. The declared configuration is "
                    "the same (d29b4a8f8d1c).")
    assert said.count("d29b4a8f8d1c") == 1 and "not calibrated" not in said
    same_name = stale_message(_run("f1", "d29b4a8f8d1c", "documents.csv"), _data("f0"), "d29b4a8f8d1c")
    assert same_name.startswith("These results are of another version of documents.csv (")


def test_results_of_another_configuration_name_both_ids():
    said = stale_message(_run("f0", "aaaaaaaaaaaa"), _data("f0"), "bbbbbbbbbbbb")
    assert said == ("These results are for configuration aaaaaaaaaaaa (K2 · tfidf · rank · redacted from audit 3). The "
                    "threat model declared now (configuration bbbbbbbbbbbb) has not been calibrated yet.")
    both = stale_message(_run("f1", "aaaaaaaaaaaa"), _data("f0"), "bbbbbbbbbbbb")
    assert "the release documents-redacted.csv under configuration aaaaaaaaaaaa" in both
    assert ("The Data page holds documents.csv, and the threat model declared now (configuration bbbbbbbbbbbb) has not "
            "been calibrated on it yet.") in both
