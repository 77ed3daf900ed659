"""A release exported without document ids (a blog archive: author, post) audited by ``cpa audit --number-rows``:
its ids are the rows' numbers, the manifest says so, and the audit.toml it writes audits it again identically; its
redacted release keeps the numbers as its own doc_id column and is audited again; the same run without the option is
refused in one line that names the file, its columns and the remedies."""

from __future__ import annotations

import json
import tomllib

import pandas as pd
from cli_checks import assert_one_line_error, ok
from conftest import run_cli, toy_frames, write_table

from cpa_core.io.columns import ROW_NUMBERING, ROW_NUMBERS

MAPPING = """
[columns.documents]
text = "post"
identity_id = "author"
"""


def blog_release(tmp_path):
    """An id-less release of the toy people, its registry and a configuration that maps the text and the author."""
    documents, registry = toy_frames(n_people=12, docs_per_person=5, groups=("g1",))
    blog = documents.drop(columns=["doc_id", "group"]).rename(columns={"text": "post", "identity_id": "author"})
    config = tmp_path / "audit.toml"
    config.write_text("[audit]\nconfidence = [0.8, 0.9]\n" + MAPPING, encoding="utf-8")
    return (write_table(blog[["author", "post"]], tmp_path / "blog.csv"),
            write_table(registry, tmp_path / "registry.csv"), config, blog)


def test_an_idless_release_is_audited_with_its_rows_numbered_and_audits_again_identically(tmp_path):
    documents, registry, config, blog = blog_release(tmp_path)
    first = tmp_path / "first"
    ok(run_cli("audit", "--documents", documents, "--registry", registry, "--config", config, "--number-rows",
               "--attacker", "tfidf", "--out", first))
    manifest = json.loads((first / "manifest.json").read_text(encoding="utf-8"))
    declared = manifest["config"]["data"]["documents"]
    assert declared["columns"] == {"doc_id": ROW_NUMBERS, "text": "post", "identity_id": "author"}
    assert declared["doc_ids"] == ROW_NUMBERING
    assert "1 for the first data row, the header excluded" in ROW_NUMBERING
    records = [json.loads(line) for line in (first / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(int(r["doc_id"]) for r in records) == list(range(1, len(blog) + 1))
    by_row = {r["doc_id"]: r["identity_id"] for r in records}
    assert all(by_row[str(row)] == author for row, author in enumerate(blog["author"], start=1))
    # the configuration it wrote carries the numbering: the reproduce command (no --number-rows) audits it again
    written = tomllib.loads((first / "audit.toml").read_text(encoding="utf-8"))
    assert written["columns"]["documents"]["doc_id"] == ROW_NUMBERS
    command = manifest["reproduce"]["command"].split()
    assert "--number-rows" not in command and command[:2] == ["cpa", "audit"]
    again = tmp_path / "again"
    args = [str(again) if previous == "--out" else str(first / "audit.toml") if previous == "--config" else word
            for previous, word in zip([None, *command[2:]], command[2:])]
    ok(run_cli("audit", *args))
    reproduced = json.loads((again / "manifest.json").read_text(encoding="utf-8"))
    assert reproduced["config_id"] == manifest["config_id"]
    assert reproduced["config"]["data"]["documents"]["doc_ids"] == ROW_NUMBERING
    assert json.loads((again / "summary.json").read_text(encoding="utf-8")) == \
        json.loads((first / "summary.json").read_text(encoding="utf-8"))
    assert (again / "documents.jsonl").read_text(encoding="utf-8") == \
        (first / "documents.jsonl").read_text(encoding="utf-8")


def test_an_idless_release_is_refused_unasked_naming_its_file_columns_and_remedies(tmp_path):
    documents, registry, config, _ = blog_release(tmp_path)
    done = run_cli("audit", "--documents", documents, "--registry", registry, "--config", config,
                   "--attacker", "tfidf", "--out", tmp_path / "out")
    assert_one_line_error(done, str(documents), "required column 'doc_id' is missing",
                          "found columns ['author', 'post']", "--number-rows",
                          "map one of the file's columns to doc_id")
    assert not (tmp_path / "out").exists()


def test_a_redacted_idless_release_keeps_its_row_numbers_and_is_audited_again(tmp_path):
    documents, registry, config, blog = blog_release(tmp_path)
    audit = tmp_path / "audit"
    ok(run_cli("audit", "--documents", documents, "--registry", registry, "--config", config, "--number-rows",
               "--attacker", "tfidf", "--out", audit, "--no-history"))
    ok(run_cli("redact", "--audit", audit, "--out", tmp_path / "search", "--no-history"))
    decisions = pd.read_csv(tmp_path / "search" / "decisions.csv", dtype=str, keep_default_na=False)
    withhold = decisions["action"] == "withhold"
    decisions.loc[withhold, "accept"] = "False"
    decisions.loc[decisions.index[withhold][:2], "accept"] = "True"
    withheld = sorted(decisions.loc[decisions.index[withhold][:2], "doc_id"], key=int)
    decisions.to_csv(tmp_path / "reviewed.csv", index=False)
    redacted = tmp_path / "redacted"
    done = ok(run_cli("redact", "--audit", audit, "--decisions", tmp_path / "reviewed.csv", "--out", redacted,
                      "--no-history"))
    # the release keeps each document's number as its doc_id: the withheld rows renumber nothing
    release = pd.read_csv(redacted / "blog-redacted.csv", dtype=str, keep_default_na=False)
    assert list(release.columns) == ["doc_id", "author", "post"]
    kept = [str(row) for row in range(1, len(blog) + 1) if str(row) not in withheld]
    assert release["doc_id"].tolist() == kept
    assert release["author"].tolist() == [blog["author"].iloc[int(row) - 1] for row in kept]
    # read as its input was, the ids its own column: audited again
    written = tomllib.loads((redacted / "audit.toml").read_text(encoding="utf-8"))
    assert written["columns"]["documents"] == {"text": "post", "identity_id": "author"}
    assert "the redacted release, audited again" in done.stderr, done.describe()
    records = [json.loads(line) for line in next((redacted / "audit").rglob("documents.jsonl")).read_text(
        encoding="utf-8").splitlines()]
    assert sorted((r["doc_id"] for r in records), key=int) == kept
