"""The help texts and the columns' labels, formats and help: every help key a column or a page names exists,
no text is empty, every number format formats a number."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpa_core.report.help import COLUMNS, HELP, PERCENT, TEXT, column_label, help_texts

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("cpa_core", "cpa_ui", "pages", "app.py")
USE = re.compile(r"""\bHELP\[\s*(['"])([^'"]+)\1\s*\]""")


def test_no_help_text_is_empty():
    assert len(HELP) > 20
    for key, text in HELP.items():
        assert key.strip() == key and key, repr(key)
        assert isinstance(text, str) and text.strip() and text == text.strip(), key
        assert text.endswith((".", ")")), key  # a sentence


def test_every_columns_help_key_exists():
    missing = {column: key for column, (_, _, key) in COLUMNS.items() if key is not None and key not in HELP}
    assert not missing, missing


@pytest.mark.parametrize("column", sorted(COLUMNS))
def test_every_column_has_a_label_and_a_format(column):
    label, number_format, _ = COLUMNS[column]
    assert isinstance(label, str) and label.strip() == label and label
    if number_format not in (PERCENT, TEXT):
        assert re.fullmatch(r"%\.?\d*[dfgs]", number_format), number_format
        assert number_format % 1.5  # formats a number


def test_the_by_hand_formats_of_some_columns():
    assert COLUMNS["coverage"] == ("coverage", PERCENT, "coverage") and PERCENT == "percent" and TEXT is None
    assert COLUMNS["set_size"][1] % 7 == "7" and COLUMNS["q_hat"][1] % 0.123456 == "0.1235"
    assert COLUMNS["median_set_size"][1] % 3.0 == "3" and COLUMNS["mean_set_size"][1] % 2.25 == "2.2"


def test_every_help_key_written_in_the_code_exists():
    used: dict[str, set[str]] = {}
    for source in SOURCES:
        root = REPO / source
        for path in ([root] if root.is_file() else sorted(root.rglob("*.py"))):
            for match in USE.finditer(path.read_text(encoding="utf-8")):
                used.setdefault(match.group(2), set()).add(str(path.relative_to(REPO)))
    assert len(used) > 10, "no use of HELP found: has the dictionary moved?"
    missing = {key: sorted(where) for key, where in used.items() if key not in HELP}
    assert not missing, f"help keys used but not defined: {missing}"
    # the pattern finds what it should, and only that
    assert [m.group(2) for m in USE.finditer('x = HELP["a"] + HELP[ \'b\' ] + XHELP["c"] + HELP[key]')] == ["a", "b"]


RELEASE_KEYS = ("n_test", "n_cal", "coverage", "coverage_conditional", "miss_rate", "min_set", "median_set",
                "mean_set", "mean_leakage", "top1", "top5", "whole_pool_rate", "empty_rate", "q_hat", "at_risk")
"""The help texts the Calibrate and Explore pages and the report show of an audit under the release protocol."""


def test_the_release_protocol_texts_never_speak_of_a_test_split():
    """Under the release protocol every document is certified and the labelled ones calibrate each other: its texts
    say so, and never speak of test documents, a test split or held-out documents (the split protocol's do)."""
    release, split = help_texts("release"), help_texts("split")
    for key in RELEASE_KEYS:
        for wording in ("test document", "test split", "held-out", "test set"):
            assert wording not in release[key].lower(), (key, wording, release[key])
    assert "leave-one-out" in release["coverage"] and "by construction" in release["coverage"]
    assert "every released document" in release["n_test"] and "held-out" in split["n_test"].lower()
    assert "empirical coverage on the held-out test split" in split["coverage"].lower()
    assert help_texts(None) is HELP and set(release) == set(split) == set(HELP)
    # the texts that hold under either protocol say both, never one as if it were the only one
    assert "release protocol" in HELP["n_test"] and "split protocol" in HELP["n_test"]
    assert "release protocol" in HELP["coverage"] and "split protocol" in HELP["coverage"]


def test_column_labels_follow_the_protocol():
    assert column_label("n_test", "release") == "certified" and column_label("n_test", "split") == "n_test"
    assert column_label("n_test") == "audited"  # true under either
    assert column_label("coverage", "release") == COLUMNS["coverage"][0] and column_label("unknown") == "unknown"


EMPTY = re.compile(r"\bempty set|\|C\| = 0|\b0 \(empty", re.I)


@pytest.mark.parametrize("protocol", [None, "release", "split"])
def test_an_empty_set_has_one_meaning_the_highest_risk(protocol):
    """An empty set arises only when the attacker is more certain than the threshold needs: the highest risk. A
    document whose candidates all tie gives no information and gets the whole pool, never an empty set. No text
    gives the empty set the meaning of the tie."""
    texts = help_texts(protocol)
    for key, text in texts.items():
        for sentence in re.split(r"(?<=[.;])\s+", text):
            if EMPTY.search(sentence) and "never an empty set" not in sentence:
                assert "highest risk" in sentence or "more certain" in sentence, (key, sentence)
                assert not re.search(r"no information|uninformative|nothing to go on|ties", sentence), (key, sentence)
    assert "whole pool" in texts["uninformative"] and "never an empty set" in texts["uninformative"]
    assert "highest risk" in texts["empty_rate"] and "highest risk" in texts["set_size"]


def test_the_sample_data_readme_gives_the_empty_set_the_same_meaning():
    text = " ".join((REPO / "sample_data" / "README.md").read_text(encoding="utf-8").split())
    for sentence in re.split(r"(?<=[.;])\s+", text):
        if re.search(r"empty sets?\b", sentence, re.I) and "never an empty set" not in sentence:
            assert not re.search(r"no information|uninformative", sentence, re.I), sentence
