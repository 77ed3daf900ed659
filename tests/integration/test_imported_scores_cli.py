"""Bring your own attacker at scale through ``cpa audit --scores``: a Parquet table of one million rows (1,000
documents x 1,000 candidates, rows in no particular order, some documents without rows, candidates outside the
registry) is read column by column and certified in a process; the certificate is checked against the table itself
(reading and ranking: tests/io/test_candidate_scores.py, tests/attack/attackers/test_imported.py)."""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from audit_files import read_jsonl
from cli_checks import ok
from conftest import run_cli

N_DOCUMENTS, N_CANDIDATES = 1000, 1000  # 1,000,000 rows
N_OUTSIDE = 20  # candidates the attacker named that the registry does not have
ABSENT = 50  # documents without rows: candidate misses


def write_release(folder):
    rng = np.random.default_rng(7)
    people = np.array([f"P{i:05d}" for i in range(N_CANDIDATES)], dtype=object)  # the registry's and the table's
    truth = rng.integers(0, N_CANDIDATES - N_OUTSIDE, N_DOCUMENTS)  # the last ones are outside the registry
    documents = pd.DataFrame({"doc_id": [f"D{i:05d}" for i in range(N_DOCUMENTS)],
                              "text": [f"note {i}" for i in range(N_DOCUMENTS)], "identity_id": people[truth]})
    documents.to_csv(folder / "documents.csv", index=False)
    pd.DataFrame({"identity_id": people[:-N_OUTSIDE], "city": "York"}).to_csv(folder / "registry.csv", index=False)
    listed = np.arange(ABSENT, N_DOCUMENTS)
    doc = np.repeat(listed, N_CANDIDATES)
    cand = np.tile(np.arange(N_CANDIDATES), listed.size)
    score = rng.random(doc.size) ** 4
    score[cand == truth[doc]] += rng.uniform(0, 2, listed.size)  # the right person weighs more, by chance
    order = rng.permutation(doc.size)
    doc, cand, score = doc[order], cand[order], score[order]
    table = pa.table({"doc_id": pa.array(documents["doc_id"].tolist()).take(pa.array(doc)),
                      "candidate_id": pa.array(people.tolist()).take(pa.array(cand)), "score": score})
    pq.write_table(table, folder / "scores.parquet", row_group_size=200_000)
    return documents, truth, doc, cand, score


def test_a_million_row_parquet_table_is_imported_and_certified(tmp_path):
    documents, truth, doc, cand, score = write_release(tmp_path)
    out = tmp_path / "out"
    started = time.perf_counter()
    done = ok(run_cli("audit", "--documents", tmp_path / "documents.csv", "--registry", tmp_path / "registry.csv",
                      "--scores", tmp_path / "scores.parquet", "--attacker", "imported", "--scores-kind",
                      "probability", "--confidence", "0.9", "--out", out))
    seconds = time.perf_counter() - started
    assert seconds < 120, f"cpa audit took {seconds:.0f} s"  # about 10 s on two shared cores
    assert "Traceback" not in done.output

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256((tmp_path / "scores.parquet").read_bytes()).hexdigest()
    recorded = manifest["config"]["data"]["scores"]
    assert (recorded["sha256"], recorded["rows"]) == (digest, (N_DOCUMENTS - ABSENT) * N_CANDIDATES)
    assert manifest["attacker"]["sha256"] == digest
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))["confidence"]["0.9"]

    # the table's own answers: each listed document's first guess, and the truth's position in its ranking
    best = np.full(N_DOCUMENTS, -1.0)
    np.maximum.at(best, doc, score)
    truth_score = np.full(N_DOCUMENTS, np.nan)
    hit = cand == truth[doc]
    truth_score[doc[hit]] = score[hit]
    first_guess = truth_score == best  # NaN (no rows) is never a first guess
    assert summary["n_test"] == N_DOCUMENTS
    assert summary["candidate_miss_rate"] == ABSENT / N_DOCUMENTS
    assert summary["top1"] == first_guess.mean()
    assert 0.9 - 0.03 <= summary["coverage"] <= 1.0

    records = {record["doc_id"]: record for record in read_jsonl(out / "documents.jsonl")}
    assert len(records) == N_DOCUMENTS
    for i in (0, ABSENT - 1, ABSENT, 500, N_DOCUMENTS - 1):
        record = records[documents["doc_id"][i]]
        assert record["pool_size"] == (0 if i < ABSENT else N_CANDIDATES)
        assert record["in_pool"] == (i >= ABSENT)
        if i >= ABSENT:
            rank = 1 + int(np.count_nonzero(score[doc == i] > truth_score[i]))
            assert record["true_rank"] == rank
