"""The help texts and the columns' labels, formats and help: every help key a column or a page names exists,
no text is empty, every number format formats a number."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpa_core.report.help import COLUMNS, HELP, PERCENT, TEXT

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
