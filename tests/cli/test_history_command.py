"""The ``cpa history`` command (run in this process): list, show, compare and prune recorded audits, as text and
as JSON, errors as one line (a damaged history, an unreadable row, any id), never any document text; ``cpa audit``
refusing a damaged history before any work; and the text of ``show`` and ``compare`` by hand on hand-made entries
(the history itself: tests/store/test_history.py)."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import pytest
from cli_checks import assert_one_line_error, ok
from recorded_audits import audits_fixture, history_fixture, recorded_fixture  # noqa: F401 (the fixtures)
from recorded_audits import damage
from tables import SECRET_TEXT

from cpa_core.cli.history_command import SHOWN_IDS, check_audit_history, compare, show
from cpa_core.store.history import HistoryEntry, compare_audits, list_audits, load_audit, snapshot_folder
from cpa_core.store.snapshot import write_snapshot

SHA = "0123456789abcdef" * 4


def entry(audit_id: int, sizes: dict[str, int], flagged: tuple[str, ...], **changes) -> HistoryEntry:
    summary = {"knowledge": "K2", "attacker": "tfidf", "protocol": "release", "score": "aps",
               "miss_policy": "infinite", "policy": {"flag_below": 3, "leakage_threshold": None},
               "confidence": {"0.9": {"coverage": 0.91, "median_set_size": 4.0, "n_flagged": len(flagged),
                                      "threshold": "0.8"}}}
    values = dict(id=audit_id, created_at="2026-01-02T03:04:05+00:00", source="cli", config_id="abc123def456",
                  config={}, checksums={"documents": {"file": "docs.csv", "rows": 120, "sha256": SHA}},
                  summary=summary, flag_confidence="0.9", set_sizes={"0.9": dict(sizes)}, flagged=flagged,
                  out_dir="out/k2", versions={"cpa-core": "1.2.3", "python": "3.11.9", "numpy": "2"}, snapshot=None,
                  snapshot_sha256=None)
    return HistoryEntry(**{**values, **changes})


def test_history_commands(recorded, history, cli_inprocess):
    listed = cli_inprocess("history", "list", "--history", history)
    assert listed.returncode == 0 and "dashboard" in listed.stdout and "toy" in listed.stdout
    rows = json.loads(cli_inprocess("history", "list", "--history", history, "--json").stdout)
    assert [row["id"] for row in rows] == list(recorded)
    shown = cli_inprocess("history", "show", recorded[0], "--history", history)
    assert shown.returncode == 0 and f"audit {recorded[0]}:" in shown.stdout and "worklist at 0.8 (|C| < 5 or linkage > 0.7)" in shown.stdout
    entry = json.loads(cli_inprocess("history", "show", recorded[0], "--history", history, "--json").stdout)
    assert entry["flagged"] == list(load_audit(recorded[0], history).flagged)
    compared = cli_inprocess("history", "compare", *recorded, "--history", history)
    comparison = compare_audits(*(load_audit(i, history) for i in recorded))
    assert f"{len(comparison.flagged_added)} added, {len(comparison.flagged_removed)} removed" in compared.stdout
    as_data = json.loads(cli_inprocess("history", "compare", *recorded, "--history", history, "--json").stdout)
    assert as_data["flagged"]["added"] == list(comparison.flagged_added)
    for result in (listed, shown, compared):
        assert SECRET_TEXT not in result.output


@pytest.mark.parametrize("args,fragment", [
    (("history", "show", "42"), "no audit 42"),
    (("history", "compare", "1", "42"), "no audit 42"),
    (("history", "show", "one"), "invalid int value: 'one'"),
])
def test_history_command_errors_are_one_line(recorded, history, cli_inprocess, args, fragment):
    result = cli_inprocess(*args, "--history", history)
    assert result.returncode == 2 and len(result.stderr_lines) == 1, result.describe()
    assert result.stderr_lines[0].startswith("cpa: error:") and fragment in result.stderr_lines[0]


def test_history_commands_on_a_bad_file_are_one_line(tmp_path, cli_inprocess):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"\x00garbage" * 64)
    for args in (("history", "list", "--history", bad), ("history", "list", "--history", tmp_path)):
        result = cli_inprocess(*args)
        assert result.returncode == 2 and len(result.stderr_lines) == 1, result.describe()
        assert result.stderr_lines[0].startswith("cpa: error: audit history") and str(args[-1]) in result.stderr


def test_show_by_hand():
    text = show(entry(7, {"d1": 1, "d2": 2, "d3": 5}, ("d1", "d2")))
    lines = text.splitlines()
    assert lines[:8] == [
        "audit 7: K2, tfidf, configuration abc123def456, recorded 2026-01-02T03:04:05+00:00 (cli)",
        "  protocol   release, score aps, miss policy infinite",
        "  documents  docs.csv (120 rows, sha256 0123456789ab…)",
        "  registry   –",
        "  records    out/k2",
        "  snapshot   none",
        "  versions   cpa-core 1.2.3, python 3.11.9",
        ""]
    assert lines[8].split() == ["confidence", "coverage", "median_set_size", "n_flagged", "threshold"]
    assert lines[9].split() == ["0.9", "0.91", "4.0", "2", "0.8"] and lines[10] == ""
    assert lines[11:] == ["worklist at 0.9 (|C| < 3 or linkage > 0.333): 2 documents, smallest set first: d1 (1), d2 (2)"]
    nothing = show(entry(8, {"d3": 5}, (), source="dashboard", out_dir=None, snapshot="/h/s.npz"))
    assert nothing.splitlines()[-1] == "worklist at 0.9 (|C| < 3 or linkage > 0.333): 0 documents, smallest set first"
    assert "  records    –" in nothing and "  snapshot   /h/s.npz" in nothing and "(dashboard)" in nothing


def test_long_lists_of_ids_are_cut_short():
    ids = tuple(f"d{i:02d}" for i in range(SHOWN_IDS + 5))
    text = show(entry(9, {d: 1 for d in ids}, ids))
    assert text.endswith(", d19 (1) and 5 more (--json lists all)") and "d20" not in text
    assert SHOWN_IDS == 20


def test_compare_by_hand():
    a = entry(1, {"d1": 1, "d2": 2, "d3": 5, "d4": 9}, ("d1", "d2"))
    b = entry(2, {"d2": 1, "d3": 2, "d4": 9, "d5": 0}, ("d5", "d2", "d3"), source="dashboard")
    text = compare(a, b, compare_audits(a, b))
    lines = text.splitlines()
    assert lines[0] == "A = audit 1: K2, tfidf, configuration abc123def456, recorded 2026-01-02T03:04:05+00:00 (cli)"
    assert lines[1].startswith("B = audit 2: ") and lines[1].endswith("(dashboard)") and lines[2] == ""
    blank = lines.index("", 3)
    assert lines[blank + 1:blank + 4] == ["worklist (A at 0.9, B at 0.9): 2 added, 1 removed, 1 kept",
                                          "  added: d5, d3", "  removed: d1"]
    assert lines[blank + 5] == "set sizes of the documents in both audits:"
    same = compare(a, a, compare_audits(a, a))
    assert "0 added, 0 removed, 2 kept" in same and "added:" not in same and "removed:" not in same


def test_an_empty_history_is_said_on_stderr(tmp_path, cli_inprocess):
    result = cli_inprocess("history", "list", "--history", tmp_path / "none.sqlite")
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr == f"cpa: no audit recorded in {tmp_path / 'none.sqlite'}\n"
    as_json = cli_inprocess("history", "list", "--history", tmp_path / "none.sqlite", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == []


# --- prune ------------------------------------------------------------------------------------------------------

def test_prune_says_what_it_removes(recorded, audits, history, cli_inprocess):
    folder = snapshot_folder(history)
    snapshot = Path(load_audit(recorded[0], history).snapshot)
    size = snapshot.stat().st_size
    orphan, _ = write_snapshot(audits[1], folder)  # as a recording killed before its commit leaves it
    (folder / ".snapshot-k1ll3d_x.part").write_bytes(b"x" * 2000)
    orphan_bytes = orphan.stat().st_size + 2000
    mb = f"{size / 1e6:,.1f} MB" if size >= 1e6 else f"{size / 1e3:,.1f} KB"
    orphan_mb = f"{orphan_bytes / 1e6:,.1f} MB" if orphan_bytes >= 1e6 else f"{orphan_bytes / 1e3:,.1f} KB"
    dry = ok(cli_inprocess("history", "prune", recorded[0], "--dry-run", "--history", history))
    assert dry.stdout == "" and dry.stderr_lines == [
        f"cpa: would remove 1 audit ({recorded[0]}) from {history} and 1 snapshot ({mb})",
        f"cpa: would remove 1 orphan snapshot and 1 temporary file ({orphan_mb}) from {folder}: no audit refers to "
        "them (recordings interrupted before they committed)"]
    assert len(list_audits(history)) == 2 and snapshot.exists() and orphan.exists()
    done = ok(cli_inprocess("history", "prune", recorded[0], "--history", history, "--json"))
    report = json.loads(done.stdout)
    assert report == {"history": str(history), "dry_run": False, "audits": [recorded[0]], "snapshots": [str(snapshot)],
                      "snapshot_bytes": size, "orphans": [str(orphan), str(folder / ".snapshot-k1ll3d_x.part")],
                      "orphan_bytes": orphan_bytes}
    assert list_audits(history)["id"].tolist() == [recorded[1]] and sorted(folder.iterdir()) == \
        [Path(load_audit(recorded[1], history).snapshot)]
    nothing = ok(cli_inprocess("history", "prune", "--history", history))
    assert nothing.stderr_lines == [f"cpa: nothing to remove in {history}: no audit chosen, no orphan file"]
    kept = ok(cli_inprocess("history", "prune", "--keep", "0", "--before", "2999-01-01", "--history", history))
    assert kept.stderr_lines[0].startswith(f"cpa: removed 1 audit ({recorded[1]}) from {history} and 1 snapshot (")
    assert list_audits(history).empty


@pytest.mark.parametrize("args, fragments", [
    (("history", "prune", "42"), ["no audit 42; expected ids from 1 to 2", "nothing was removed"]),
    (("history", "prune", "--before", "yesterday"),
     ["argument --before: expected a date YYYY-MM-DD or an ISO 8601 time, found 'yesterday'"]),
    (("history", "prune", "--keep", "-1"), ["argument --keep: expected an integer of at least 0, found '-1'"]),
    (("history", "prune", "one"), ["invalid int value: 'one'"]),
])
def test_prune_errors_are_one_line_and_remove_nothing(recorded, history, cli_inprocess, args, fragments):
    assert_one_line_error(cli_inprocess(*args, "--history", history), *fragments)
    assert list_audits(history)["id"].tolist() == list(recorded) and len(list(snapshot_folder(history).iterdir())) == 2


# --- a damaged history, an unreadable row, any id ---------------------------------------------------------------

def test_every_action_on_a_damaged_history_is_one_line(recorded, history, cli_inprocess):
    damage(history)
    for args in (("list",), ("list", "--json"), ("show", recorded[0]), ("compare", *recorded),
                 ("prune", "--keep", "0")):
        line = assert_one_line_error(cli_inprocess("history", *args, "--history", history),
                                     f"audit history {history}: is damaged (SQLite's quick_check: ",
                                     "restore the file from a copy, or start a new history with --history FILE")
        assert SECRET_TEXT not in line


def test_an_audit_into_a_damaged_history_is_refused_before_any_work(recorded, history, toy_data, tmp_path,
                                                                     cli_inprocess):
    damage(history)
    before = history.read_bytes()
    paths = toy_data()
    result = cli_inprocess("audit", "--documents", paths["documents"], "--registry", paths["registry"], "--config",
                           paths["config"], "--out", tmp_path / "out", "--history", history)
    assert_one_line_error(result, f"audit history {history}: is damaged (SQLite's quick_check: ")
    assert not (tmp_path / "out" / "summary.json").exists() and history.read_bytes() == before
    assert len(list(snapshot_folder(history).iterdir())) == 2


@pytest.mark.parametrize("stored, reason", [("{not json", "its stored summary is not JSON"),
                                            ("[1, 2]", "its stored summary is JSON but an array, not an object")])
def test_a_row_that_cannot_be_read_is_listed_and_said(recorded, history, cli_inprocess, stored, reason):
    with sqlite3.connect(history) as connection:
        connection.execute("UPDATE audits SET summary = ? WHERE id = ?", (stored, recorded[1]))
    listed = ok(cli_inprocess("history", "list", "--history", history))
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == [str(i) for i in recorded]
    assert listed.stderr_lines == [f"cpa: audit {recorded[1]} cannot be read ({reason}); 'cpa history prune "
                                   f"{recorded[1]}' removes it"]
    rows = json.loads(ok(cli_inprocess("history", "list", "--history", history, "--json")).stdout)
    assert [row["unreadable"] for row in rows] == [None, reason]
    for args in (("show", recorded[1]), ("compare", *recorded)):
        assert_one_line_error(cli_inprocess("history", *args, "--history", history),
                              f"audit {recorded[1]} cannot be read ({reason})")
    ok(cli_inprocess("history", "show", recorded[0], "--history", history))


@pytest.mark.parametrize("audit_id", ["99999999999999999999999", "9223372036854775808", "-99999999999999999999999"])
def test_an_id_of_any_size_is_one_line(recorded, history, cli_inprocess, audit_id):
    assert_one_line_error(cli_inprocess("history", "show", audit_id, "--history", history),
                          f"no audit {audit_id}; expected an id from 1 to 2")
    assert_one_line_error(cli_inprocess("history", "compare", "1", audit_id, "--history", history),
                          f"no audit {audit_id}")


def test_an_audit_points_out_the_orphans_of_its_history(recorded, audits, history, capsys):
    orphan, _ = write_snapshot(audits[0], snapshot_folder(history))
    check_audit_history(argparse.Namespace(no_history=False, history=str(history)))  # what 'cpa audit' runs first
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith("cpa: note: 1 file (") and said[0].endswith(
        f"in {snapshot_folder(history)} belong to no recorded audit (recordings interrupted before they committed); "
        f"'cpa history prune --history {history}' removes them")
    assert orphan.exists()  # pointed out, not removed
    check_audit_history(argparse.Namespace(no_history=True, history=str(history)))
    assert capsys.readouterr().err == ""
