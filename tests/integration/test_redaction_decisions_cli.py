"""``cpa redact`` as a curator meets it on the sample release: an audit run with relative paths (as ``make audit``
runs it) redacted from another directory, the decisions table opened in a spreadsheet (doc ids a spreadsheet would
run as formulas), the allow list's words and where they stay, and reviewed tables applied: edits that change nothing
or write a name, decisions of another audit, an older table, and tables saved in cp1252 or UTF-16. What the user sees:
one summary line or one error line, never document text (the decisions themselves: tests/redaction/test_decisions.py).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shlex
import shutil
import unicodedata

import pandas as pd
import pytest
from cli_checks import assert_one_line_error, ok
from conftest import run_cli, run_cli_inprocess

from cpa_core.redaction.decisions import OVERLAPS
from cpa_core.report.worklist import FORMULA_PREFIXES

HOSTILE_IDS = {"D00006": "=D00006", "D00007": "+D00007", "D00008": "-D00008", "D00009": "@D00009",
               "D00013": "'D00013"}
"""Doc ids a spreadsheet would run as a formula, and one that really starts with an apostrophe (documents whose
certified set is below k: flagged, so in the decisions)."""


@pytest.fixture(scope="module")
def sample(sample_paths, tmp_path_factory):
    """The sample release (five doc ids made hostile) audited as ``make audit`` does, from its own folder with
    relative paths, then redacted with ``--allow Kraków`` from another directory."""
    base = tmp_path_factory.mktemp("decisions")
    work, elsewhere = base / "work", base / "elsewhere"
    (work / "sample_data").mkdir(parents=True)
    elsewhere.mkdir()
    frame = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    frame["doc_id"] = frame["doc_id"].replace(HOSTILE_IDS)
    frame.to_csv(work / "sample_data" / "documents.csv", index=False)
    for name in ("registry", "config"):
        shutil.copy(sample_paths[name], work / "sample_data" / sample_paths[name].name)
    audit = run_cli("audit", "--documents", "sample_data/documents.csv", "--registry", "sample_data/registry.csv",
                    "--config", "sample_data/audit.toml", "--attacker", "tfidf", "--no-history", "--out", "audit",
                    cwd=work)
    ok(audit)
    redacted = run_cli("redact", "--audit", work / "audit", "--out", "redacted", "--allow", "Kraków", cwd=elsewhere)
    return {"base": base, "work": work, "elsewhere": elsewhere, "audit": work / "audit", "redact": redacted,
            "out": elsewhere / "redacted", "texts": dict(zip(frame["doc_id"], frame["text"]))}


def released(folder) -> dict[str, str]:
    frame = pd.read_csv(folder / "documents-redacted.csv", dtype=str, keep_default_na=False)
    return dict(zip(frame["doc_id"], frame["text"]))


def rows_of(path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path, rows: list[dict], encoding: str = "utf-8") -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_bytes(buffer.getvalue().encode(encoding))


def apply(sample, decisions, out, *options):
    return run_cli_inprocess("redact", "--audit", sample["audit"], "--out", out, "--decisions", decisions, *options)


def test_an_audit_run_with_relative_paths_is_redacted_from_another_directory_and_audited_again(sample):
    redact = ok(sample["redact"])
    said = redact.stderr_lines[-1]
    assert said.startswith("cpa: audit it again: cpa audit --documents ")
    command = shlex.split(said.removeprefix("cpa: audit it again: "))
    assert command[command.index("--registry") + 1] == str((sample["work"] / "sample_data" / "registry.csv").resolve())
    third = sample["base"] / "third"
    third.mkdir()
    command[command.index("--out") + 1] = "again"  # the command as printed, run from a third directory
    ok(run_cli(*command[1:], "--no-history", cwd=third))
    again = json.loads((third / "again" / "summary.json").read_text())  # the panel and the held-out attacker
    assert again["panel"]["attackers"] == ["tfidf", "learned"]
    assert again["members"]["learned"]["confidence"]["0.9"]["n_test"] == len(released(sample["out"]))


def _older(sample, name: str, drop: tuple[str, ...]):
    """The audit folder as an older version wrote it: its manifest without ``drop`` (its contents record kept
    true)."""
    folder = sample["base"] / name
    shutil.copytree(sample["audit"], folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    for key in drop:
        manifest.pop(key, None)
    for info in manifest["inputs"].values():
        if isinstance(info, dict):
            info.pop("path", None)
    data = json.dumps(manifest, indent=2).encode("utf-8")
    (folder / "manifest.json").write_bytes(data)
    contents = json.loads((folder / "contents.json").read_text(encoding="utf-8"))
    contents["files"]["manifest.json"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "contents.json").write_text(json.dumps(contents, indent=2), encoding="utf-8")
    return folder


def test_an_older_manifest_is_read_from_the_audits_working_directory_or_says_which_directory_it_tried(sample):
    recorded = _older(sample, "older", ())
    ok(run_cli("redact", "--audit", recorded, "--out", "from-older", "--decisions", sample["out"] / "decisions.csv",
               cwd=sample["elsewhere"]))
    oldest = _older(sample, "oldest", ("working_directory",))
    done = run_cli("redact", "--audit", oldest, "--out", "from-oldest", "--decisions", sample["out"] / "decisions.csv",
                   cwd=sample["elsewhere"])
    line = assert_one_line_error(done, f"{oldest / 'manifest.json'}: the audit's documents file "
                                       "sample_data/documents.csv is not at "
                                       f"{sample['elsewhere'] / 'sample_data' / 'documents.csv'}",
                                 "from the current directory", "expected the file the audit read")
    assert "records neither" in line


def test_the_decisions_run_no_formula_in_a_spreadsheet_and_a_round_trip_gives_the_same_release(sample, tmp_path):
    ok(sample["redact"])
    path = sample["out"] / "decisions.csv"
    text = path.read_text(encoding="utf-8")
    cells = [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]
    assert not [cell for cell in cells if cell.startswith(FORMULA_PREFIXES)]
    assert {"'=D00006", "'+D00007", "'-D00008", "'@D00009", "''D00013"} <= set(cells)
    # applied as written: the same release
    as_written = ok(apply(sample, path, tmp_path / "as-written"))
    assert (tmp_path / "as-written" / "documents-redacted.csv").read_bytes() == \
        (sample["out"] / "documents-redacted.csv").read_bytes()
    assert "no-op" not in as_written.stderr and "warning" not in as_written.stderr
    # saved by a spreadsheet that writes formula-like cells as their text, without the apostrophe
    rows = [{k: v[1:] if v.startswith("'") and v[1:].startswith(FORMULA_PREFIXES) else v for k, v in row.items()}
            for row in rows_of(path)]
    assert {"=D00006", "''D00013"} <= {row["doc_id"] for row in rows}
    write_rows(tmp_path / "saved.csv", rows)
    ok(apply(sample, tmp_path / "saved.csv", tmp_path / "saved"))
    assert released(tmp_path / "saved") == released(sample["out"])
    withheld = set(json.loads((sample["out"] / "redactions.json").read_text())["decisions"]["withheld"])
    assert set(HOSTILE_IDS.values()) <= set(released(sample["out"])) | withheld  # each id kept as it was


def test_the_summary_says_where_the_allow_lists_word_stays_and_why(sample):
    redact = ok(sample["redact"])
    log = json.loads((sample["out"] / "redactions.json").read_text(encoding="utf-8"))
    kept = log["decisions"]["allow_list_kept"]
    listed = {doc_id for entry in kept for doc_id in entry["doc_ids"]}
    left = {d for d, t in released(sample["out"]).items()
            if "krakow" in unicodedata.normalize("NFKD", t).encode("ascii", "ignore").decode().lower()}
    assert left == listed  # every released document that still names it is said, and no other
    for entry in kept:
        assert entry["documents"] == len(entry["doc_ids"])
        line = next(line for line in redact.stderr_lines if line.startswith("cpa: allow list:"))
        assert f"its words stay in {entry['documents']} released document" in line and entry["doc_ids"][0] in line
        assert entry["reason"] in " ".join(redact.stderr_lines)
    # each allow-list edit that overlaps no suggested edit is judged, on the text the release will hold: a searched
    # document with its suggested edits made (tests/integration/test_suggestions_sample.py builds that case)
    searched = {d["doc_id"]: d for d in log["documents"] if d["edits"]}
    judged = [row for row in rows_of(sample["out"] / "decisions.csv")
              if row["source"] == "allow list" and row["reason"] != OVERLAPS]
    assert judged and all(row["set_size_before"] and row["linkage_before"] for row in judged)
    for row in judged:
        if row["doc_id"] in searched:
            after = searched[row["doc_id"]]
            assert (int(row["set_size_before"]), float(row["linkage_before"])) == \
                (after["set_size_after"], after["linkage_after"]), row["doc_id"]
    assert "Kraków" not in redact.stderr.replace("--allow Kraków", "")


def test_edits_that_change_nothing_are_counted_apart_and_an_inserted_name_is_refused(sample, tmp_path):
    rows = rows_of(sample["out"] / "decisions.csv")
    withheld = {row["doc_id"] for row in rows if row["action"] == "withhold" and row["accept"] == "True"}
    # the accepted edits of the documents released (a withheld document's are not in the release, nor counted)
    edited = [row for row in rows
              if row["action"] == "edit" and row["accept"] == "True" and row["doc_id"] not in withheld]
    target = edited[0]["doc_id"]
    mine = [row for row in edited if row["doc_id"] == target]
    for row in mine:
        row["replacement"] = row["original"]  # "undone" in a spreadsheet by copying the original
    write_rows(tmp_path / "no-ops.csv", rows)
    done = ok(apply(sample, tmp_path / "no-ops.csv", tmp_path / "no-ops"))
    summary = next(line for line in done.stderr_lines if "accepted edits" in line)
    n_before = len(edited)  # every accepted edit of the tool's table redacts
    assert summary.startswith(f"cpa: {n_before - len(mine)} accepted edits")
    assert f"{len(mine)} no-op edit{'s' if len(mine) > 1 else ''} not applied" in summary
    log = json.loads((tmp_path / "no-ops" / "redactions.json").read_text())["decisions"]
    assert log["no_op_edits"]["count"] == len(mine) and log["applied_edits"] == n_before - len(mine)
    if target in released(tmp_path / "no-ops"):
        assert released(tmp_path / "no-ops")[target] == sample["texts"][target]
    # a name written in place of a word
    rows = rows_of(sample["out"] / "decisions.csv")
    first = next(i for i, row in enumerate(rows) if row["action"] == "edit" and row["accept"] == "True")
    rows[first]["replacement"] = "Margaret Thatcher"
    write_rows(tmp_path / "named.csv", rows)
    line = assert_one_line_error(apply(sample, tmp_path / "named.csv", tmp_path / "named"),
                                 f"{tmp_path / 'named.csv'}, row {first + 1}, column 'replacement'",
                                 "writes words its original does not have", "found 2 new words")
    assert "Thatcher" not in line and not (tmp_path / "named").exists()


def test_decisions_of_another_audit_of_the_release_are_refused_and_an_older_table_is_applied_with_a_warning(
        sample, tmp_path):
    k3 = run_cli_inprocess("audit", "--documents", sample["work"] / "sample_data" / "documents.csv", "--registry",
                           sample["work"] / "sample_data" / "registry.csv", "--config",
                           sample["work"] / "sample_data" / "audit.toml", "--knowledge", "K3", "--attacker", "tfidf",
                           "--no-history",
                           "--out", tmp_path / "k3")
    ok(k3)
    k2_id = json.loads((sample["audit"] / "manifest.json").read_text())["config_id"]
    k3_id = json.loads((tmp_path / "k3" / "manifest.json").read_text())["config_id"]
    assert k2_id != k3_id
    decisions = sample["out"] / "decisions.csv"
    done = run_cli_inprocess("redact", "--audit", tmp_path / "k3", "--out", tmp_path / "k2-on-k3", "--decisions",
                             decisions)
    assert_one_line_error(done, f"{decisions}, row 1, column 'config_id': decisions of another audit",
                          f"expected this audit's configuration id {k3_id}", f"found '{k2_id}'")
    older = [{k: v for k, v in row.items() if k != "config_id"} for row in rows_of(decisions)]
    write_rows(tmp_path / "older.csv", older)
    applied = ok(apply(sample, tmp_path / "older.csv", tmp_path / "older"))
    assert f"cpa: warning: {tmp_path / 'older.csv'}: no column 'config_id'" in applied.stderr
    assert released(tmp_path / "older") == released(sample["out"])
    log = json.loads((tmp_path / "older" / "redactions.json").read_text())["decisions"]
    assert log["config_id"] == k2_id and "no column 'config_id'" in log["notes"][0]


def test_a_table_saved_in_cp1252_or_utf16_is_applied_and_the_refusal_names_the_option(sample, tmp_path):
    rows = []
    for row in rows_of(sample["out"] / "decisions.csv"):
        try:
            "".join(row.values()).encode("cp1252")
        except UnicodeEncodeError:
            continue  # a word cp1252 cannot write (Gdańsk) cannot be in a cp1252 file
        rows.append(row)
    assert any("ó" in row["original"] for row in rows)  # Kraków is written in cp1252's own byte
    write_rows(tmp_path / "utf8.csv", rows)
    ok(apply(sample, tmp_path / "utf8.csv", tmp_path / "utf8"))
    write_rows(tmp_path / "windows.csv", rows, encoding="cp1252")
    line = assert_one_line_error(apply(sample, tmp_path / "windows.csv", tmp_path / "refused"),
                                 f"{tmp_path / 'windows.csv'}, row ", "text is not valid UTF-8",
                                 "declare the file's encoding with --encoding", "found byte 0xf3")
    assert "Kraków" not in line
    ok(apply(sample, tmp_path / "windows.csv", tmp_path / "windows", "--encoding", "cp1252"))
    assert released(tmp_path / "windows") == released(tmp_path / "utf8")
    (tmp_path / "unicode.csv").write_bytes((sample["out"] / "decisions.csv").read_text(encoding="utf-8")
                                           .encode("utf-16"))  # a byte-order mark, then UTF-16
    ok(apply(sample, tmp_path / "unicode.csv", tmp_path / "unicode"))
    assert released(tmp_path / "unicode") == released(sample["out"])
    assert_one_line_error(run_cli_inprocess("redact", "--audit", sample["audit"], "--out", tmp_path / "nothing",
                                            "--encoding", "cp1252"), "--encoding", "--decisions")


def test_the_audit_of_the_redacted_release_is_recorded_in_the_history_attacker_by_attacker(sample):
    redact = ok(sample["redact"])
    recorded = [line for line in redact.stderr_lines if line.startswith("cpa: recorded ")]
    assert [line.split()[2] for line in recorded] == ["tfidf", "learned"]  # each one of the panel, held-out included
    listed = json.loads(ok(run_cli("history", "list", "--json")).stdout)
    ids = {line.split(" as audit ")[1].split()[0] for line in recorded}
    assert ids <= {str(entry["id"]) for entry in listed}
