"""What a ``cpa`` run should look like, checked on its :class:`~conftest.CliResult` (in a process or in this one):
success, or a one-line error; the files an audit writes."""

from __future__ import annotations

from conftest import CliResult

OUTPUT_FILES = ("summary.json", "documents.jsonl", "worklist.csv", "worklist.json", "manifest.json")
"""Files every ``cpa audit`` run writes to its folder."""


def ok(result: CliResult) -> CliResult:
    """Exit status 0 and no traceback."""
    assert result.returncode == 0, result.describe()
    assert "Traceback" not in result.output, result.describe()
    return result


def assert_one_line_error(result: CliResult, *fragments: str) -> str:
    """Exit status 2 and exactly one line on stderr, ``cpa: error: ...``, with no traceback."""
    assert result.returncode == 2, result.describe()
    assert "Traceback" not in result.output, result.describe()
    lines = result.stderr_lines
    assert len(lines) == 1, f"expected one line on stderr:\n{result.describe()}"
    assert lines[0].startswith("cpa: error:"), result.describe()
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]
