"""The project's exception tree.

``CPAError`` is the root: the CLI and the dashboard catch it and show its message; any other
exception is a bug. ``DataError`` is raised while reading or validating an input file,
``ConfigError`` for an inconsistent declared configuration. ``CalibrationWarning`` is a warning,
not an error: a calibration set too small for a confidence level yields an infinite threshold.
"""

from __future__ import annotations


class CPAError(Exception):
    """Root of every error the tool reports to its user."""


class ConfigError(CPAError):
    """The declared configuration is invalid or inconsistent with the data."""


class DataError(CPAError):
    """An input file cannot be used as given.

    The message names the file, the column and/or row, what was expected and what was found.
    """

    def __init__(self, file: str, problem: str, *, column: str | None = None,
                 row: int | None = None, expected: str | None = None, found: str | None = None):
        self.file, self.problem, self.column, self.row = file, problem, column, row
        self.expected, self.found = expected, found
        where = [f"{file}"]
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column '{column}'")
        message = f"{', '.join(where)}: {problem}"
        if expected is not None:
            message += f"; expected {expected}"
        if found is not None:
            message += f", found {found}"
        super().__init__(message)


class CalibrationWarning(UserWarning):
    """The calibration set is too small for a confidence level: the threshold is infinite."""
