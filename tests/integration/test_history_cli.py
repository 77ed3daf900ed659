"""Audits run by ``cpa audit`` processes are recorded in the audit history (or not, with ``--no-history``), and
``cpa history list/show/compare`` read them without printing any document text; ``cpa history prune`` in a process,
and its errors (an id of any size, a damaged history) as one line (the history in this process:
tests/store/test_history.py and tests/cli/test_history_command.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from cli_checks import assert_one_line_error, ok
from recorded_audits import damage
from tables import SECRET_TEXT, small_audit

from cpa_core.store.history import list_audits, load_audit, record_audit, snapshot_folder
from cpa_core.store.snapshot import write_snapshot


def test_cli_audits_are_recorded_and_compared(toy_data, tmp_path, cli, cli_pool):
    paths = toy_data(n_people=12, docs_per_person=4)
    history = tmp_path / "history" / "h.sqlite"
    data = ["audit", "--documents", paths["documents"], "--registry", paths["registry"], "--config", paths["config"],
            "--attacker", "tfidf", "--flag-below", "3"]
    runs = [cli_pool.submit(*data, "--history", history, "--knowledge", level, "--out", tmp_path / level)
            for level in ("K1", "K3")]
    skipped = cli_pool.submit(*data, "--history", history, "--no-history", "--out", tmp_path / "skipped")
    for run in (*runs, skipped):
        result = run.result()
        assert result.returncode == 0, result.describe()
    assert any("recorded as audit" in line for run in runs for line in run.result().stderr_lines)
    assert not any("recorded as audit" in line for line in skipped.result().stderr_lines)
    frame = list_audits(history)
    assert len(frame) == 2 and set(frame["knowledge"]) == {"K1", "K3"} and set(frame["source"]) == {"cli"}
    assert set(frame["out_dir"]) == {str((tmp_path / level).resolve()) for level in ("K1", "K3")}
    by_level = dict(zip(frame["knowledge"], frame["id"]))
    summary = json.loads((tmp_path / "K3" / "summary.json").read_text(encoding="utf-8"))
    assert load_audit(by_level["K3"], history).summary == summary

    texts = pd.read_csv(paths["documents"])["text"].tolist()
    listed = cli("history", "list", "--history", history)
    shown = cli("history", "show", by_level["K3"], "--history", history, "--json")
    compared = cli("history", "compare", by_level["K1"], by_level["K3"], "--history", history)
    for result in (listed, shown, compared):
        assert result.returncode == 0 and "Traceback" not in result.output, result.describe()
        assert not any(text in result.output for text in texts)
    worklist = json.loads((tmp_path / "K3" / "worklist.json").read_text(encoding="utf-8"))
    entry = json.loads(shown.stdout)
    assert set(entry["flagged"]) == {row["doc_id"] for row in worklist}  # the history lists them smallest set first
    sizes = entry["set_sizes"][entry["flag_confidence"]]
    assert entry["flagged"] == sorted(entry["flagged"], key=lambda doc: (sizes[doc], doc))
    assert "worklist (A at 0.8, B at 0.8)" in compared.stdout

    missing = cli("history", "show", "7", "--history", history)
    assert missing.returncode == 2 and missing.stderr_lines == [
        f"cpa: error: audit history {history}: no audit 7; expected an id from 1 to 2 (see 'cpa history list')"]
    (tmp_path / "a-folder").mkdir()
    refused = cli(*data, "--history", tmp_path / "a-folder", "--out", tmp_path / "never")  # refused before any work
    assert refused.returncode == 2 and len(refused.stderr_lines) == 1 and "is a folder" in refused.stderr
    assert not (tmp_path / "never").exists()
    assert len(list_audits(history)) == 2


def test_prune_and_its_errors_in_processes(tmp_path, cli):
    history = tmp_path / "history" / "h.sqlite"
    ids = [record_audit(small_audit(seed), source="cli", path=history) for seed in (1, 2)]
    removed = load_audit(ids[0], history).snapshot
    orphan, _ = write_snapshot(small_audit(3), snapshot_folder(history))  # a recording killed before its commit
    assert_one_line_error(cli("history", "show", "99999999999999999999999", "--history", history),
                          "no audit 99999999999999999999999; expected an id from 1 to 2")
    dry = ok(cli("history", "prune", ids[0], "--dry-run", "--history", history))
    assert [line.split(" (")[0] for line in dry.stderr_lines] == ["cpa: would remove 1 audit",
                                                                  "cpa: would remove 1 orphan snapshot"]
    assert len(list_audits(history)) == 2 and orphan.exists()
    done = ok(cli("history", "prune", ids[0], "--history", history))
    assert [line.split(" (")[0] for line in done.stderr_lines] == ["cpa: removed 1 audit",
                                                                   "cpa: removed 1 orphan snapshot"]
    assert list_audits(history)["id"].tolist() == [ids[1]]
    assert [str(path) for path in snapshot_folder(history).iterdir()] == [load_audit(ids[1], history).snapshot]
    assert not orphan.exists() and not Path(removed).exists()
    damage(history)
    for args in (("list",), ("prune", "--keep", "0")):
        line = assert_one_line_error(cli("history", *args, "--history", history),
                                     f"audit history {history}: is damaged")
        assert SECRET_TEXT not in line
