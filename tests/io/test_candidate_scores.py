"""An outside attacker's output read as a long table ``doc_id, candidate_id, score``: every row kept with its number,
its row and the score as written, and one error per bad row naming the file, the row, the column, what was
expected and what was found (what the scores mean: tests/attack/attackers/test_imported.py)."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from cpa_core.attack.attackers.imported import load_candidate_scores
from cpa_core.common.errors import DataError
from cpa_core.io.candidate_scores import read_candidate_scores

HEADER = "doc_id,candidate_id,score\n"


def test_a_csv_table_by_hand():
    data = (HEADER + "d1,a,0.5\nd1, b ,2\nd2,a,-1e-3\n").encode()
    scores = read_candidate_scores(data, name="scores.csv")
    assert scores.file == "scores.csv" and scores.sha256 == hashlib.sha256(data).hexdigest()
    assert scores.frame.to_dict("list") == {"doc_id": ["d1", "d1", "d2"], "candidate_id": ["a", "b", "a"],
                                            "score": [0.5, 2.0, -0.001], "row": [1, 2, 3],
                                            "given": ["0.5", "2", "-1e-3"]}  # ids trimmed, scores as written


def test_a_jsonl_table_with_its_columns_mapped(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"doc": "d1", "person": "a", "p": 0.25}\n{"doc": "d1", "person": "b", "p": 1}\n',
                    encoding="utf-8")
    scores = read_candidate_scores(path, columns={"doc_id": "doc", "candidate_id": "person", "score": "p"})
    assert scores.file == str(path)
    assert scores.frame[["doc_id", "candidate_id", "score", "row"]].values.tolist() == [["d1", "a", 0.25, 1],
                                                                                      ["d1", "b", 1.0, 2]]
    assert scores.frame["given"].tolist() == [0.25, 1]


@pytest.mark.parametrize("body, message", [
    ("d1,a,0.5\nd1,b,inf\n",
     "s.csv, row 2, column 'score': invalid score; expected a finite number, found 'inf'"),
    ("d1,a,high\n", "s.csv, row 1, column 'score': invalid score; expected a finite number, found 'high'"),
    ("d1,a,0.5\n ,b,0.5\n",
     "s.csv, row 2, column 'doc_id': invalid identifier; expected a non-empty text id, found an empty string"),
    ("d1,NaN,0.5\n", "s.csv, row 1, column 'candidate_id': invalid identifier; expected a non-empty text id, "
                     "found the missing-value marker 'NaN'"),
    ("d1,a,0.5\nd1,b,0.2\nd1,a,0.3\n", "s.csv, row 3, column 'candidate_id': candidate 'a' listed twice for "
                                       "document 'd1'; expected one row per (doc_id, candidate_id), found the same "
                                       "pair in row 1"),
])
def test_a_bad_row_is_one_message_naming_it(body, message):
    with pytest.raises(DataError) as info:
        read_candidate_scores((HEADER + body).encode(), name="s.csv")
    assert str(info.value) == message


def test_a_parquet_table_keeps_its_types(tmp_path):
    path = tmp_path / "s.parquet"
    pd.DataFrame({"doc_id": ["d1", "d2"], "candidate_id": ["a", "a"], "score": [0.75, 3.0]}).to_parquet(path)
    scores = read_candidate_scores(path)
    assert scores.frame["score"].tolist() == [0.75, 3.0] and scores.frame["doc_id"].tolist() == ["d1", "d2"]


def test_numeric_ids_are_refused():
    lines = [{"doc_id": 7, "candidate_id": "a", "score": 0.9}, {"doc_id": 7, "candidate_id": "b", "score": 0.1}]
    with pytest.raises(DataError) as info:
        load_candidate_scores("\n".join(json.dumps(r) for r in lines).encode(), name="s.jsonl")
    assert "row 1" in str(info.value) and "the number 7" in str(info.value)


def test_nan_in_jsonl_and_parquet():
    with pytest.raises(DataError) as info:
        load_candidate_scores(b'{"doc_id": "d1", "candidate_id": "a", "score": NaN}\n', name="s.jsonl")
    assert "row 1" in str(info.value) and "column 'score'" in str(info.value)
    with pytest.raises(DataError) as info:
        load_candidate_scores(b'{"doc_id": "d1", "candidate_id": "a", "score": true}\n', name="s.jsonl")
    assert "row 1" in str(info.value) and "column 'score'" in str(info.value)


def test_missing_columns_in_the_score_table():
    with pytest.raises(DataError) as info:
        load_candidate_scores(b"doc_id,candidate,score\nd1,a,1\n", name="s.csv")
    assert "column 'candidate_id'" in str(info.value) and "s.csv" in str(info.value)
