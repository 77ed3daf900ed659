"""Loading and validating documents and registries (cpa_core.io.tables): every format, one error per kind of bad
row, each naming the file, the row/column, what was expected and what was found, dropped rows, and the open world
(reading a file as a whole, encodings: tests/io/test_reading.py; column mapping: tests/io/test_columns.py; the
command line reading a latin-1 release: tests/integration/test_tables_cli.py)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from conftest import toy_frames, write_table
from table_files import DOCS_HEADER, check, write_bytes

from cpa_core.common.errors import CPAError, DataError
from cpa_core.io.tables import check_release, load_documents, load_registry, registry_share
from cpa_core.report.metrics import summarize

# ---------------------------------------------------------------------------------------------- formats

@pytest.mark.parametrize("suffix", ["csv", "jsonl", "parquet"])
def test_documents_load_from_every_format(tmp_path, suffix):
    documents, _ = toy_frames(n_people=3, docs_per_person=2)
    path = write_table(documents, tmp_path / f"docs.{suffix}")
    loaded = load_documents(path)
    assert list(loaded.frame.columns) == ["doc_id", "text", "identity_id", "group"]
    assert loaded.frame["doc_id"].tolist() == documents["doc_id"].tolist()
    assert loaded.frame["text"].tolist() == documents["text"].tolist()
    assert loaded.frame["identity_id"].tolist() == documents["identity_id"].tolist()
    assert loaded.frame["group"].tolist() == documents["group"].tolist()
    assert loaded.has_groups and len(loaded) == 6
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.file == str(path)
    assert loaded.report.n_read == loaded.report.n_kept == 6 and loaded.report.rejected == ()


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "parquet"])
def test_registry_loads_from_every_format_with_any_fields(tmp_path, suffix):
    _, registry = toy_frames(n_people=5)
    registry["age"] = [31, 42, 53, 64, 75]
    path = write_table(registry, tmp_path / f"registry.{suffix}")
    loaded = load_registry(path)
    assert loaded.ids.tolist() == [f"P{i:03d}" for i in range(5)]
    assert loaded.fields == ["city", "occupation", "keywords", "secret", "age"]
    assert len(loaded) == 5 and loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_documents_without_group_column_have_no_groups(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "1,alpha,P1\n2,beta,P2\n").encode())
    loaded = load_documents(path)
    assert not loaded.has_groups
    assert loaded.frame["doc_id"].tolist() == ["1", "2"]


def test_loading_from_bytes_uses_the_given_name(tmp_path):
    loaded = load_documents((DOCS_HEADER + "1,alpha,P1\n").encode(), name="upload.csv")
    assert loaded.file == "upload.csv" and len(loaded) == 1
    with pytest.raises(DataError) as info:
        load_documents((DOCS_HEADER + "1,,P1\n").encode(), name="upload.csv")
    check(info.value, "upload.csv", "row 1", "column 'text'")


def test_numeric_ids_are_errors_not_silent_mismatches(tmp_path):
    """Ids are compared as text: a JSONL 7 would never match "007" in a CSV registry, so it is refused."""
    lines = [{"doc_id": "D1", "text": "alpha", "identity_id": 7}]
    path = write_bytes(tmp_path, "d.jsonl", "\n".join(json.dumps(r) for r in lines).encode())
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, "row 1", "column 'identity_id'", "ids are compared as text", "the number 7")
    csv_path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D1,alpha,NaN\n").encode())
    with pytest.raises(DataError) as info:
        load_documents(csv_path)
    check(info.value, "column 'identity_id'", "the missing-value marker 'NaN'")
    twice = write_bytes(tmp_path, "t.csv", b"doc_id,text,doc_id,identity_id\nD1,alpha,D2,P1\n")
    with pytest.raises(DataError) as info:
        load_documents(twice)
    check(info.value, "column 'doc_id' appears more than once", "unique column names")


# ------------------------------------------------------------------------------------------- row errors

def test_duplicate_doc_id_names_both_rows(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D1,a,P1\nD2,b,P1\nD1,c,P2\n").encode())
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "row 3", "column 'doc_id'", "duplicate id 'D1'", "expected unique ids",
          "found the same id in row 1")
    assert (info.value.row, info.value.column) == (3, "doc_id")


def test_rows_are_records_not_lines(tmp_path):
    """Row numbers count records from 1 (header excluded), even with multi-line quoted texts."""
    path = write_bytes(tmp_path, "d.csv",
                       (DOCS_HEADER + '1,"line one\nline two\nline three",P1\n2,ok,P2\n3,   ,P3\n').encode())
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, "row 3", "column 'text'")


@pytest.mark.parametrize("row,column,found", [
    (",alpha,P1", "doc_id", "found an empty string"),
    ("   ,alpha,P1", "doc_id", "found an empty string"),
    ("D1,,P1", "text", "found an empty string"),
    ("D1,  \t ,P1", "text", "found an empty string"),
])
def test_missing_values_in_csv(tmp_path, row, column, found):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D0,fine,P0\n" + row + "\n").encode())
    with pytest.raises(DataError) as info:
        load_documents(path)
    expected = "expected non-empty text" if column == "text" else "expected a non-empty text id"
    check(info.value, str(path), "row 2", f"column '{column}'", expected, found)


@pytest.mark.parametrize("record,column,found", [
    ({"doc_id": "D1", "text": float("nan"), "identity_id": "P1"}, "text", "an empty cell"),
    ({"doc_id": "D1", "text": None, "identity_id": "P1"}, "text", "an empty cell"),
    ({"doc_id": "D1", "text": 42, "identity_id": "P1"}, "text", "the number 42"),
    ({"doc_id": "D1", "text": ["a", "list"], "identity_id": "P1"}, "text", "a value of type list"),
    ({"doc_id": 1.5, "text": "alpha", "identity_id": "P1"}, "doc_id", "the number 1.5"),
    ({"doc_id": True, "text": "alpha", "identity_id": "P1"}, "doc_id", "a value of type bool"),
    ({"doc_id": "D1", "text": "alpha", "identity_id": {"id": 1}}, "identity_id", "a value of type dict"),
])
def test_nan_and_wrong_types_in_jsonl(tmp_path, record, column, found):
    good = {"doc_id": "D0", "text": "fine", "identity_id": "P0"}
    lines = [json.dumps(good), json.dumps(record)]  # json.dumps writes NaN for float('nan')
    path = write_bytes(tmp_path, "d.jsonl", "\n".join(lines).encode())
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "row 2", f"column '{column}'", "expected", found)
    assert (info.value.row, info.value.column) == (2, column)


def test_nan_in_parquet(tmp_path):
    frame = pd.DataFrame({"doc_id": ["D0", "D1"], "text": ["fine", None], "identity_id": ["P0", "P1"]})
    path = write_table(frame, tmp_path / "d.parquet")
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "row 2", "column 'text'", "expected non-empty text", "found an empty cell")


def test_missing_group_label_is_rejected(tmp_path):
    path = write_bytes(tmp_path, "d.csv", b"doc_id,text,identity_id,ward\n1,a,P1,w1\n2,b,P2,\n")
    with pytest.raises(DataError) as info:
        load_documents(path, group_column="ward")
    check(info.value, "row 2", "column 'group'", "expected a group label")


def test_registry_duplicate_and_missing_ids(tmp_path):
    path = write_bytes(tmp_path, "reg.csv", b"identity_id,city\nA,York\nB,Leeds\nA,Hull\n")
    with pytest.raises(DataError) as info:
        load_registry(path)
    check(info.value, str(path), "row 3", "column 'identity_id'", "duplicate id 'A'", "found the same id in row 1")
    path = write_bytes(tmp_path, "reg2.csv", b"identity_id,city\nA,York\n,Leeds\n")
    with pytest.raises(DataError) as info:
        load_registry(path)
    check(info.value, str(path), "row 2", "column 'identity_id'", "found an empty string")


# ---------------------------------------------------------------------------------------- on_invalid=drop

def test_drop_keeps_valid_rows_and_reports_rejected_ones(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D1,alpha,P1\n"   # 1 ok
                                                         "D2,,P1\n"         # 2 empty text
                                                         ",beta,P2\n"       # 3 missing id
                                                         "D1,gamma,P2\n"    # 4 duplicate
                                                         "D5,delta,\n"      # 5 unknown identity: kept
                                                         "D6,epsilon,P3\n"  # 6 ok
                                                         ).encode())
    loaded = load_documents(path, on_invalid="drop")
    assert loaded.frame["doc_id"].tolist() == ["D1", "D5", "D6"]
    assert loaded.frame["text"].tolist() == ["alpha", "delta", "epsilon"]
    assert loaded.frame["identity_id"].tolist() == ["P1", None, "P3"]
    report = loaded.report
    assert (report.file, report.n_read, report.n_kept) == (str(path), 6, 3)
    assert [(r.row, r.column) for r in sorted(report.rejected, key=lambda r: r.row)] == [
        (2, "text"), (3, "doc_id"), (4, "doc_id")]
    reasons = {r.row: r.reason for r in report.rejected}
    assert "duplicate id 'D1'" in reasons[4] and "row 1" in reasons[4]
    assert "expected non-empty text" in reasons[2] and "found an empty string" in reasons[2]
    frame = report.to_frame()
    assert list(frame.columns) == ["row", "column", "reason"] and len(frame) == 3
    assert report.to_dict()["n_kept"] == 3 and len(report.to_dict()["rejected"]) == 3


def test_drop_in_registry(tmp_path):
    path = write_bytes(tmp_path, "reg.csv", b"identity_id,city\nA,York\n,Leeds\nA,Hull\nB,Bath\n")
    registry = load_registry(path, on_invalid="drop")
    assert registry.ids.tolist() == ["A", "B"]
    assert registry.frame["city"].tolist() == ["York", "Bath"]
    assert sorted(r.row for r in registry.report.rejected) == [2, 3]


def test_drop_with_nothing_left_is_an_error(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D1,,P1\nD2, ,P2\n").encode())
    with pytest.raises(DataError) as info:
        load_documents(path, on_invalid="drop")
    check(info.value, str(path), "no valid document", "2 rejected rows")


def test_unknown_on_invalid_mode_is_refused(tmp_path):
    """A typo such as on_invalid="raise" must not silently switch to dropping rows."""
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D1,,P1\nD2,beta,P2\n").encode())
    with pytest.raises(CPAError):
        load_documents(path, on_invalid="raise")
    with pytest.raises(CPAError):
        load_registry(write_bytes(tmp_path, "r.csv", b"identity_id\nA\n\n"), on_invalid="ignore")


# ------------------------------------------------------------------------------------------- open world

def test_identities_absent_from_the_registry_are_kept_and_counted_as_misses(tmp_path):
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.io.knowledge import KnowledgeLevel

    documents, registry = toy_frames(n_people=10, docs_per_person=4, n_outsiders=10)
    docs = load_documents(write_table(documents, tmp_path / "d.csv"))
    reg = load_registry(write_table(registry, tmp_path / "r.csv"))
    assert len(docs) == 50 and docs.report.rejected == ()
    assert registry_share(docs, reg) == pytest.approx(0.8) == check_release(docs, reg)
    level = KnowledgeLevel("K", ("city", "occupation", "keywords"))
    attacker = TfidfAttacker()
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), confidences=(0.8,), n_cal=25, n_test=25, protocol="split")
    result = run_audit(docs, reg, attacker, config)
    truth = result.test_split.truth_ids
    outsiders = np.array([str(t).startswith("X") for t in truth])
    assert (~result.test_split.in_pool == outsiders).all()
    entry = summarize(result).level(0.8)
    assert entry.candidate_miss_rate == pytest.approx(outsiders.mean())
    cert = result.certificate(0.8)
    assert not cert.covered[outsiders].any()


def test_a_blank_identity_marks_an_unlabelled_document(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D0,fine,P0\nD1,alpha,\nD2,beta,   \n").encode())
    loaded = load_documents(path)
    assert loaded.frame["identity_id"].tolist() == ["P0", None, None] and len(loaded) == 3
    jsonl = write_bytes(tmp_path, "d.jsonl", b'{"doc_id": "D0", "text": "a", "identity_id": null}\n')
    assert load_documents(jsonl).frame["identity_id"].tolist() == [None]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_field_above_the_stated_bound_is_refused_or_its_row_dropped(tmp_path, suffix):
    """A field longer than MAX_FIELD_CHARS (10 million characters) is refused in one line naming the file, the
    row, the column, the bound and the field's length, never its text; with on_invalid="drop" its row is dropped
    and reported like any invalid row, in every format. A 300,000-character document is kept whole."""
    from cpa_core.io.reading import MAX_FIELD_CHARS

    too_long = "secretword " * (MAX_FIELD_CHARS // 11) + "x" * (MAX_FIELD_CHARS % 11 + 1)
    long = "word " * 60_000
    frame = pd.DataFrame({"doc_id": ["d1", "d2", "d3"], "text": [long, too_long, "short"],
                          "identity_id": ["P1", "P2", "P3"]})
    path = write_table(frame, tmp_path / f"documents{suffix}")
    with pytest.raises(DataError) as info:
        load_documents(path)
    message = str(info.value)
    assert message == (f"{path}, row 2, column 'text': field too long; expected at most 10,000,000 characters in a "
                       "field, found 10,000,001 characters"), message
    assert "secretword" not in message and "\n" not in message
    dropped = load_documents(path, on_invalid="drop")
    assert dropped.frame["doc_id"].tolist() == ["d1", "d3"] and dropped.frame["text"].tolist() == [long, "short"]
    assert [(r.row, r.column) for r in dropped.report.rejected] == [(2, "text")]
    assert "found 10,000,001 characters" in dropped.report.rejected[0].reason


def test_a_field_above_the_bound_is_said_once_and_its_id_is_not_taken():
    """The over-long row is rejected once (at its first over-long column), and its id, never validated, does not
    make a later row with the same id a duplicate. A registry's profile fields have the same bound."""
    from cpa_core.io.reading import MAX_FIELD_CHARS

    too_long = "y" * (MAX_FIELD_CHARS + 5)
    data = ('{"doc_id": "d1", "text": "%s", "identity_id": "%s"}\n' % (too_long, too_long)
            + '{"doc_id": "d1", "text": "short", "identity_id": "P2"}\n').encode()
    documents = load_documents(data, name="docs.jsonl", on_invalid="drop")
    assert documents.frame["doc_id"].tolist() == ["d1"] and documents.frame["identity_id"].tolist() == ["P2"]
    assert [(r.row, r.column) for r in documents.report.rejected] == [(1, "text")]
    registry = ('{"identity_id": "P1", "profile": "short"}\n'
                '{"identity_id": "P2", "profile": "%s"}\n' % too_long).encode()
    with pytest.raises(DataError, match=r"^registry.jsonl, row 2, column 'profile': field too long; expected at most "
                                        r"10,000,000 characters in a field, found 10,000,005 characters$"):
        load_registry(registry, name="registry.jsonl")
    kept = load_registry(registry, name="registry.jsonl", on_invalid="drop")
    assert kept.ids.tolist() == ["P1"] and [(r.row, r.column) for r in kept.report.rejected] == [(2, "profile")]
