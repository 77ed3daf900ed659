"""Loading and validating documents and registries (cpa_core.io.tables): formats, column mapping, and one
error per kind of bad input, each naming the file, the row/column, what was expected and what was found (the
command line reading a latin-1 release: tests/integration/test_tables_cli.py)."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import numpy as np
import pandas as pd
import pytest
from conftest import toy_frames, write_table
from hypothesis import given, settings
from hypothesis import strategies as hst

from cpa_core.common.errors import ConfigError, CPAError, DataError
from cpa_core.io.reading import read_table
from cpa_core.io.tables import check_release, load_documents, load_registry, registry_share

DOCS_HEADER = "doc_id,text,identity_id\n"


def check(error: DataError, *parts: str) -> None:
    """Every part appears in the message (the file, row, column, expected, found)."""
    message = str(error)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


def write_bytes(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


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


def test_ndjson_and_pq_suffixes_and_explicit_format(tmp_path):
    documents, _ = toy_frames(n_people=2, docs_per_person=1)
    assert len(load_documents(write_table(documents, tmp_path / "d.ndjson"))) == 2
    assert len(load_documents(write_table(documents, tmp_path / "d.pq"))) == 2
    data = (tmp_path / "d.ndjson").read_bytes()
    assert len(load_documents(data, name="no-suffix", fmt="jsonl")) == 2
    with pytest.raises(DataError) as info:
        load_documents(data, name="x.jsonl", fmt="xml")
    check(info.value, "x.jsonl", "unknown format", "csv, jsonl or parquet", "'xml'")


# ------------------------------------------------------------------------------------------ column mapping

def test_column_mapping_for_documents_and_registry(tmp_path):
    docs = write_bytes(tmp_path, "notes.csv", b"note_id,note,person,ward\nN1,first note,A,w1\nN2,second note,B,w2\n")
    reg = write_bytes(tmp_path, "people.csv", b"pid,town\nA,York\nB,Leeds\n")
    loaded = load_documents(docs, columns={"doc_id": "note_id", "text": "note", "identity_id": "person"},
                            group_column="ward")
    assert loaded.frame.to_dict("list") == {"doc_id": ["N1", "N2"], "text": ["first note", "second note"],
                                            "identity_id": ["A", "B"], "group": ["w1", "w2"]}
    registry = load_registry(reg, columns={"identity_id": "pid"})
    assert registry.ids.tolist() == ["A", "B"] and registry.fields == ["town"]


def test_mapped_column_that_is_missing_is_named(tmp_path):
    docs = write_bytes(tmp_path, "notes.csv", b"note_id,note,person\nN1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "note_id", "text": "body", "identity_id": "person"})
    check(info.value, str(docs), "column 'body'", "'body'", "'text'", "note_id", "no such column")
    assert info.value.column == "body"


def test_mapping_onto_a_name_the_file_already_uses(tmp_path):
    """A file with the original ``text`` and the released ``anon_text``: mapping text -> anon_text must
    audit the released text (or refuse clearly), never crash on the duplicated column name."""
    docs = write_bytes(tmp_path, "release.csv",
                       b"doc_id,text,anon_text,identity_id\n1,Alice Smith of York,[NAME] of [CITY],A\n"
                       b"2,Bob Jones of Leeds,[NAME] of [CITY],B\n")
    try:
        loaded = load_documents(docs, columns={"text": "anon_text"})
    except DataError as error:  # a clear refusal is acceptable
        check(error, str(docs), "text")
    else:
        assert loaded.frame["text"].tolist() == ["[NAME] of [CITY]", "[NAME] of [CITY]"]


# --------------------------------------------------------------------------------------- whole-file errors

def test_missing_file(tmp_path):
    path = tmp_path / "nope.csv"
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "not found")


def test_directory_instead_of_file(tmp_path):
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    with pytest.raises(DataError) as info:
        load_documents(folder)
    check(info.value, str(folder), "directory", "expected a file")


@pytest.mark.parametrize("name", ["docs.xlsx", "docs.txt", "docs.json", "docs"])
def test_unsupported_extension(tmp_path, name):
    path = write_bytes(tmp_path, name, (DOCS_HEADER + "1,a,P1\n").encode())
    with pytest.raises(DataError) as info:
        load_documents(path)
    suffix = path.suffix or "no extension"
    check(info.value, str(path), "unsupported file type", ".csv, .jsonl or .parquet", f"'{suffix}'")


@pytest.mark.parametrize("name,data", [("empty.csv", b""), ("blank.csv", b"  \n\n"), ("empty.jsonl", b""),
                                       ("empty.parquet", b"")])
def test_empty_file(tmp_path, name, data):
    path = write_bytes(tmp_path, name, data)
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "empty", "expected a header and at least one row", "found no content")


def test_header_only(tmp_path):
    path = write_bytes(tmp_path, "header.csv", DOCS_HEADER.encode())
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "no rows", "expected at least one row", "found only a header")


def test_undecodable_bytes_are_located(tmp_path):
    data = (DOCS_HEADER + "1,caf\u00e9 visit,P1\n").encode("latin-1")
    path = write_bytes(tmp_path, "latin1.csv", data)
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "not valid UTF-8", "line 2", f"byte {data.index(0xE9)}", "expected UTF-8",
          "found byte 0xe9")


def test_undecodable_jsonl(tmp_path):
    path = write_bytes(tmp_path, "d.jsonl", '{"doc_id": 1, "text": "\u00e9", "identity_id": "A"}\n'.encode("utf-16"))
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "UTF-8", "line 1")


def test_utf8_bom_is_accepted(tmp_path):
    path = write_bytes(tmp_path, "bom.csv", b"\xef\xbb\xbf" + (DOCS_HEADER + "1,alpha,P1\n").encode())
    assert load_documents(path).frame["doc_id"].tolist() == ["1"]


@pytest.mark.parametrize("name,data,parts", [
    ("ragged.csv", b"doc_id,text,identity_id\nD1,fine,P1\nD2,a, b,c,P2\n", ["not a well-formed CSV table"]),
    ("garbage.parquet", b"\x00\x01\x02 not parquet at all", ["not a readable Parquet file"]),
    ("prose.jsonl", b"this is not json\n", ["line 1 is not valid JSON", "one JSON object per line"]),
    ("array.jsonl", b'{"doc_id": 1, "text": "a", "identity_id": "A"}\n[1, 2]\n',
     ["line 2 is not a JSON object", "one JSON object per line", "found list"]),
])
def test_non_tabular_files(tmp_path, name, data, parts):
    path = write_bytes(tmp_path, name, data)
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), *parts)


def test_csv_rows_with_more_fields_than_the_header_are_not_shifted(tmp_path):
    """Unquoted commas in every text: pandas silently turns the first field into an index and shifts the
    columns (doc_id <- first half of the text, text <- second half). It must be refused instead."""
    path = write_bytes(tmp_path, "unquoted.csv", (DOCS_HEADER + "D1,hello, world,P1\nD2,good, day,P2\n").encode())
    try:
        loaded = load_documents(path)
    except DataError as error:
        check(error, str(path))
    else:
        assert loaded.frame["doc_id"].tolist() == ["D1", "D2"], (
            f"columns shifted: read {loaded.frame.to_dict('list')}")


def test_prose_that_parses_as_one_column_reports_missing_columns(tmp_path):
    path = write_bytes(tmp_path, "letter.csv", b"Dear reader\nthis is a letter\n")
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "required column 'doc_id' is missing", "expected columns",
          "['doc_id', 'text', 'identity_id']", "found columns ['Dear reader']")


@pytest.mark.parametrize("missing", ["doc_id", "text", "identity_id"])
def test_missing_required_document_column(tmp_path, missing):
    columns = [c for c in ("doc_id", "text", "identity_id") if c != missing]
    frame = pd.DataFrame({c: ["x1", "x2"] for c in columns})
    path = write_table(frame, tmp_path / "docs.csv")
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), f"column '{missing}'", "is missing", "expected columns", f"found columns {columns}")
    assert info.value.column == missing


def test_missing_registry_id_column(tmp_path):
    path = write_bytes(tmp_path, "reg.csv", b"person,city\nA,York\n")
    with pytest.raises(DataError) as info:
        load_registry(path)
    check(info.value, str(path), "column 'identity_id'", "is missing", "found columns ['person', 'city']")


def test_group_column_that_does_not_exist(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "1,a,P1\n").encode())
    with pytest.raises(DataError) as info:
        load_documents(path, group_column="ward")
    check(info.value, str(path), "column 'ward'", "missing")


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


def test_read_table_returns_the_digest_of_the_raw_bytes(tmp_path):
    data = (DOCS_HEADER + "1,a,P1\n").encode()
    frame, digest = read_table(write_bytes(tmp_path, "d.csv", data))
    assert digest == hashlib.sha256(data).hexdigest() and frame.shape == (1, 3)


def test_errors_are_cpa_errors_not_config_errors():
    assert issubclass(DataError, CPAError) and not issubclass(DataError, ConfigError)


def test_a_blank_identity_marks_an_unlabelled_document(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "D0,fine,P0\nD1,alpha,\nD2,beta,   \n").encode())
    loaded = load_documents(path)
    assert loaded.frame["identity_id"].tolist() == ["P0", None, None] and len(loaded) == 3
    jsonl = write_bytes(tmp_path, "d.jsonl", b'{"doc_id": "D0", "text": "a", "identity_id": null}\n')
    assert load_documents(jsonl).frame["identity_id"].tolist() == [None]


# -------------------------------------------------------------------------------------------- guessing columns

from cpa_core.audit.project import ProjectConfig
from cpa_core.io.columns import DOCUMENT_SYNONYMS, REGISTRY_SYNONYMS, check_columns, guess_columns, mapping_problems
from cpa_core.io.reading import ENCODINGS, EncodingError, encoding_name, encoding_notes, encoding_preview
from cpa_core.report.metrics import summarize


@pytest.mark.parametrize("header,expected", [
    (["doc", "note", "subject"], {"doc_id": "doc", "text": "note", "identity_id": "subject", "group": None}),
    (["id", "text", "person_id"], {"doc_id": "id", "text": "text", "identity_id": "person_id", "group": None}),
    (["note_id", "note", "person", "mechanism"],
     {"doc_id": "note_id", "text": "note", "identity_id": "person", "group": "mechanism"}),
    (["Doc ID", "Released Text", "Patient-ID", "Split"],
     {"doc_id": "Doc ID", "text": "Released Text", "identity_id": "Patient-ID", "group": "Split"}),
    (["record_id", "body", "author_id", "source", "age"],
     {"doc_id": "record_id", "text": "body", "identity_id": "author_id", "group": "source"}),
    # a column of exactly our name wins over synonyms, which are then not ambiguous
    (["id", "doc_id", "text", "identity_id", "group", "subject"],
     {"doc_id": "doc_id", "text": "text", "identity_id": "identity_id", "group": "group"}),
    (["TEXT", "body", "doc_id", "pid"], {"doc_id": "doc_id", "text": "TEXT", "identity_id": "pid", "group": None}),
    # ambiguous: two candidates for one of our columns, so no guess for it (the others are still guessed)
    (["id", "record_id", "body", "person", "subject"],
     {"doc_id": None, "text": "body", "identity_id": None, "group": None}),
    (["Text", "TEXT", "body", "doc", "pid"], {"doc_id": "doc", "text": None, "identity_id": "pid", "group": None}),
    (["a", "b", "c"], {"doc_id": None, "text": None, "identity_id": None, "group": None}),
    ([], {"doc_id": None, "text": None, "identity_id": None, "group": None}),
])
def test_document_columns_are_guessed_from_their_names(header, expected):
    assert guess_columns(header, DOCUMENT_SYNONYMS) == expected


@pytest.mark.parametrize("header,expected", [
    (["subject", "age"], "subject"), (["person", "city"], "person"), (["id", "city"], "id"), (["pid"], "pid"),
    (["Identity ID", "id"], "Identity ID"), (["city", "identity_id"], "identity_id"),
    (["pid", "id", "city"], None), (["name", "city"], None),
])
def test_registry_id_column_is_guessed_from_its_name(header, expected):
    assert guess_columns(header, REGISTRY_SYNONYMS) == {"identity_id": expected}


def test_no_synonym_serves_two_columns():
    from cpa_core.io.columns import _normal

    for synonyms in (DOCUMENT_SYNONYMS, REGISTRY_SYNONYMS):
        seen = {}
        for ours, names in synonyms.items():
            assert _normal(ours) in {_normal(n) for n in names}
            for name in names:
                assert seen.setdefault(_normal(name), ours) == ours, (name, ours, seen[_normal(name)])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(header=hst.lists(hst.sampled_from(sorted({n for names in DOCUMENT_SYNONYMS.values() for n in names})
                                         + ["Doc ID", "TEXT", "Person", "x", "note "]), unique=True, max_size=8))
def test_a_guess_never_uses_a_column_twice_nor_invents_one(header):
    guess = guess_columns(header, DOCUMENT_SYNONYMS)
    chosen = [c for c in guess.values() if c is not None]
    assert len(chosen) == len(set(chosen)) and set(chosen) <= set(header)


def test_mapping_problems_name_what_is_missing_or_doubled():
    assert mapping_problems({"doc_id": "a", "text": "b", "identity_id": "c"}, ("doc_id", "text", "identity_id")) == []
    assert mapping_problems({"doc_id": "a", "text": None, "identity_id": None}, ("doc_id", "text", "identity_id")) \
        == ["no column chosen for 'text', 'identity_id'"]
    assert mapping_problems({"doc_id": "a", "text": "b", "identity_id": "c", "group": "a"},
                            ("doc_id", "text", "identity_id")) == [
        "the column 'a' is chosen for both 'doc_id' and 'group'"]


# ------------------------------------------------------------------------ missing-column messages: real columns

def test_a_mapped_column_the_file_lacks_lists_the_real_columns_and_the_mapping(tmp_path):
    docs = write_bytes(tmp_path, "documents.csv", b"doc,note,subject\nD1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "doc", "text": "body", "identity_id": "subject"})
    check(info.value, str(docs), "column 'text' (mapped from 'body') is missing",
          "the file has columns: 'doc', 'note', 'subject'",
          "mapping used: doc_id = 'doc', text = 'body' (no such column), identity_id = 'subject'")
    assert info.value.column == "body"


def test_a_required_column_left_unmapped_lists_the_files_columns_not_the_renamed_ones(tmp_path):
    docs = write_bytes(tmp_path, "documents.csv", b"note_id,note,person\nN1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "note_id", "text": "note"})
    check(info.value, str(docs), "required column 'identity_id' is missing",
          "found columns ['note_id', 'note', 'person']", "mapping used: doc_id = 'note_id', text = 'note'")
    assert "'doc_id', 'text', 'person'" not in str(info.value)
    registry = write_bytes(tmp_path, "people.csv", b"pid,town\nA,York\n")
    with pytest.raises(DataError) as info:
        load_registry(registry, columns={"identity_id": "person"})
    check(info.value, str(registry), "column 'identity_id' (mapped from 'person') is missing",
          "the file has columns: 'pid', 'town'", "identity_id = 'person' (no such column)")


def test_a_column_mapped_twice_is_refused(tmp_path):
    docs = write_bytes(tmp_path, "documents.csv", b"doc,note,subject\nD1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "doc", "text": "doc", "identity_id": "subject"})
    check(info.value, str(docs), "column 'doc' is mapped to both 'doc_id' and 'text'", "'doc', 'note', 'subject'")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "doc", "text": "note", "identity_id": "subject"}, group_column="note")
    check(info.value, "column 'note' is mapped to both 'text' and 'group'")


def test_the_listed_columns_are_cut_short(tmp_path):
    header = ",".join(f"{'c' * 60}{i}" for i in range(100))
    with pytest.raises(DataError) as info:
        load_documents((header + "\n" + ",".join("x" * 100) + "\n").encode(), name="wide.csv")
    message = str(info.value)
    assert "c" * 61 not in message and "… (70 more)" in message


def test_check_columns_is_what_the_loader_checks():
    with pytest.raises(DataError) as info:
        check_columns("d.csv", ["a", "b"], None, ("doc_id", "text", "identity_id"))
    check(info.value, "d.csv", "required column 'doc_id' is missing", "found columns ['a', 'b']")
    check_columns("d.csv", ["a", "b", "c"], {"doc_id": "a", "text": "b", "identity_id": "c"},
                  ("doc_id", "text", "identity_id"))


# ----------------------------------------------------------------------------------------------- encodings

ACCENTED = ["Zoë Müller, Bézier", "crème brûlée à l'hôtel", "Ångström; Øre; ß"]


def accented_csv(encoding: str, texts=ACCENTED) -> bytes:
    frame = pd.DataFrame({"doc_id": [f"D{i}" for i in range(len(texts))], "text": texts,
                          "identity_id": [f"P{i}" for i in range(len(texts))]})
    return frame.to_csv(index=False, lineterminator="\n").encode(encoding)


def test_a_latin1_csv_loads_like_its_utf8_twin_when_declared(tmp_path):
    latin = write_bytes(tmp_path, "latin.csv", accented_csv("latin-1"))
    utf8 = write_bytes(tmp_path, "utf8.csv", accented_csv("utf-8"))
    loaded = load_documents(latin, encoding="latin-1")
    assert loaded.frame.equals(load_documents(utf8).frame)
    assert loaded.frame["text"].tolist() == ACCENTED
    assert loaded.encoding == "latin-1" and load_documents(utf8).encoding == "utf-8"
    assert loaded.sha256 == hashlib.sha256(latin.read_bytes()).hexdigest()  # of the raw bytes
    assert loaded.report.notes == ()
    assert load_documents(latin, encoding="ISO-8859-1").encoding == "latin-1"


def test_a_latin1_csv_without_the_declaration_is_refused_with_its_position(tmp_path):
    data = accented_csv("latin-1")
    path = write_bytes(tmp_path, "latin.csv", data)
    with pytest.raises(EncodingError) as info:
        load_documents(path)
    offset = data.index("ë".encode("latin-1"))
    check(info.value, str(path), "row 1", "not valid UTF-8", "line 2", f"byte {offset}", "found byte 0xeb",
          "declare it, e.g. latin-1 or cp1252")
    assert (info.value.row, info.value.line, info.value.offset, info.value.encoding) == (1, 2, offset, "utf-8")
    message = str(info.value)
    assert "Zo" not in message and "\ufffd" not in message  # neither the text nor replaced characters
    assert isinstance(info.value, DataError)


def test_the_failing_row_counts_records_not_lines(tmp_path):
    data = (DOCS_HEADER + 'D1,"a text\non two lines",P1\n\nD2,plain,P2\nD3,caf\u00e9,P3\n').encode("latin-1")
    with pytest.raises(EncodingError) as info:
        load_documents(data, name="d.csv")
    check(info.value, "d.csv, row 3", "line 6")
    with pytest.raises(EncodingError) as info:
        load_documents("doc_id,t\u00e9xt,identity_id\nD1,a,P1\n".encode("latin-1"), name="d.csv")
    check(info.value, "d.csv: text is not valid UTF-8 (in the header, line 1, byte 8)")
    assert info.value.row is None


def test_the_position_counts_the_byte_order_mark():
    data = b"\xef\xbb\xbf" + (DOCS_HEADER + "D1,caf\u00e9,P1\n").encode("latin-1")
    with pytest.raises(EncodingError) as info:
        load_documents(data, name="bom.csv")
    check(info.value, "bom.csv, row 1", f"byte {data.index(0xE9)}", "found byte 0xe9")


def test_a_latin1_registry_and_jsonl(tmp_path):
    registry = "identity_id,city\nP0,Zürich\nP1,Besançon\n".encode("latin-1")
    assert load_registry(registry, name="r.csv", encoding="latin-1").frame["city"].tolist() == ["Zürich", "Besançon"]
    with pytest.raises(EncodingError) as info:
        load_registry(registry, name="r.csv")
    check(info.value, "r.csv, row 1", "not valid UTF-8")
    jsonl = '{"doc_id": "D1", "text": "Zoë", "identity_id": "P1"}\n'.encode("latin-1")
    assert load_documents(jsonl, name="d.jsonl", encoding="latin-1").frame["text"].tolist() == ["Zoë"]
    with pytest.raises(EncodingError) as info:
        load_documents(jsonl, name="d.jsonl")
    check(info.value, "d.jsonl: text is not valid UTF-8 (line 1")


def test_windows_1252_and_the_notes_that_keep_a_wrong_declaration_visible(tmp_path):
    texts = ["it\u2019s \u20ac5, Zoë"]  # a curly apostrophe and the euro sign exist in cp1252, not in latin-1
    data = accented_csv("cp1252", texts)
    assert load_documents(data, name="d.csv", encoding="cp1252").frame["text"].tolist() == texts
    as_latin = load_documents(data, name="d.csv", encoding="latin-1")  # used as declared, but said
    assert as_latin.frame["text"].tolist() != texts
    assert any("probably Windows-1252 (cp1252)" in note for note in as_latin.report.notes)
    utf8_as_latin = load_documents(accented_csv("utf-8"), name="d.csv", encoding="latin-1")
    assert any("also valid UTF-8" in note for note in utf8_as_latin.report.notes)
    with pytest.raises(EncodingError) as info:  # 0x81 is not a Windows-1252 character
        load_documents(DOCS_HEADER.encode() + b"D1,a\x81b,P1\n", name="d.csv", encoding="cp1252")
    check(info.value, "row 1", "not valid Windows-1252", "found byte 0x81")
    assert encoding_notes(accented_csv("latin-1"), "latin-1", "d.csv") == ()


def test_parquet_ignores_the_encoding(tmp_path):
    frame = pd.DataFrame({"doc_id": ["D1"], "text": ["Zoë"], "identity_id": ["P1"]})
    path = write_table(frame, tmp_path / "d.parquet")
    loaded = load_documents(path, encoding="latin-1")
    assert loaded.frame["text"].tolist() == ["Zoë"] and loaded.encoding == "utf-8"
    assert any("does not apply to Parquet" in note for note in loaded.report.notes)


@pytest.mark.parametrize("name,recorded", [("utf8", "utf-8"), ("UTF-8", "utf-8"), ("utf-8-sig", "utf-8"),
                                           ("latin1", "latin-1"), ("l1", "latin-1"), ("windows-1252", "cp1252"),
                                           ("cp1250", "cp1250")])
def test_encoding_names_are_recorded_in_one_spelling(name, recorded):
    assert encoding_name(name) == recorded


@pytest.mark.parametrize("name", ["klingon", "base64", "rot13", ""])
def test_an_unknown_or_non_text_encoding_is_refused(name):
    with pytest.raises(ConfigError) as info:
        load_documents((DOCS_HEADER + "D1,a,P1\n").encode(), name="d.csv", encoding=name)
    assert "unknown encoding" in str(info.value) and "latin-1" in str(info.value)


def test_the_preview_shows_the_accented_words_in_each_encoding():
    preview = encoding_preview(accented_csv("latin-1"), n=3)
    assert list(preview.columns) == list(ENCODINGS)
    assert preview["latin-1"].tolist() == ["Zoë", "Müller", "Bézier"]
    assert preview["utf-8"].isna().all()
    assert encoding_preview(b"doc_id,text\nD1,plain\n").empty


def test_the_project_configuration_passes_the_encoding(tmp_path):
    project = ProjectConfig(columns={"documents": {"text": "note"}, "registry": {"identity_id": "pid"}})
    documents = project.load_documents(b"doc_id,note,identity_id\nD1,Zo\xeb,P1\n", name="d.csv", encoding="latin-1")
    registry = project.load_registry(b"pid,city\nP1,Z\xfcrich\n", name="r.csv", encoding="cp1252")
    assert (documents.frame["text"].tolist(), documents.encoding) == (["Zoë"], "latin-1")
    assert (registry.frame["city"].tolist(), registry.encoding) == (["Zürich"], "cp1252")


@settings(max_examples=150, deadline=None, derandomize=True)
@given(texts=hst.lists(hst.text(hst.characters(codec="latin-1"), min_size=1, max_size=40).filter(str.strip),
                       min_size=1, max_size=5))
def test_any_latin1_text_round_trips_through_a_latin1_csv(texts):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)  # a bare "\r" is a line break
    writer.writerow(["doc_id", "text", "identity_id"])
    writer.writerows([f"D{i}", text, f"P{i}"] for i, text in enumerate(texts))
    loaded = load_documents(buffer.getvalue().encode("latin-1"), name="d.csv", encoding="latin-1")
    assert loaded.frame["text"].tolist() == texts


@pytest.mark.parametrize("body, row", [
    ("d1,some text,p1\nd2,cut off\nd3,more text,p3\n", 2),         # missing separators
    ("d1,some text,p1\nd2,a line\rbreak,p2\n", 2),                  # a bare carriage return in an unquoted field
])
def test_a_row_shorter_than_the_header_is_refused_with_its_number(body, row):
    """A padded row would silently become a document without identity (unlabelled): refused instead."""
    with pytest.raises(DataError, match=rf"not a well-formed CSV table \(row {row} has 2 of the header's 3 fields"):
        load_documents(("doc_id,text,identity_id\n" + body).encode(), name="docs.csv")
    quoted = 'doc_id,text,identity_id\nd1,"a line\rbreak",p1\n\nd2,text,p2\n'  # quoted breaks and blank lines are fine
    assert list(load_documents(quoted.encode(), name="docs.csv").frame["identity_id"]) == ["p1", "p2"]
