"""The exception tree and the one-line message of a data error (file, row, column, expected, found)."""

from __future__ import annotations

import pytest

from cpa_core.common.errors import ConfigError, CPAError, DataError, HistoryError, LLMBudgetError, LLMError


def test_errors_are_cpa_errors_not_config_errors():
    assert issubclass(DataError, CPAError) and not issubclass(DataError, ConfigError)


def test_the_tree_of_errors():
    assert issubclass(ConfigError, CPAError) and issubclass(HistoryError, ConfigError)
    assert issubclass(LLMError, CPAError) and issubclass(LLMBudgetError, LLMError)
    assert not issubclass(LLMError, ConfigError) and not issubclass(HistoryError, DataError)
    assert not issubclass(CPAError, (ValueError, OSError))  # a bug never passes for a reported error, nor back


def test_a_data_error_names_every_part_in_one_line():
    error = DataError("docs.csv", "invalid document text", column="text", row=3, expected="non-empty text",
                      found="an empty string")
    assert str(error) == ("docs.csv, row 3, column 'text': invalid document text; expected non-empty text, found an "
                          "empty string")
    assert (error.file, error.problem, error.row, error.column) == ("docs.csv", "invalid document text", 3, "text")
    assert (error.expected, error.found) == ("non-empty text", "an empty string")
    assert "\n" not in str(error)


@pytest.mark.parametrize("parts, message", [
    ({}, "d.csv: file not found"),
    ({"row": 7}, "d.csv, row 7: file not found"),
    ({"column": "doc_id"}, "d.csv, column 'doc_id': file not found"),
    ({"expected": "a file"}, "d.csv: file not found; expected a file"),
    ({"found": "a folder"}, "d.csv: file not found, found a folder"),
    ({"row": 0, "column": "x"}, "d.csv, row 0, column 'x': file not found"),  # row 0 is a row, not a missing one
])
def test_a_data_error_says_only_the_parts_it_was_given(parts, message):
    error = DataError("d.csv", "file not found", **parts)
    assert str(error) == message
    assert error.row == parts.get("row") and error.column == parts.get("column")


def test_a_data_error_is_caught_as_a_cpa_error():
    with pytest.raises(CPAError, match=r"^r\.csv, row 2, column 'identity_id': duplicate id 'A'$"):
        raise DataError("r.csv", "duplicate id 'A'", row=2, column="identity_id")
