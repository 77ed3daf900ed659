"""Long fields through ``cpa audit``: a 300,000-character document is read whole and audited in a process; a field
above the stated bound (MAX_FIELD_CHARS) is refused in one line naming the file, row and column, or dropped with
``--drop-invalid``; a JSONL line with a repeated key is refused with its line and key (loading: tests/io/)."""

from __future__ import annotations

import json

from audit_files import read_jsonl
from cli_checks import assert_one_line_error, ok
from conftest import run_cli, run_cli_inprocess, toy_frames, write_table

FILLER = "Nothing else of note happened on that long and uneventful day in the hearing. "


def _release(tmp_path, text_of_first: str, suffix: str = ".csv"):
    documents, registry = toy_frames(n_people=8, docs_per_person=3)
    documents.loc[0, "text"] = text_of_first
    return (write_table(documents, tmp_path / f"documents{suffix}"), write_table(registry, tmp_path / "registry.csv"),
            documents)


def test_a_300000_character_document_is_read_whole_and_audited(tmp_path):
    documents, registry = toy_frames(n_people=8, docs_per_person=3)
    first = documents.loc[0, "text"] + " "
    long = (first + FILLER * (300_000 // len(FILLER) + 1))[:300_000]
    assert len(long) == 300_000
    docs_path, registry_path, documents = _release(tmp_path, long)
    out = tmp_path / "out"
    done = ok(run_cli("audit", "--documents", docs_path, "--registry", registry_path, "--attacker", "tfidf",
                      "--out", out))
    assert "uneventful" not in done.output  # never the text
    records = {record["doc_id"]: record for record in read_jsonl(out / "documents.jsonl")}
    assert set(records) == set(documents["doc_id"])
    assert records["D0000"]["query"] == long  # the attacker saw the whole document
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert all(entry["n_test"] == len(documents) for entry in summary["confidence"].values())


def test_a_field_above_the_stated_bound_is_refused_or_dropped(tmp_path):
    from cpa_core.io.reading import MAX_FIELD_CHARS

    too_long = FILLER * (MAX_FIELD_CHARS // len(FILLER) + 1)
    docs_path, registry_path, documents = _release(tmp_path, too_long, ".jsonl")
    common = ["audit", "--documents", docs_path, "--registry", registry_path, "--attacker", "tfidf"]
    refused = run_cli_inprocess(*common, "--out", tmp_path / "refused")
    line = assert_one_line_error(refused, str(docs_path), "row 1", "column 'text'", "field too long",
                                 f"expected at most {MAX_FIELD_CHARS:,} characters",
                                 f"found {len(too_long):,} characters")
    assert "uneventful" not in refused.output and len(line) < 300
    dropped = ok(run_cli_inprocess(*common, "--drop-invalid", "--out", tmp_path / "dropped"))
    assert any(f"{docs_path}: dropped 1 of {len(documents)} rows (first: row 1, text: field too long" in said
               for said in dropped.stderr_lines), dropped.describe()
    assert "uneventful" not in dropped.output
    kept = {record["doc_id"] for record in read_jsonl(tmp_path / "dropped" / "documents.jsonl")}
    assert kept == set(documents["doc_id"]) - {"D0000"}


def test_a_jsonl_line_with_a_repeated_key_is_refused(tmp_path):
    documents, registry = toy_frames(n_people=8, docs_per_person=3)
    lines = [json.dumps(record) for record in documents.to_dict("records")]
    lines[6] = lines[6][:-1] + ', "doc_id": "b"}'
    (tmp_path / "documents.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    refused = run_cli_inprocess("audit", "--documents", tmp_path / "documents.jsonl", "--registry",
                                write_table(registry, tmp_path / "registry.csv"), "--out", tmp_path / "out")
    assert_one_line_error(refused, "documents.jsonl: line 7: key 'doc_id' appears twice; expected each key once")
    assert "visit number" not in refused.output
