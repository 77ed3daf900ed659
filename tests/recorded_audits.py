"""Two small audits recorded in a test's audit history, as fixtures shared by the history's tests and the ``cpa
history`` command's: import ``audits_fixture``, ``history_fixture`` and ``recorded_fixture`` (``# noqa: F401``)
and ask for ``audits``, ``history`` and ``recorded``; and :func:`damage`, which damages a history file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tables import small_audit

from cpa_core.store.history import record_audit


@pytest.fixture(scope="module", name="audits")
def audits_fixture():
    """Two small audits (release protocol, 120 documents): the second flags below 6 instead of 5; an acceptable
    linkage rate of 0.7 leaves the set sizes to decide most flags."""
    return small_audit(1, acceptable_linkage=0.7), small_audit(2, flag_below=6, acceptable_linkage=0.7)


@pytest.fixture(name="history")
def history_fixture(tmp_path):
    """A history file of the test (not created)."""
    return tmp_path / "cpa" / "history.sqlite"


@pytest.fixture(name="recorded")
def recorded_fixture(audits, history, tmp_path):
    """The ids of the two audits recorded in ``history``: the first by the command line, the second by the dashboard."""
    first, second = audits
    return (record_audit(first, source="cli", out_dir=tmp_path / "out", path=history),
            record_audit(second, source="dashboard", path=history))


def damage(history: Path) -> None:
    """Overwrite the first bytes of the set sizes' root page: the file opens and its audits list, but SQLite's
    quick_check fails, and so does reading an audit's set sizes."""
    with sqlite3.connect(history) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = connection.execute("PRAGMA page_size").fetchone()[0]
        root = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'set_sizes'").fetchone()[0]
    with open(history, "r+b") as handle:
        handle.seek((root - 1) * page)
        handle.write(b"\xff" * 16)
