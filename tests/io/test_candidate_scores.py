"""An outside attacker's output read as a long table ``doc_id, candidate_id, score`` (cpa_core.io.candidate_scores):
read column by column (int32 codes of the ids, float64 scores), every row checked, and one error per bad row naming
the file, the row, the column, what was expected and what was found, as the file wrote it, in CSV, JSONL and Parquet
alike; the same result as a row-by-row reading on random tables (what the scores mean:
tests/attack/attackers/test_imported.py)."""

from __future__ import annotations

import hashlib
import io
import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import cpa_core.io.candidate_scores as candidate_scores
from cpa_core.attack.attackers.imported import load_candidate_scores
from cpa_core.common.errors import DataError
from cpa_core.io.candidate_scores import (_digest, _first_repeat, _first_row_order, _number, _text_floats,
                                          first_refused, read_candidate_scores)
from cpa_core.io.reading import read_table
from cpa_core.io.tables import _as_id, _describe, _is_missing

HEADER = "doc_id,candidate_id,score\n"
FORMATS = ("csv", "jsonl", "parquet")


def encode(rows, fmt: str, types=None) -> bytes:
    """The rows ``(doc_id, candidate_id, score)`` as a file: CSV cells as text (``None`` an empty cell), JSONL values
    as JSON (NaN and Infinity as Python writes them), Parquet columns of the given pyarrow ``types`` (inferred)."""
    if fmt == "csv":
        return (HEADER + "".join(",".join("" if v is None else str(v) for v in row) + "\n" for row in rows)).encode()
    if fmt == "jsonl":
        return "".join(json.dumps(dict(zip(("doc_id", "candidate_id", "score"), row))) + "\n" for row in rows).encode()
    types = types or {}
    table = pa.table({name: pa.array([row[i] for row in rows], type=types.get(name))
                      for i, name in enumerate(("doc_id", "candidate_id", "score"))})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def read(rows, fmt: str, types=None, **kwargs):
    return read_candidate_scores(encode(rows, fmt, types), name=f"s.{fmt}", **kwargs)


def as_rows(scores) -> list[tuple[str, str, float]]:
    return list(zip(scores.doc_ids[scores.doc_codes].tolist(), scores.candidate_ids[scores.candidate_codes].tolist(),
                    scores.scores.tolist()))


# ------------------------------------------------------------------------------------------ good tables

def test_a_csv_table_by_hand():
    data = (HEADER + "d1,a,0.5\nd1, b ,2\nd2,a,-1e-3\n").encode()
    scores = read_candidate_scores(data, name="scores.csv")
    assert scores.file == "scores.csv" and scores.sha256 == hashlib.sha256(data).hexdigest() and len(scores) == 3
    assert scores.doc_ids.tolist() == ["d1", "d2"] and scores.doc_codes.tolist() == [0, 0, 1]
    assert scores.candidate_ids.tolist() == ["a", "b"] and scores.candidate_codes.tolist() == [0, 1, 0]  # trimmed
    assert scores.scores.tolist() == [0.5, 2.0, -0.001]
    assert scores.doc_codes.dtype == np.int32 and scores.candidate_codes.dtype == np.int32
    assert scores.scores.dtype == np.float64
    # the scores a kind refuses keep their text as written: the first negative, the first that is no rank
    assert scores.written == {3: "'-1e-3'", 1: "'0.5'"} and scores.found(3) == "'-1e-3'"
    frame = scores.frame  # a view for display: categorical ids, indexed by the row in the file
    assert frame.index.tolist() == [1, 2, 3] and frame.index.name == "row"
    assert frame["doc_id"].tolist() == ["d1", "d1", "d2"] and frame["doc_id"].nunique() == 2
    assert frame["candidate_id"].tolist() == ["a", "b", "a"] and frame["score"].tolist() == [0.5, 2.0, -0.001]


def test_a_jsonl_table_with_its_columns_mapped(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"doc": "d1", "person": "a", "p": 0.25}\n{"doc": "d1", "person": "b", "p": 1}\n',
                    encoding="utf-8")
    scores = read_candidate_scores(path, columns={"doc_id": "doc", "candidate_id": "person", "score": "p"})
    assert scores.file == str(path) and scores.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert as_rows(scores) == [("d1", "a", 0.25), ("d1", "b", 1.0)]
    assert scores.written == {1: "0.25"}  # the first score that is no rank, as JSON wrote it


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_columns_mapped_and_others_ignored(tmp_path, fmt):
    frame = pd.DataFrame({"x": [1, 2], "doc": ["d1", "d2"], "person": ["a", "b"], "p": [0.5, 1.5], "z": ["é", "ü"]})
    path = tmp_path / f"s.{fmt}"
    frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path, index=False)
    scores = read_candidate_scores(path, columns={"doc_id": "doc", "candidate_id": "person", "score": "p"})
    assert as_rows(scores) == [("d1", "a", 0.5), ("d2", "b", 1.5)]
    assert scores.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_parquet_table_keeps_its_types(tmp_path):
    path = tmp_path / "s.parquet"
    pd.DataFrame({"doc_id": ["d1", "d2"], "candidate_id": ["a", "a"], "score": [0.75, 3.0]}).to_parquet(path)
    scores = read_candidate_scores(path)
    assert as_rows(scores) == [("d1", "a", 0.75), ("d2", "a", 3.0)]
    ints = read([("d1", "a", -2), ("d2", "a", 3)], "parquet", {"score": pa.int64()})
    assert ints.scores.tolist() == [-2.0, 3.0] and ints.written == {1: "-2"}  # as written: an integer
    floats = read([("d1", "a", 0.1)], "parquet", {"score": pa.float32()})
    assert floats.scores.tolist() == [float(np.float32(0.1))]  # the float32 value, exactly


def test_csv_cells_as_python_reads_numbers():
    """Spaces around a number, underscores between digits: read as Python's float reads them, whatever the chunk."""
    scores = read([("d1", "a", " 0.5"), ("d1", "b", "1_000"), ("d1", "c", "+.5e-3"), ("d1", "d", "-0")], "csv")
    assert scores.scores.tolist() == [0.5, 1000.0, 0.0005, -0.0] and math.copysign(1, scores.scores[3]) == -1
    assert scores.written == {1: "' 0.5'"}  # the first that is no rank; none negative (-0 is not below 0)


def test_quoted_line_breaks_bom_and_blank_lines():
    data = ('\ufeff' + HEADER + 'd1,"a\nb",1\n\n"d,2",c,2\r\n').encode()
    assert as_rows(read_candidate_scores(data, name="s.csv")) == [("d1", "a\nb", 1.0), ("d,2", "c", 2.0)]


def test_ids_are_listed_in_the_order_of_their_first_row():
    """Even when a Parquet file's dictionary lists them in another order, with values no row uses."""
    doc = pa.DictionaryArray.from_arrays(pa.array([2, 0, 2, 1], pa.int32()), pa.array(["z", "y", "x", "unused"]))
    table = pa.table({"doc_id": doc, "candidate_id": ["a", "a", "b", "a"], "score": [1.0, 2.0, 3.0, 4.0]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    scores = read_candidate_scores(buffer.getvalue(), name="s.parquet")
    assert scores.doc_ids.tolist() == ["x", "z", "y"] and scores.doc_codes.tolist() == [0, 1, 0, 2]
    assert as_rows(scores) == [("x", "a", 1.0), ("z", "a", 2.0), ("x", "b", 3.0), ("y", "a", 4.0)]


@pytest.mark.parametrize("codes, values, expected_codes, expected_values", [
    ([0, 1, 0, 2], ["a", "b", "c", "d"], [0, 1, 0, 2], ["a", "b", "c"]),  # in order; the unused value dropped
    ([2, 0, 2, 1], ["a", "b", "c"], [0, 1, 0, 2], ["c", "a", "b"]),
    ([-1, 1, -1, 0], ["a", "b"], [-1, 0, -1, 1], ["b", "a"]),  # missing cells stay missing
    ([-1, -1], ["a"], [-1, -1], []),
])
def test_first_row_order(codes, values, expected_codes, expected_values, monkeypatch):
    for block in (1, 2, 1 << 20):
        monkeypatch.setattr(candidate_scores, "ROWS_AT_ONCE", block)
        renumbered, ordered = _first_row_order(np.array(codes, dtype=np.int32), values)
        assert renumbered.tolist() == expected_codes and ordered == expected_values


def test_the_checksum_is_read_in_blocks(tmp_path, monkeypatch):
    data = (HEADER + "".join(f"dé,ü{i},1\n" for i in range(50))).encode()
    path = tmp_path / "s.csv"
    path.write_bytes(data)
    for block in (1, 2, 3, 7, 1 << 22):  # a character's bytes split between blocks is still UTF-8
        monkeypatch.setattr(candidate_scores, "BLOCK", block)
        assert _digest(path) == (hashlib.sha256(data).hexdigest(), True)
        assert _digest(data) == (hashlib.sha256(data).hexdigest(), True)
        assert _digest(data[:-3] + b"\xe9\n")[1] is False
        assert as_rows(read_candidate_scores(path))[0] == ("dé", "ü0", 1.0)


# ------------------------------------------------------------------------------------------ bad rows

def message(fmt: str, row: int, column: str, problem: str, expected: str, found: str) -> str:
    return f"s.{fmt}, row {row}, column '{column}': {problem}; expected {expected}, found {found}"


SCORE = ("score", "invalid score", "a finite number")
ID = ("invalid identifier", "a non-empty text id")
BAD_ROWS = [  # (rows, Parquet types, row, column, problem, expected, found per format: CSV, JSONL, Parquet)
    ([("d1", "a", 0.5), ("d1", "b", float("inf"))], None, 2, *SCORE, ("'inf'", "inf", "inf")),
    ([("d1", "a", float("nan"))], None, 1, *SCORE, ("'nan'", "nan", "nan")),
    ([("d1", "a", 0.5), ("d1", "b", None)], None, 2, *SCORE, ("''", "nan", "nan")),  # a number column: NaN
    ([("d1", "a", "0.5"), ("d1", "b", "high")], None, 2, *SCORE, ("'high'", "'high'", "'high'")),
    ([("d1", "a", True)], None, 1, *SCORE, ("'True'", "True", "True")),
    ([("d1", "a", 0.5), (" ", "b", 0.5)], None, 2, "doc_id", *ID, ("an empty string",) * 3),
    ([("d1", "NaN", 0.5)], None, 1, "candidate_id", *ID, ("the missing-value marker 'NaN'",) * 3),
    ([("d1", "a", 0.5), ("d1", None, 0.5)], None, 2, "candidate_id", *ID,
     ("an empty string", "an empty cell", "an empty cell")),
    ([(7, "a", 1.0), (8, "b", 1.0)], {"doc_id": pa.int64()}, 1, "doc_id", *ID,
     (None, "the number 7", "the number 7")),  # ids are text: a number is none (CSV cells are text)
    ([("d1", "a", "1.0"), (None, "b", "x")], None, 2, "doc_id", *ID, ("an empty string", "an empty cell",
                                                                       "an empty cell")),  # the id first
    ([("d1", "a", 0.5), ("d1", "b", 0.2), ("d1", "a", 0.3)], None, 3, "candidate_id",
     "candidate 'a' listed twice for document 'd1'", "one row per (doc_id, candidate_id)",
     ("the same pair in row 1",) * 3),
    ([("d1", "a", 0.5), (" d1 ", "a ", 0.2), ("d2", "", 0.3)], None, 2, "candidate_id",  # the same once trimmed,
     "candidate 'a' listed twice for document 'd1'", "one row per (doc_id, candidate_id)",  # before a bad id
     ("the same pair in row 1",) * 3),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows, types, row, column, problem, expected, found", BAD_ROWS)
def test_a_bad_row_is_one_line_naming_it(fmt, rows, types, row, column, problem, expected, found):
    found = found[FORMATS.index(fmt)]
    if found is None:
        pytest.skip("not a case of this format")
    if fmt == "parquet" and types is None and any(isinstance(r[2], str) for r in rows):
        types = {"score": pa.string()}
    with pytest.raises(DataError) as info:
        read(rows, fmt, types)
    text = str(info.value)
    assert text == message(fmt, row, column, problem, expected, found)
    assert "\n" not in text and (info.value.row, info.value.column) == (row, column)


def test_the_first_bad_row_is_said_whatever_its_problem():
    rows = [("d1", "a", 1.0), ("d1", "b", "x"), ("", "c", 1.0), ("d1", "a", 2.0)]
    with pytest.raises(DataError) as info:
        read(rows, "csv")
    assert info.value.row == 2 and info.value.column == "score"
    with pytest.raises(DataError) as info:
        read([("d1", "a", 1.0), ("d1", "a", 1.0), ("", "c", "x")], "csv")
    assert info.value.row == 2 and "listed twice" in str(info.value)


def test_numeric_ids_are_refused():
    lines = [{"doc_id": 7, "candidate_id": "a", "score": 0.9}, {"doc_id": 7, "candidate_id": "b", "score": 0.1}]
    with pytest.raises(DataError) as info:
        load_candidate_scores("\n".join(json.dumps(r) for r in lines).encode(), name="s.jsonl")
    assert "row 1" in str(info.value) and "the number 7" in str(info.value)


@pytest.mark.parametrize("data, name, columns, text", [
    (b"doc_id,candidate,score\nd1,a,1\n", "s.csv", None, "required column 'candidate_id' is missing"),
    (b"doc_id,candidate_id,score\nd1,a,1\n", "s.csv", {"score": "p"}, "column 'score' (mapped from 'p') is missing"),
    (b"doc_id,candidate_id,score,score\nd1,a,1,2\n", "s.csv", None, "column 'score' appears more than once"),
    (b"doc_id,candidate_id,score\nd1,a,1\nd2,b\n", "s.csv", None, "row 2 has 2 of the header's 3 fields"),
    (b"doc_id,candidate_id,score\nd\xe9,a,1\n", "s.csv", None, "text is not valid UTF-8"),
    (b"doc_id,candidate_id,score\n", "s.csv", None, "the table has no rows"),
    (b" \n", "s.csv", None, "the file is empty"),
    (b"PAR1 not really PAR1", "s.parquet", None, "not a readable Parquet file"),
    (b"doc_id,candidate_id,score\nd1,a,1\n", "s.xlsx", None, "unsupported file type"),
])
def test_a_file_that_cannot_be_read_is_one_line(data, name, columns, text):
    with pytest.raises(DataError) as info:
        read_candidate_scores(data, name=name, columns=columns)
    assert str(info.value).startswith(name) and text in str(info.value) and "\n" not in str(info.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_candidate_scores(tmp_path / "nowhere.parquet")


# ------------------------------------------------------------------------------------------ vs row by row

def row_by_row(data: bytes, name: str):
    """The reference: every row in turn, as :func:`read_table` reads it (the result, or the error's message)."""
    frame, digest = read_table(data, name)
    seen: dict[tuple[str, str], int] = {}
    rows = []
    for row, (doc, cand, value) in enumerate(zip(frame["doc_id"], frame["candidate_id"], frame["score"]), start=1):
        for column, ident in (("doc_id", doc), ("candidate_id", cand)):
            if _is_missing(ident) or _as_id(ident) is None:
                return str(DataError(name, "invalid identifier", column=column, row=row,
                                     expected="a non-empty text id", found=_describe(ident)))
        doc, cand = _as_id(doc), _as_id(cand)
        try:
            number = float("nan") if isinstance(value, bool) else float(value)
        except (TypeError, ValueError, OverflowError):
            number = float("nan")
        if not math.isfinite(number):
            return str(DataError(name, "invalid score", column="score", row=row, expected="a finite number",
                                 found=repr(value)))
        if (doc, cand) in seen:
            return str(DataError(name, f"candidate '{cand}' listed twice for document '{doc}'", row=row,
                                 column="candidate_id", expected="one row per (doc_id, candidate_id)",
                                 found=f"the same pair in row {seen[doc, cand]}"))
        seen[doc, cand] = row
        rows.append((doc, cand, number))
    return rows, digest


DOCS = hst.sampled_from(["d1", "d2", " d2", "d3 ", "é"])
CANDIDATES = hst.sampled_from([f"c{i}" for i in range(40)] + [" c1", "c2 "])
BAD_IDS = hst.sampled_from(["", " ", "NaN", "null", None])
SCORES = hst.one_of(hst.floats(allow_nan=True, allow_infinity=True), hst.integers(-5, 5),
                    hst.sampled_from([0.5, 1.0, 2.0, -0.25, None, "0.5", " 1 ", "high", "", True, "1e400"]))


def rows_of(fmt: str):
    """Tables of good rows, and tables where some rows may have a bad id or score (a repeated pair is left to
    chance)."""
    good = hst.tuples(DOCS, CANDIDATES, hst.floats(-3, 3))
    score = SCORES if fmt != "parquet" else hst.one_of(hst.floats(), hst.none())  # a column of numbers
    bad = hst.tuples(hst.one_of(DOCS, BAD_IDS), hst.one_of(CANDIDATES, BAD_IDS), score)
    return hst.one_of(hst.lists(good, min_size=1, max_size=12),
                      hst.lists(hst.one_of(good, good, good, bad), min_size=1, max_size=12))


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_same_as_row_by_row(fmt):
    @settings(max_examples=80, deadline=None, derandomize=True)
    @given(rows_of(fmt))
    def check(rows):
        data = encode(rows, fmt)
        expected = row_by_row(data, f"s.{fmt}")
        try:
            scores = read_candidate_scores(data, name=f"s.{fmt}")
        except DataError as error:
            assert str(error) == expected
            return
        assert not isinstance(expected, str), expected
        assert as_rows(scores) == expected[0] and scores.sha256 == expected[1]
        assert scores.doc_ids.tolist() == list(dict.fromkeys(r[0] for r in expected[0]))
        assert scores.candidate_ids.tolist() == list(dict.fromkeys(r[1] for r in expected[0]))

    check()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(hst.lists(hst.one_of(hst.text(alphabet="0123456789+-.eE_ \tinfatyINFATY", max_size=12),
                            hst.floats(allow_nan=False).map(repr)), min_size=1, max_size=8))
def test_text_is_read_as_python_reads_numbers(cells):
    """The same finite numbers as Python's float; a cell it reads as no finite number is none here either."""
    values = _text_floats(pa.chunked_array([pa.array(cells, pa.string())]))
    for cell, value in zip(cells, values.tolist()):
        python = _number(cell)
        assert math.isfinite(value) == math.isfinite(python), cell
        assert not math.isfinite(value) or (value == python and math.copysign(1, value) == math.copysign(1, python))


def test_repeated_pairs_are_found_with_either_method():
    doc = np.array([0, 1, 0, 1, 0], dtype=np.int32)
    cand = np.array([5, 5, 6, 7, 6], dtype=np.int32)
    for n_cand in (8, 10**12):  # a mark per possible pair, or sorted keys when there are too many pairs
        assert _first_repeat(doc, cand, n_cand) == (4, 2)
        assert _first_repeat(doc[:4], cand[:4], n_cand) is None


def test_first_refused_scans_in_blocks(monkeypatch):
    values = np.array([2.0, 1.0, 3.0, -1.0, 0.5, -2.0])
    for block in (1, 2, 4, 1 << 20):
        monkeypatch.setattr(candidate_scores, "ROWS_AT_ONCE", block)
        assert first_refused(lambda v: v < 0, values) == 3 and first_refused(lambda v: v > 9, values) is None


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_csv_and_parquet_are_read_by_columns(fmt, monkeypatch):
    """A well-formed table never goes through the frame of :func:`read_table` (Python objects per cell)."""
    def refused(*args, **kwargs):
        raise AssertionError("read_table called")

    monkeypatch.setattr(candidate_scores, "read_table", refused)
    rows = [(f"d{i % 7}", f"c{i}", i / 10 - 1) for i in range(100)]
    scores = read(rows, fmt)
    assert as_rows(scores) == rows and scores.written == {1: "'-1.0'" if fmt == "csv" else "-1.0"}
    with pytest.raises(DataError, match="row 3, column 'score': invalid score"):
        read(rows[:2] + [("d1", "x", float("inf"))], fmt)
    with pytest.raises(AssertionError, match="read_table called"):
        read(rows, "jsonl")  # JSONL: read line by line
