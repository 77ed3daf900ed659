"""A fuzz suite for reviewed decisions tables (``cpa redact --decisions``): a good table of the sample audit, then one
hostile change (formula cells, byte-order marks, UTF-16, cp1252, edits that change nothing or write a name, another
audit's configuration id, ids not in the release, huge cells, repeated rows, bad numbers and decisions), saved in
one of the encodings a spreadsheet writes.

Every case is either applied correctly (the release is the one its accepted edits make, computed here on its own)
or refused in one line naming the file (and the row and column where there is one); never a traceback. Bounded
(derandomised examples on one audit) so that it runs in seconds per case.
"""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
from cli_checks import assert_one_line_error, ok
from conftest import run_cli_inprocess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpa_core.redaction.suggestions import Edit, apply_edits

FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+1", "-2", "@SUM(A1)", "=cmd|' /C calc'!A0", "'quoted",
            "\tTab", "''"]
TRUE, FALSE = {"true", "yes", "1", "y", "t"}, {"false", "no", "0", "n", "f"}


@pytest.fixture(scope="module")
def reviewed(sample_paths, tmp_path_factory):
    """The sample audited and redacted once: the audit folder, the released texts and a good decisions table (the
    rows of the first 40 documents and of those that name Kraków, each that cp1252 can write, as cpa redact wrote
    them)."""
    base = tmp_path_factory.mktemp("fuzz-decisions")
    ok(run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                         "--config", sample_paths["config"], "--attacker", "tfidf", "--no-history", "--out",
                         base / "audit"))
    ok(run_cli_inprocess("redact", "--audit", base / "audit", "--out", base / "redacted"))
    with open(base / "redacted" / "decisions.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    frame = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    texts = dict(zip(frame["doc_id"], frame["text"]))
    first = set(list(dict.fromkeys(row["doc_id"] for row in rows))[:40]) | {d for d, t in texts.items() if "Kraków" in t}
    good = [row for row in rows if row["doc_id"] in first and _encodable("".join(row.values()))]
    assert any(not row["original"].isascii() for row in good)
    assert any(row["action"] == "withhold" for row in good) and sum(row["action"] == "edit" for row in good) > 20
    return {"base": base, "audit": base / "audit", "texts": texts, "rows": good,
            "config_id": json.loads((base / "audit" / "manifest.json").read_text())["config_id"]}


def _encodable(text: str) -> bool:
    try:
        text.encode("cp1252")
        return True
    except UnicodeEncodeError:
        return False


def _restored(value: str) -> str:
    return value[1:] if value.startswith("'") else value


def expected_release(texts: dict[str, str], rows: list[dict]) -> dict[str, str]:
    """The release a table makes, computed here: each accepted edit that changes its text made, each accepted
    withheld document left out."""
    edits: dict[str, list[Edit]] = {}
    withheld = set()
    for row in rows:
        row = {k: _restored(v) for k, v in row.items()}
        if row["accept"].strip().lower() not in TRUE:
            continue
        if row["action"] == "withhold":
            withheld.add(row["doc_id"])
        elif row["original"] != row["replacement"]:
            edits.setdefault(row["doc_id"], []).append(Edit(int(float(row["offset"])), int(float(row["length"])),
                                                            row["original"], row["replacement"], ""))
    return {d: apply_edits(t, edits.get(d, [])) for d, t in texts.items() if d not in withheld}


# one hostile change: (name, how it changes the rows given a row index and a payload, the error's words or None
# when the table is to be applied)
def _edit_rows(rows):
    """The accepted edits of the documents released (a withheld document's edits are not in the release)."""
    withheld = {row["doc_id"] for row in rows if row["action"] == "withhold" and row["accept"] == "True"}
    return [i for i, row in enumerate(rows) if row["action"] == "edit" and row["accept"] == "True"
            and row["doc_id"] not in withheld]


def _set(column, value):
    def change(rows, i, payload):
        rows[_edit_rows(rows)[i % len(_edit_rows(rows))]][column] = value(payload) if callable(value) else value
    return change


def _no_op(rows, i, payload):
    row = rows[_edit_rows(rows)[i % len(_edit_rows(rows))]]
    row["replacement"] = row["original"]


def _keeps(rows, i, payload):
    row = rows[_edit_rows(rows)[i % len(_edit_rows(rows))]]
    row["replacement"] = _restored(row["original"]) + " [REDACTED]"


def _insert(rows, i, payload):
    row = rows[_edit_rows(rows)[i % len(_edit_rows(rows))]]
    row.update(offset=row["offset"], length="0", original="", replacement="Margaret ")


def _repeat(rows, i, payload):
    rows.append(dict(rows[_edit_rows(rows)[i % len(_edit_rows(rows))]]))


def _repeat_withhold(rows, i, payload):
    rows.append(dict(next(row for row in rows if row["action"] == "withhold")))


def _foreign(rows, i, payload):
    rows[i % len(rows)]["config_id"] = "0123abcd4567"


def _blank_config(rows, i, payload):
    rows[i % len(rows)]["config_id"] = ""


def _no_config(rows, i, payload):
    for row in rows:
        row.pop("config_id")


def _formula_cells(rows, i, payload):
    for column in ("term", "reason"):
        rows[i % len(rows)][column] = payload


def _formula_id(rows, i, payload):
    rows[i % len(rows)]["doc_id"] = payload


CHANGES = {
    "none": (lambda rows, i, payload: None, None),
    "formula cells": (_formula_cells, None),
    "a formula as doc id": (_formula_id, "column 'doc_id'"),
    "an id not in the release": (_set("doc_id", "D99999"), "column 'doc_id'"),
    "a no-op edit": (_no_op, None),
    "an edit keeping its words": (_keeps, None),
    "a name in place of a word": (_set("replacement", "Margaret Thatcher"), "column 'replacement'"),
    "an inserted name": (_insert, "column 'replacement'"),
    "another audit's id": (_foreign, "column 'config_id'"),
    "a row naming no audit": (_blank_config, None),
    "no config_id column": (_no_config, None),
    "a huge original": (_set("original", lambda p: "x" * 1_000_000), "column 'original'"),
    "a huge reason": (_set("reason", lambda p: "=" + "y" * 1_000_000), None),
    "a huge placeholder run": (_set("replacement", lambda p: "[REDACTED] " * 50_000), None),
    "a repeated edit": (_repeat, "column 'offset'"),
    "a repeated withhold row": (_repeat_withhold, None),
    "an offset that is no number": (_set("offset", "1e400"), "column 'offset'"),
    "a negative length": (_set("length", "-3"), "column 'length'"),
    "a decision that is none": (_set("accept", "maybe"), "column 'accept'"),
    "a decision a spreadsheet writes": (_set("accept", "TRUE"), None),
}
ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "cp1252 declared", "cp1252 undeclared"]


def _file(rows: list[dict], encoding: str) -> tuple[bytes, str]:
    """The rows as a spreadsheet saves them in ``encoding`` (UTF-8 when cp1252 cannot write them), and the codec."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\r\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    text = buffer.getvalue()
    codec = encoding.split()[0]
    codec = "utf-8" if codec == "cp1252" and not _encodable(text) else codec
    return text.encode(codec), codec


@pytest.mark.parametrize("change", sorted(CHANGES))
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(encoding=st.sampled_from(ENCODINGS), row=st.integers(0, 10_000), payload=st.sampled_from(FORMULAS))
def test_a_hostile_table_is_applied_correctly_or_refused_in_one_line(reviewed, tmp_path_factory, change, encoding,
                                                                     row, payload):
    rows = [dict(r) for r in reviewed["rows"]]
    mutate, refusal = CHANGES[change]
    mutate(rows, row, payload)
    folder = tmp_path_factory.mktemp("case")
    path = folder / "reviewed.csv"
    data, codec = _file(rows, encoding)
    path.write_bytes(data)
    declared = ("--encoding", "cp1252") if encoding == "cp1252 declared" else ()
    done = run_cli_inprocess("redact", "--audit", reviewed["audit"], "--out", folder / "out", "--decisions", path,
                             *declared)
    assert "Traceback" not in done.output, done.describe()
    if codec == "cp1252" and not declared and not data.isascii():
        refusal = "declare the file's encoding with --encoding"
    if refusal is not None:
        line = assert_one_line_error(done, str(path), refusal)
        assert "Margaret" not in line and "xxxxxxxxxx" not in line
        return
    ok(done)
    released = pd.read_csv(folder / "out" / "documents-redacted.csv", dtype=str, keep_default_na=False)
    assert dict(zip(released["doc_id"], released["text"])) == expected_release(reviewed["texts"], rows), change
    summary = next(line for line in done.stderr_lines if "accepted edits" in line)
    if change == "a no-op edit":
        assert "1 no-op edit not applied" in summary
    if change == "an edit keeping its words":
        assert "1 edit keeps words of the original" in summary
    if change in ("a row naming no audit", "no config_id column"):
        assert any(line.startswith(f"cpa: warning: {path}") for line in done.stderr_lines)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=400) | st.text(max_size=300).map(lambda t: t.encode("utf-8")),
       prefix=st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff",
                               b"doc_id,action,offset,length,original,replacement,accept,config_id\r\n"]),
       suffix=st.sampled_from(["csv", "jsonl", "parquet"]))
def test_any_bytes_as_a_decisions_file_are_a_table_or_one_line_error(tmp_path_factory, data, prefix, suffix):
    from cpa_core.common.errors import CPAError
    from cpa_core.redaction.decisions import accepted, review_decisions

    path = tmp_path_factory.mktemp("bytes") / f"reviewed.{suffix}"
    path.write_bytes(prefix + data)
    texts = {"a": "Ann from Leeds", "b": "Bob"}
    try:
        table, notes = review_decisions(path, texts, "0123abcd4567")
    except CPAError as error:
        assert "\n" not in str(error) and str(error).startswith(str(path))
        return
    accepted(table)
    assert all("\n" not in note for note in notes)
