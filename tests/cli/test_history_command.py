"""The ``cpa history`` command (run in this process): list, show and compare recorded audits, as text and as JSON,
errors as one line, never any document text; and the text of ``show`` and ``compare`` by hand on hand-made
entries (the history itself: tests/store/test_history.py)."""

from __future__ import annotations

import json

import pytest
from recorded_audits import audits_fixture, history_fixture, recorded_fixture  # noqa: F401 (the fixtures)
from tables import SECRET_TEXT

from cpa_core.cli.history_command import SHOWN_IDS, compare, show
from cpa_core.store.history import HistoryEntry, compare_audits, load_audit

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
