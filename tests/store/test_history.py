"""The audit history: recording, listing, comparing and reopening audits; concurrency, crashes and bad files (a
reopened audit is the same audit: tests/store/test_snapshot.py; the ``cpa history`` command line:
tests/cli/test_history_command.py, and with audits recorded by ``cpa`` processes: tests/integration/test_history_cli.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from audit_files import as_json
from recorded_audits import audits_fixture, history_fixture, recorded_fixture  # noqa: F401 (the fixtures)
from tables import SECRET_TEXT

from cpa_core.common.errors import HistoryError
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import summary_document
from cpa_core.report.worklist import worklist
from cpa_core.store.history import (
    ENV_VAR,
    HistoryEntry,
    compare_audits,
    history_path,
    list_audits,
    load_audit,
    load_result,
    record_audit,
    snapshot_folder,
)


def worklist_ids(result) -> list[str]:
    config = result.config
    return worklist(result.certificate(config.policy_confidence), config.policy, config.config_id)["doc_id"].tolist()


# --- location ---------------------------------------------------------------------------------------------------

def test_the_location_is_the_environment_variable_else_the_user_data_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "h.sqlite"))
    assert history_path() == tmp_path / "h.sqlite"
    for unset in (" ", ""):
        monkeypatch.setenv(ENV_VAR, unset)
        assert history_path() == Path.home() / ".local/share/cpa/history.sqlite"
    monkeypatch.delenv(ENV_VAR)
    assert history_path() == Path.home() / ".local/share/cpa/history.sqlite"


def test_the_test_suite_never_writes_the_users_history(audit_history):
    assert history_path() == audit_history != Path.home() / ".local/share/cpa/history.sqlite"


# --- record, list, show ---------------------------------------------------------------------------------------

def test_two_recorded_audits_are_listed_oldest_first(recorded, audits, history, tmp_path):
    frame = list_audits(history)
    assert frame["id"].tolist() == list(recorded)
    assert frame["source"].tolist() == ["cli", "dashboard"]
    assert frame["config_id"].tolist() == [a.config.config_id for a in audits]
    for row, result in zip(frame.itertuples(), audits):
        level = summarize(result).level(result.config.policy_confidence)
        assert row.n_flagged == level.n_flagged == len(worklist_ids(result))
        assert row.median_set_size == level.median_set_size
        assert row.documents_sha256 == "0" * 12 and row.knowledge == "toy" and row.attacker == "toy"
    assert frame["out_dir"].tolist()[0] == str((tmp_path / "out").resolve())


def test_an_entry_holds_the_configuration_checksums_summary_set_sizes_and_worklist(recorded, audits, history):
    entry = load_audit(recorded[0], history)
    result = audits[0]
    assert isinstance(entry, HistoryEntry) and entry.id == recorded[0] and entry.source == "cli"
    assert entry.config_id == result.config.config_id
    assert entry.config == as_json(result.config.to_dict())
    assert entry.checksums["documents"]["sha256"] == result.inputs["documents"]["sha256"]
    assert entry.checksums["registry"]["rows"] == 20
    assert entry.summary == as_json(summary_document(result)) and entry.summary["verdict"]["config_id"] == entry.config_id
    assert entry.flag_confidence == "0.8" and entry.levels == ["0.8", "0.9"]
    for label in entry.levels:
        sizes = result.certificate(float(label)).set_sizes
        assert entry.set_sizes_at(label).tolist() == sizes.tolist()
        assert list(entry.set_sizes[label]) == [f"d{i}" for i in range(120)]
    assert set(entry.flagged) == set(worklist_ids(result))
    sizes = entry.set_sizes[entry.flag_confidence]
    assert list(entry.flagged) == sorted(entry.flagged, key=lambda doc: (sizes[doc], doc))  # smallest set first
    assert entry.versions["cpa-core"] and entry.created_at.endswith("+00:00")
    assert json.loads(json.dumps(entry.to_dict()))["flagged"] == list(entry.flagged)


def test_the_history_holds_ids_and_figures_never_document_text(recorded, history):
    with sqlite3.connect(history) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = b"".join(path.read_bytes() for path in history.parent.glob("history.sqlite*"))
    assert SECRET_TEXT.encode() not in stored
    assert b"d17" in stored  # ids are there


def test_history_files_are_owner_only(recorded, history):
    folder = history.parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    snapshots = snapshot_folder(history)
    assert stat.S_IMODE(snapshots.stat().st_mode) == 0o700
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert len([p for p in files if p.suffix == ".npz"]) == 2
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


# --- compare ------------------------------------------------------------------------------------------------

def test_comparing_two_recorded_audits(recorded, audits, history):
    a, b = (load_audit(i, history) for i in recorded)
    comparison = compare_audits(a, b)
    before, after = worklist_ids(audits[0]), worklist_ids(audits[1])
    assert set(comparison.flagged_added) == set(after) - set(before) != set()
    assert set(comparison.flagged_removed) == set(before) - set(after) != set()
    assert set(comparison.flagged_kept) == set(before) & set(after)
    levels = comparison.to_frame()
    assert levels["confidence"].tolist() == [0.8, 0.9]
    for suffix, result in (("a", audits[0]), ("b", audits[1])):
        for row in levels.itertuples():
            figures = summarize(result).level(row.confidence)
            assert getattr(row, f"coverage_{suffix}") == figures.coverage
            assert getattr(row, f"median_set_size_{suffix}") == figures.median_set_size
            assert getattr(row, f"n_flagged_{suffix}") == figures.n_flagged
    sizes = comparison.set_sizes[comparison.set_sizes["confidence"] == 0.9]
    assert sizes["set_size_a"].tolist() == audits[0].certificate(0.9).set_sizes.tolist()
    assert sizes["set_size_b"].tolist() == audits[1].certificate(0.9).set_sizes.tolist()
    changes = comparison.changes_frame().set_index("confidence")
    assert changes.loc[0.9, "n_documents"] == 120 == changes.loc[0.9, ["smaller_in_b", "unchanged", "larger_in_b"]].sum()
    out = comparison.to_dict()
    assert json.loads(json.dumps(out)) == out
    assert out["set_sizes"]["0.9"]["d3"] == sizes[sizes["doc_id"] == "d3"][["set_size_a", "set_size_b"]].iloc[0].tolist()


def hand_made(audit_id: int, sizes: dict[str, int], flagged: tuple, levels=("0.9",)) -> HistoryEntry:
    summary = {"policy": {"flag_below": 3, "leakage_threshold": None},
               "confidence": {label: {"coverage": 0.9, "median_set_size": 2.0, "n_flagged": len(flagged)}
                              for label in levels}}
    return HistoryEntry(audit_id, "2026-01-01T00:00:00+00:00", "cli", "c", {}, {}, summary, "0.9",
                        {label: dict(sizes) for label in levels}, flagged, None, {}, None, None)


def test_comparison_by_hand():
    a = hand_made(1, {"d1": 1, "d2": 2, "d3": 5, "d4": 9}, ("d1", "d2"))
    b = hand_made(2, {"d2": 1, "d3": 2, "d4": 9, "d5": 0}, ("d5", "d2", "d3"), levels=("0.9", "0.95"))
    comparison = compare_audits(a, b)
    assert comparison.flagged_added == ("d5", "d3")
    assert comparison.flagged_removed == ("d1",)
    assert comparison.flagged_kept == ("d2",)
    assert comparison.set_sizes.values.tolist() == [[0.9, "d2", 2, 1], [0.9, "d3", 5, 2], [0.9, "d4", 9, 9]]
    levels = comparison.to_frame()
    assert levels["confidence"].tolist() == [0.9, 0.95]
    assert levels["n_flagged_a"].isna().tolist() == [False, True]  # A did not certify 0.95
    assert comparison.changes_frame().values.tolist() == [[0.9, 3, 2, 1, 0]]
    assert comparison.flagged_frame().values.tolist() == [["d5", "added"], ["d3", "added"], ["d1", "removed"],
                                                         ["d2", "kept"]]
    assert comparison.to_dict()["levels"][1]["coverage_a"] is None


def test_a_comparison_of_two_releases_says_so_and_names_a_redaction():
    from dataclasses import replace

    from cpa_core.store.history import release_difference

    files = {"documents": {"sha256": "a" * 64}, "registry": {"sha256": "b" * 64}}
    a = replace(hand_made(1, {"d1": 1}, ()), checksums=files)
    same = replace(hand_made(2, {"d1": 1}, ()), checksums=files)
    other = replace(same, checksums={**files, "documents": {"sha256": "c" * 64}})
    assert release_difference(a, same) is None  # one release under two configurations
    said = release_difference(a, other)
    assert "certify different data" in said and "documents (aaaaaaaaaaaa in audit 1, cccccccccccc in audit 2)" in said
    redacted = replace(other, summary={**other.summary, "redaction": {"from_audit": 1}})
    assert release_difference(a, redacted).startswith("Audit 2 certifies the release redacted from audit 1")
    assert release_difference(redacted, a).startswith("Audit 2 certifies the release redacted from audit 1")


# --- reopen -------------------------------------------------------------------------------------------------


def test_a_changed_or_missing_snapshot_is_said_and_the_entry_stays_readable(recorded, history):
    entry = load_audit(recorded[0], history)
    snapshot = entry.snapshot
    data = bytearray(Path(snapshot).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(snapshot).write_bytes(data)
    with pytest.raises(HistoryError, match="changed since it was recorded") as error:
        load_result(recorded[0], history)
    assert snapshot in str(error.value)
    os.unlink(snapshot)
    with pytest.raises(HistoryError, match="not found"):
        load_result(recorded[0], history)
    assert load_audit(recorded[0], history).summary == entry.summary
    assert load_result(recorded[1], history).config.config_id == load_audit(recorded[1], history).config_id


# --- bad input ----------------------------------------------------------------------------------------------

def test_an_unknown_id_names_the_file_and_the_known_ids(recorded, history):
    with pytest.raises(HistoryError) as error:
        load_audit(99, history)
    assert str(history) in str(error.value) and "no audit 99" in str(error.value) and "1 to 2" in str(error.value)


def test_an_absent_history_has_no_audits(tmp_path):
    assert list_audits(tmp_path / "none.sqlite").empty
    with pytest.raises(HistoryError, match="no audit 1"):
        load_audit(1, tmp_path / "none.sqlite")
    assert not (tmp_path / "none.sqlite").exists()  # reading creates nothing


def test_a_folder_is_not_a_history(tmp_path, audits):
    for call in (lambda: list_audits(tmp_path), lambda: record_audit(audits[0], source="cli", path=tmp_path)):
        with pytest.raises(HistoryError, match="is a folder; expected the path of a file") as error:
            call()
        assert str(tmp_path) in str(error.value)


def test_a_file_that_is_not_sqlite_is_refused(tmp_path, audits):
    bad = tmp_path / "notes.sqlite"
    bad.write_bytes(b"these are not the bytes of a database\n" * 100)
    for call in (lambda: list_audits(bad), lambda: load_audit(1, bad),
                 lambda: record_audit(audits[0], source="cli", path=bad)):
        with pytest.raises(HistoryError, match="not an SQLite database") as error:
            call()
        assert str(bad) in str(error.value) and "expected an audit history file" in str(error.value)
    assert bad.read_bytes().startswith(b"these are not")  # left as it was


def test_another_sqlite_database_is_refused(tmp_path, audits):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")
    for call in (lambda: list_audits(other), lambda: record_audit(audits[0], source="cli", path=other)):
        with pytest.raises(HistoryError, match="another SQLite database \\(tables customers\\)"):
            call()


def test_an_unwritable_location_is_refused(tmp_path, audits):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(HistoryError, match="cannot be used \\(its folder .*a-file is a file\\)") as error:
        record_audit(audits[0], source="cli", path=blocker / "history.sqlite")
    assert str(blocker / "history.sqlite") in str(error.value)


# --- concurrency and crashes ----------------------------------------------------------------------------------

FORK = multiprocessing.get_context("fork")
AUDITS_PER_WRITER = 8


def _write_many(path, result, start):
    start.wait(30)
    for _ in range(AUDITS_PER_WRITER):
        record_audit(result, source="cli", path=path)


def integrity(path) -> str:
    with sqlite3.connect(path) as connection:
        return connection.execute("PRAGMA integrity_check").fetchone()[0]


def test_concurrent_writers_lose_nothing(history, audits):
    """Four processes record eight audits each at once, into a history none of them created yet."""
    start = FORK.Event()
    writers = [FORK.Process(target=_write_many, args=(history, audits[i % 2], start)) for i in range(4)]
    for writer in writers:
        writer.start()
    start.set()
    for writer in writers:
        writer.join(120)
    assert [w.exitcode for w in writers] == [0] * 4
    frame = list_audits(history)
    assert len(frame) == 4 * AUDITS_PER_WRITER and frame["id"].is_unique
    assert integrity(history) == "ok"
    with sqlite3.connect(history) as connection:
        per_audit = connection.execute("SELECT audit_id, count(*) FROM set_sizes GROUP BY audit_id").fetchall()
    assert sorted(count for _, count in per_audit) == [240] * (4 * AUDITS_PER_WRITER)  # 120 documents x 2 levels
    assert len(list(snapshot_folder(history).glob("*.npz"))) == 4 * AUDITS_PER_WRITER


def _record_and_hang(path, result, inside):
    def pause(audit_id):
        inside.set()
        time.sleep(300)

    record_audit(result, source="cli", path=path, before_commit=pause)


def test_a_writer_killed_inside_its_transaction_leaves_no_partial_audit(recorded, audits, history):
    before = [load_audit(i, history) for i in recorded]
    inside = FORK.Event()
    writer = FORK.Process(target=_record_and_hang, args=(history, audits[0], inside))
    writer.start()
    assert inside.wait(60), "the writer never reached its transaction"
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(30)
    assert writer.exitcode == -signal.SIGKILL
    assert integrity(history) == "ok"
    assert list_audits(history)["id"].tolist() == list(recorded)
    with sqlite3.connect(history) as connection:
        assert connection.execute("SELECT DISTINCT audit_id FROM set_sizes ORDER BY 1").fetchall() == \
            [(i,) for i in recorded]
    assert [load_audit(i, history) for i in recorded] == before
    assert summarize(load_result(recorded[0], history)).to_dict() == summarize(audits[0]).to_dict()
    later = record_audit(audits[1], source="cli", path=history)  # the history is usable again
    assert list_audits(history)["id"].tolist() == [*recorded, later]


def test_a_failing_recording_leaves_nothing_behind(recorded, audits, history):
    def fail(audit_id):
        raise RuntimeError("interrupted")

    snapshots = sorted(snapshot_folder(history).glob("*.npz"))
    with pytest.raises(RuntimeError):
        record_audit(audits[0], source="cli", path=history, before_commit=fail)
    assert list_audits(history)["id"].tolist() == list(recorded)
    assert sorted(snapshot_folder(history).glob("*.npz")) == snapshots
