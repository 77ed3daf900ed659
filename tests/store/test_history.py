"""The audit history: recording, listing, comparing, reopening and pruning audits; concurrency, crashes, damaged
files, unreadable rows and failing disks (a reopened audit is the same audit: tests/store/test_snapshot.py; the
``cpa history`` command line: tests/cli/test_history_command.py, and with audits recorded by ``cpa`` processes:
tests/integration/test_history_cli.py)."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import signal
import sqlite3
import stat
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from audit_files import as_json
from recorded_audits import audits_fixture, history_fixture, recorded_fixture  # noqa: F401 (the fixtures)
from recorded_audits import damage
from tables import SECRET_TEXT

from cpa_core.common.errors import HistoryError
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import summary_document
from cpa_core.report.worklist import worklist
from cpa_core.store import history as history_module
from cpa_core.store.history import (
    ENV_VAR,
    HistoryEntry,
    check_history,
    compare_audits,
    history_path,
    list_audits,
    load_audit,
    load_result,
    orphan_files,
    prune_history,
    record_audit,
    snapshot_folder,
)
from cpa_core.store.snapshot import write_snapshot


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
    stored = b"".join(path.read_bytes() for path in history.parent.glob("history.sqlite*") if path.is_file())
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


def snapshots_of(history) -> list[Path]:
    return sorted(snapshot_folder(history).glob("*.npz"))


def test_a_writer_killed_between_its_snapshot_and_its_commit_leaves_an_orphan_that_prune_removes(
        recorded, audits, history, monkeypatch):
    """While the writer is under way its snapshot is not an orphan (a prune waits for it); once it is killed, the
    snapshot it wrote is one, said by a dry run and removed by a prune."""
    kept = snapshots_of(history)
    inside = FORK.Event()
    writer = FORK.Process(target=_record_and_hang, args=(history, audits[0], inside))
    writer.start()
    assert inside.wait(60), "the writer never reached its transaction"
    (orphan,) = set(snapshots_of(history)) - set(kept)
    assert orphan_files(history) == ((), 0)  # a recording under way: its snapshot is not an orphan
    monkeypatch.setattr(history_module, "LOCK_WAIT_S", 0.3)
    with pytest.raises(HistoryError, match="still in use after 0.3 s by an audit being recorded in another process"):
        prune_history(history)
    assert orphan.exists()
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(30)
    assert writer.exitcode == -signal.SIGKILL
    assert orphan_files(history) == ((orphan,), orphan.stat().st_size)
    dry = prune_history(history, dry_run=True)
    assert dry.orphans == (orphan,) and dry.orphan_bytes == orphan.stat().st_size and dry.dry_run
    assert dry.audits == () and orphan.exists()  # a dry run removes nothing
    done = prune_history(history)
    assert done.orphans == (orphan,) and done.orphan_bytes == dry.orphan_bytes and not orphan.exists()
    assert snapshots_of(history) == kept and list_audits(history)["id"].tolist() == list(recorded)
    assert summarize(load_result(recorded[1], history)).to_dict() == summarize(audits[1]).to_dict()
    assert prune_history(history).orphans == ()


# --- prune ----------------------------------------------------------------------------------------------------

def test_prune_removes_audits_by_id_with_their_rows_and_snapshots(recorded, audits, history):
    third = record_audit(audits[0], source="cli", path=history)
    entries = {i: load_audit(i, history) for i in (*recorded, third)}
    size = Path(entries[recorded[0]].snapshot).stat().st_size
    dry = prune_history(history, ids=[recorded[0]], dry_run=True)
    assert dry.audits == (recorded[0],) and dry.snapshots == (Path(entries[recorded[0]].snapshot),)
    assert dry.snapshot_bytes == size and len(snapshots_of(history)) == 3 and len(list_audits(history)) == 3
    done = prune_history(history, ids=[recorded[0]])
    assert done.to_dict() == {**dry.to_dict(), "dry_run": False}
    assert list_audits(history)["id"].tolist() == [recorded[1], third]
    assert not Path(entries[recorded[0]].snapshot).exists() and len(snapshots_of(history)) == 2
    with sqlite3.connect(history) as connection:
        left = connection.execute("SELECT count(*) FROM set_sizes WHERE audit_id = ?", (recorded[0],)).fetchone()
    assert left == (0,)
    with pytest.raises(HistoryError, match=f"no audit {recorded[0]}; expected an id from {recorded[1]} to {third}"):
        load_audit(recorded[0], history)
    assert load_audit(third, history) == entries[third]
    assert integrity(history) == "ok"


def test_prune_by_date_and_keeping_the_newest(recorded, audits, history):
    ids = [*recorded, *(record_audit(audits[0], source="cli", path=history) for _ in range(3))]
    with sqlite3.connect(history) as connection:  # recorded on the 1st to the 5th of January
        connection.executemany("UPDATE audits SET created_at = ? WHERE id = ?",
                               [(f"2026-01-0{day}T12:00:00+00:00", i) for day, i in enumerate(ids, start=1)])
    assert prune_history(history, before=datetime(2026, 1, 3), dry_run=True).audits == tuple(ids[:2])
    assert prune_history(history, before=datetime(2026, 1, 3, 12, 0, 1, tzinfo=UTC), dry_run=True).audits == \
        tuple(ids[:3])
    assert prune_history(history, keep=2, dry_run=True).audits == tuple(ids[:3])
    assert prune_history(history, keep=0, dry_run=True).audits == tuple(ids)
    assert prune_history(history, keep=9, dry_run=True).audits == ()
    assert prune_history(history, before=datetime(2026, 1, 5), keep=3, dry_run=True).audits == tuple(ids[:2])
    assert prune_history(history, ids=[ids[4]], before=datetime(2026, 1, 2), keep=1, dry_run=True).audits == \
        (ids[0], ids[4])  # a named audit goes whatever --keep says
    report = prune_history(history, keep=2)
    assert report.audits == tuple(ids[:3]) and len(report.snapshots) == 3
    assert list_audits(history)["id"].tolist() == ids[3:] and len(snapshots_of(history)) == 2


def test_prune_of_an_unknown_id_removes_nothing(recorded, history):
    for unknown in (99, 10**23, -1):
        with pytest.raises(HistoryError, match=f"no audit {unknown}; expected ids from 1 to 2 .*nothing was removed"):
            prune_history(history, ids=[recorded[0], unknown])
    assert list_audits(history)["id"].tolist() == list(recorded) and len(snapshots_of(history)) == 2


def test_prune_removes_orphan_snapshots_and_temporaries_and_nothing_else(recorded, audits, history, tmp_path):
    folder = snapshot_folder(history)
    orphan, _ = write_snapshot(audits[0], folder)  # a snapshot whose row was never committed
    partial = folder / ".snapshot-k1ll3d_x.part"  # a snapshot whose writing was killed
    partial.write_bytes(b"PK\x03\x04" + b"\0" * 1000)
    others = [folder / "notes.txt", folder / "sub"]
    others[0].write_text("not a snapshot")
    others[1].mkdir()
    report = prune_history(history)
    assert report.audits == () and report.snapshots == ()
    assert set(report.orphans) == {orphan, partial} and not orphan.exists() and not partial.exists()
    assert report.orphan_bytes > 1004
    assert all(path.exists() for path in others)
    assert [Path(load_audit(i, history).snapshot).exists() for i in recorded] == [True, True]
    assert prune_history(tmp_path / "none.sqlite") == history_module.PruneReport(tmp_path / "none.sqlite", (), (), 0,
                                                                                   (), 0, False)
    assert not (tmp_path / "none.sqlite").exists()


def test_a_recording_removes_the_temporaries_of_killed_ones_and_leaves_orphan_snapshots(recorded, audits, history):
    folder = snapshot_folder(history)
    partial = folder / ".snapshot-k1ll3d_x.part"
    partial.write_bytes(b"half a snapshot")
    orphan, _ = write_snapshot(audits[0], folder)
    record_audit(audits[1], source="cli", path=history)
    assert not partial.exists()  # never referred to by any audit: removed
    assert orphan.exists() and orphan_files(history) == ((orphan,), orphan.stat().st_size)  # for 'cpa history prune'


# --- a damaged file, an unreadable row ------------------------------------------------------------------------

DAMAGED = "is damaged \\(SQLite's quick_check: .*Page \\d+.*\\); expected an intact SQLite file"


def test_a_damaged_history_is_refused_before_anything_is_recorded(recorded, audits, history):
    damage(history)
    before = history.read_bytes(), snapshots_of(history)
    for call in (lambda: check_history(history), lambda: check_history(history, create=False),
                 lambda: record_audit(audits[0], source="cli", path=history), lambda: prune_history(history, keep=0)):
        with pytest.raises(HistoryError, match=DAMAGED) as error:
            call()
        message = str(error.value)
        assert "\n" not in message and str(history) in message
        assert "restore the file from a copy, or start a new history with --history FILE" in message
    assert (history.read_bytes(), snapshots_of(history)) == before  # nothing written, no snapshot left
    with pytest.raises(HistoryError, match="is damaged \\(SQLite: database disk image is malformed\\)"):
        load_audit(recorded[0], history)  # reading the damaged page: the same one line
    assert list_audits(history)["id"].tolist() == list(recorded)  # what can be read still is


@pytest.mark.parametrize("stored, reason", [
    ("{not json", "its stored summary is not JSON"),
    ("[1, 2]", "its stored summary is JSON but an array, not an object"),
    ('"text"', "its stored summary is JSON but a string, not an object"),
    ('{"confidence": [1]}', "its stored summary is not of the form the tool records"),
])
def test_a_row_whose_summary_cannot_be_read_is_listed_as_unreadable(recorded, history, stored, reason):
    with sqlite3.connect(history) as connection:
        connection.execute("UPDATE audits SET summary = ? WHERE id = ?", (stored, recorded[0]))
    frame = list_audits(history)
    assert frame["id"].tolist() == list(recorded)
    assert frame["unreadable"].iloc[0] == reason and frame["unreadable"].isna().tolist() == [False, True]
    assert frame.iloc[0]["source"] == "cli" and pd.isna(frame.iloc[0]["knowledge"])
    assert frame.iloc[1]["knowledge"] == "toy"
    with pytest.raises(HistoryError) as error:
        load_audit(recorded[0], history)
    assert str(error.value) == (f"audit history {history}: audit {recorded[0]} cannot be read ({reason}); expected "
                                f"the row the tool recorded: 'cpa history prune {recorded[0]}' removes it")
    assert load_audit(recorded[1], history).id == recorded[1]
    assert prune_history(history, ids=[recorded[0]]).audits == (recorded[0],)  # and it can be removed


def test_an_id_beyond_what_sqlite_holds_is_no_audit(recorded, history):
    for huge in (10**23, 2**63, -(2**63) - 1):
        with pytest.raises(HistoryError, match=f"no audit {huge}; expected an id from 1 to 2"):
            load_audit(huge, history)


# --- a failing disk: every error names its file -----------------------------------------------------------------

def test_a_folder_that_cannot_be_searched_is_named(recorded, audits, history, monkeypatch):
    """A permission denied on the history's folder (simulated: the tests run as any user, root included)."""
    real_stat = Path.stat

    def denied(path, *args, **kwargs):
        if path == history:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", denied)
    for call in (lambda: list_audits(history), lambda: load_audit(1, history), lambda: check_history(history),
                 lambda: record_audit(audits[0], source="cli", path=history)):
        with pytest.raises(HistoryError) as error:
            call()
        assert str(error.value).startswith(f"audit history {history}: cannot be used (Permission denied)")


def test_a_full_disk_is_named_and_leaves_no_snapshot(recorded, audits, history, monkeypatch):
    connect = sqlite3.connect

    def full(*args, **kwargs):  # SQLite's own "disk is full": no page can be added to the file
        connection = connect(*args, **kwargs)
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")
        return connection

    snapshots = snapshots_of(history)
    monkeypatch.setattr(history_module.sqlite3, "connect", full)
    with pytest.raises(HistoryError) as error:
        record_audit(audits[0], source="cli", path=history)
    assert str(error.value) == (f"audit history {history}: cannot be written (database or disk is full); expected "
                                f"free space on its disk: free some, or set {ENV_VAR} or --history to a file on "
                                "another disk")
    monkeypatch.setattr(history_module.sqlite3, "connect", connect)
    assert snapshots_of(history) == snapshots and list_audits(history)["id"].tolist() == list(recorded)


def test_a_snapshot_that_cannot_be_removed_is_named(recorded, history, monkeypatch):
    snapshot = Path(load_audit(recorded[0], history).snapshot)
    unlink = Path.unlink

    def denied(path, *args, **kwargs):
        if path == snapshot:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", denied)
    with pytest.raises(HistoryError, match=f"^audit snapshot {snapshot}: cannot be removed \\(Permission denied\\)"):
        prune_history(history, ids=[recorded[0]])
    monkeypatch.setattr(Path, "unlink", unlink)
    assert list_audits(history)["id"].tolist() == [recorded[1]]  # the audit is removed; its file is an orphan
    assert prune_history(history).orphans == (snapshot,) and not snapshot.exists()


def test_two_histories_of_one_stem_keep_their_snapshots_apart(audits, tmp_path):
    """``x.sqlite`` and ``x.db`` in one folder: recording into one never calls the other's snapshot an orphan, and
    pruning one leaves every audit of the other reopenable."""
    first, second = tmp_path / "x.sqlite", tmp_path / "x.db"
    kept = record_audit(audits[0], source="cli", path=first)
    record_audit(audits[1], source="cli", path=second)
    assert snapshot_folder(first) != snapshot_folder(second)
    assert orphan_files(second) == ((), 0) and orphan_files(first) == ((), 0)
    report = prune_history(second, keep=0)
    assert report.orphans == () and len(report.snapshots) == 1
    assert load_result(kept, first).config.config_id == audits[0].config.config_id


def test_an_earlier_version_s_snapshot_folder_is_pruned_only_when_no_other_history_shares_it(audits, tmp_path):
    """Earlier versions named the folder by the file's stem (``x.snapshots``); its files are still read, and its
    orphans removed only when no other history of that stem lies beside it."""
    history = tmp_path / "x.sqlite"
    recorded = record_audit(audits[0], source="cli", path=history)
    earlier = tmp_path / "x.snapshots"
    earlier.mkdir()
    moved = earlier / Path(load_audit(recorded, history).snapshot).name
    os.rename(load_audit(recorded, history).snapshot, moved)
    with sqlite3.connect(history) as connection:
        connection.execute("UPDATE audits SET snapshot = ?", (f"x.snapshots/{moved.name}",))
    orphan, _ = write_snapshot(audits[1], earlier)
    assert orphan_files(history)[0] == (orphan,)
    other = tmp_path / "x.db"
    record_audit(audits[1], source="cli", path=other)  # another history of the stem: the folder may be its
    assert orphan_files(history) == ((), 0) and prune_history(history).orphans == () and orphan.exists()
    other.unlink()
    assert prune_history(history).orphans == (orphan,) and not orphan.exists()
    assert load_result(recorded, history).config.config_id == audits[0].config.config_id


# --- an attacker panel ------------------------------------------------------------------------------------------

def test_the_members_of_one_run_of_a_panel_are_one_entry(tmp_path):
    from tables import small_audit
    from toy_panel import toy_panel

    from cpa_core.store.history import panel_entries

    history = tmp_path / "h.sqlite"
    panel = toy_panel()
    first, second = panel.members
    ids = [record_audit(small_audit(1), source="cli", path=history),
           record_audit(first, source="cli", path=history), record_audit(second, source="cli", path=history),
           record_audit(first, source="dashboard", path=history),  # the same panel run again: an entry of its own
           record_audit(second, source="dashboard", path=history),
           record_audit(second, source="cli", path=history),  # a member alone (its panel's first was pruned)
           record_audit(first, source="cli", path=history)]  # then a first member: a run of its own
    frame = list_audits(history)
    assert frame["panel"].isna().tolist() == [True] + [False] * 6 and set(frame["panel"][1:]) == {panel.config_id}
    assert frame["panel_attackers"].iloc[1] == panel.names and frame["panel_attackers"].isna().iloc[0]
    assert panel_entries(frame) == [(ids[0],), (ids[1], ids[2]), (ids[3], ids[4]), (ids[5],), (ids[6],)]


def test_a_recorded_member_finds_its_panel_s_summary_and_its_redaction(tmp_path):
    from toy_panel import REDACTION, toy_panel

    from cpa_core.store.history import recorded_panel_summary
    from cpa_core.store.records import PANEL_FOLDER, write_panel

    history = tmp_path / "h.sqlite"
    panel = toy_panel()
    out = tmp_path / "panel"
    out.mkdir()
    write_panel(panel, out, {}, redaction=REDACTION)
    name = panel.names[1]
    recorded = record_audit(panel.member(name), source="cli", out_dir=out / PANEL_FOLDER / name, path=history)
    found = recorded_panel_summary(load_audit(recorded, history))
    assert found["panel"]["config_id"] == panel.config_id and found["redaction"] == REDACTION
    loose = record_audit(panel.member(name), source="cli", path=history)  # no folder recorded
    assert recorded_panel_summary(load_audit(loose, history)) is None
    other = toy_panel(flag_below=3)
    assert other.config_id != panel.config_id
    write_panel(other, out, {})  # the folder now holds another panel's audit: not this member's
    assert recorded_panel_summary(load_audit(recorded, history)) is None
