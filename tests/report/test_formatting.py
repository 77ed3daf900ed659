"""How the report and the dashboard present the core's numbers, by hand: percents, confidence levels, numbers,
intervals and coverages; the plain-language summary of a configuration; the set-size bins of the figures; empty
columns left out."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from tables import LEVEL

from cpa_core.attack.registry import get_spec
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.report.formatting import (
    configuration_summary,
    fmt_confidence,
    fmt_coverage,
    fmt_interval,
    fmt_number,
    fmt_percent,
    kept_text,
    percent_from_confidence,
    set_size_bins,
    without_empty,
)

# --- numbers -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, digits, shown", [
    (0.953, 1, "95.3 %"), (0.953, 2, "95.30 %"), (1.0, 1, "100.0 %"), (0, 1, "0.0 %"), (0.00049, 1, "0.0 %"),
    (0.9999, 1, "100.0 %"), (None, 1, "–"), (float("nan"), 1, "–"),
])
def test_percents(value, digits, shown):
    assert fmt_percent(value, digits) == shown


@pytest.mark.parametrize("confidence, shown, percent", [
    (0.95, "95 %", 95.0), (0.9, "90 %", 90.0), (0.999, "99.9 %", 99.9), (0.995, "99.5 %", 99.5), (0.5, "50 %", 50.0),
])
def test_confidence_levels(confidence, shown, percent):
    assert fmt_confidence(confidence) == shown and percent_from_confidence(confidence) == percent


@pytest.mark.parametrize("value, shown", [
    (None, "–"), (math.inf, "∞"), (math.nan, "–"), (3.0, "3"), (1234.0, "1,234"), (1234, "1,234"), (7, "7"),
    (0.12345, "0.123"), (2.5, "2.5"), (0.000123456, "0.000123"),
])
def test_numbers(value, shown):
    assert fmt_number(value) == shown


def test_numbers_with_other_digits_intervals_and_coverage():
    assert fmt_number(0.12345, digits=2) == "0.12" and fmt_number(2.0, digits=1) == "2"
    assert fmt_interval(0.89, 0.931) == "89.0–93.1 %" and fmt_interval(None, 0.9) == "–"
    assert fmt_interval(0.9, None) == "–"
    assert fmt_coverage(0.912, 0.89, 0.931) == "91.2 % (95 % CI 89.0–93.1 %)"
    assert fmt_coverage(0.912, None, None) == "91.2 %" and fmt_coverage(None, 0.1, 0.2) == "–"


# --- the declared configuration in words ---------------------------------------------------------------------

def test_the_configuration_in_words():
    config = AuditConfig(knowledge=LEVEL.__class__("K2", ("city", "occupation")),
                         attacker=AttackerConfig("tfidf", params={"temperature": 0.5}), confidences=(0.9, 0.95, 0.99),
                         flag_below=5)
    text = configuration_summary(config, n_documents=1200, n_profiles=400)
    assert text.startswith("The attacker knows the registry fields 'city' and 'occupation' (knowledge level K2), "
                           "queries with the released text alone, and ")
    assert "it considers the whole registry of the 400 registry profiles. Out of 1,200 documents, every document " \
           "gets a certified set" in text
    assert "Certificates are computed at 90 %, 95 % and 99 % confidence; documents whose certified set has " \
           "fewer than 5 people are flagged, and those whose linkage probability exceeds the acceptable linkage rate " \
           "0.2." in text
    assert "up to 4 strata of its top-1 margin" in text
    assert text.endswith(f"(id {config.config_id}): any change needs a new calibration.")
    assert "infinitely nonconforming (conservative)" in text
    temperature = get_spec("tfidf").param("temperature").label.lower()
    assert f"(TF-IDF retrieval: {temperature} 0.5, vocabulary size default" in text
    split = AuditConfig(knowledge=LEVEL, attacker=AttackerConfig("tfidf"), protocol="split", n_cal=100, seed=4,
                        top_k=20, group_column="group", miss_policy="exclude", confidences=(0.8,))
    text = configuration_summary(split, n_documents=500, n_profiles=50, groups=["a", "b", "c"])
    assert "a shortlist of its top 20 candidates of the 50 registry profiles" in text
    assert "100 documents with known identities calibrate the threshold and the remaining ones test it (split " \
           "seed 4)" in text
    assert "calibrated separately for each group (a, b and c)" in text and "are left out" in text
    assert "computed at 80 % confidence" in text



def test_the_configuration_in_words_states_how_the_dense_attacker_reads_long_texts():
    """The window settings come first after the temperature; a size left to the model is stated as resolved."""
    declared = AuditConfig(knowledge=LEVEL, attacker=AttackerConfig(
        "dense", params={"temperature": 0.05, "window_pooling": "max", "window_tokens": None},
        details={"window_pooling": "max", "window_tokens": 254}))
    text = configuration_summary(declared, n_documents=10, n_profiles=5)
    assert "window pooling max, window size (word pieces) 254)" in text
    first = AuditConfig(knowledge=LEVEL, attacker=AttackerConfig("dense", params={"window_pooling": "first"}))
    assert "window pooling first, window size (word pieces) default)" in configuration_summary(
        first, n_documents=10, n_profiles=5)

# --- figures and tables --------------------------------------------------------------------------------------

def test_columns_without_any_value_are_left_out():
    frame = pd.DataFrame({"level": ["0.9", "0.95"], "q_hat": [None, float("nan")], "note": ["", []],
                          "n": [1, 2]})
    assert list(without_empty(frame).columns) == ["level", "note", "n"]
    assert list(without_empty(frame, ("q_hat", "note", "missing")).columns) == ["level", "n"]
    kept = frame.assign(q_hat=[None, 0.5])
    assert list(without_empty(kept).columns) == ["level", "q_hat", "note", "n"]


def test_bins_are_unit_bins_up_to_past_k_by_hand():
    bins = set_size_bins(np.array([0, 1, 1, 3, 20]), flag_below=2)
    assert list(bins["upper"]) == list(range(21)) and list(bins["lower"]) == list(range(21))
    assert bins["count"].tolist()[:4] == [1, 2, 0, 1] and bins["count"].iloc[20] == 1 and bins["count"].sum() == 5
    assert bins["cumulative"].iloc[0] == pytest.approx(0.2) and bins["cumulative"].iloc[3] == pytest.approx(0.8)
    assert bins["label"].iloc[3] == "3"


@pytest.mark.parametrize("top,k", [(400, 11), (10_000, 30), (5, 11), (0, 1)])
def test_bins_cover_every_size_exactly_once(top, k):
    sizes = np.random.default_rng(top).integers(0, top + 1, 3000)
    bins = set_size_bins(sizes, k)
    assert len(bins) <= 41
    assert bins["lower"].iloc[0] == 0 and bins["upper"].iloc[-1] == sizes.max()
    assert (bins["lower"].iloc[1:].to_numpy() == bins["upper"].iloc[:-1].to_numpy() + 1).all()
    expected = [int(((sizes >= lo) & (sizes <= hi)).sum()) for lo, hi in zip(bins["lower"], bins["upper"])]
    assert bins["count"].tolist() == expected
    # every size below k has a bin of its own, so the flag line falls between bins
    assert (bins["lower"] == bins["upper"])[bins["upper"] <= min(k, sizes.max())].all()
    assert bins["cumulative"].iloc[-1] == pytest.approx(1.0)


def test_bins_of_no_documents():
    bins = set_size_bins(np.array([], dtype=int), 11)
    assert bins["count"].sum() == 0 and len(bins) == 1


def test_counts_agree_with_their_nouns_and_ranks_read_as_ordinals():
    from cpa_core.report.formatting import counted, ordinal

    assert counted(1, "document") == "1 document" and counted(2, "document") == "2 documents"
    assert counted(0, "document") == "0 documents" and counted(1_500, "set") == "1,500 sets"
    assert counted(1, "stratum", "strata") == "1 stratum" and counted(3, "stratum", "strata") == "3 strata"
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111, 257, 1_000)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th", "257th", "1,000th"]


def test_what_a_redacted_release_keeps_in_one_sentence():
    kept = {"documents": 1000, "documents_kept": 90, "edited": 43, "characters": 500_000, "characters_kept": 42_000,
            "characters_kept_share": 0.084, "meaning_edited_mean": 0.96, "meaning_lowest": 0.7591}
    assert kept_text(kept) == ("90 of 1,000 documents kept (43 edited), 42,000 of 500,000 characters (8.4 %); meaning "
                               "kept in the edited texts 0.960 on average, 0.759 at the lowest (cosine of the packaged "
                               "model's embeddings, 1 = unchanged)")
    unscored = {**kept, "edited": 0, "meaning_edited_mean": None, "meaning_lowest": None}
    assert kept_text(unscored) == "90 of 1,000 documents kept (0 edited), 42,000 of 500,000 characters (8.4 %)"
