"""The project's exception tree: every error the tool reports to its user is one of these.

::

    CPAError                 root: the CLI and the dashboard catch it and show its one-line message
    ├── ConfigError          the declared configuration is invalid or inconsistent with the data
    │   └── HistoryError     the audit history (or a snapshot in it) cannot be used as asked
    ├── DataError            an input file cannot be used as given (names file, row, column, expected, found)
    ├── OutputError          an output folder cannot be written as asked, or one read back is not complete
    └── LLMError             an LLM call failed for good (names the endpoint, the status and what to check)
        └── LLMBudgetError   a run would exceed the configured call budget (raised before any call)

Any other exception is a bug. Conditions that are not errors (a calibration set too small for a
confidence level, an infinite threshold) are notes carried by the results (``Calibration.notes_``),
never Python warnings.
"""

from __future__ import annotations


class CPAError(Exception):
    """Root of every error the tool reports to its user."""


class ConfigError(CPAError):
    """The declared configuration is invalid or inconsistent with the data."""


class HistoryError(ConfigError):
    """The audit history or one of its snapshots cannot be used as asked.

    The message names the file, what was expected and what was found (an unknown audit id, a file that is
    not an audit history, a folder, an unwritable location, a snapshot that changed since it was written).
    """


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


class LLMError(CPAError):
    """An LLM call failed for good (the message names the endpoint, the status and what to check)."""


class LLMBudgetError(LLMError):
    """A run would make more LLM calls than the configured budget allows (raised before any call)."""


class OutputError(CPAError):
    """An output folder cannot be written as asked (another run holds it, it holds files no cpa run wrote, an
    input of the run, or the disk is full), or a folder read back is not a complete cpa output.

    The message names the folder or the file, and says that a folder being replaced is left as it was.
    """
