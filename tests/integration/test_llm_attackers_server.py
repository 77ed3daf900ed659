"""Every LLM attacker end to end against a real OpenAI-compatible server (llama.cpp, SmolLM2-135M-Instruct).

Each attacker runs through :func:`cpa_core.audit.pipeline.run_audit` on a slice of ``sample_data/`` and is checked
for the certificate's structure (set sizes within the pool, coverage, q_hat, summary keys), the cache (a
second run with a fresh client on the same cache directory sends no request but for the answers that failed, cut
at the short max_tokens: never cached) and the manifest (prompt
sha256 and LLM settings, never the key). What is tested is the pipeline, not a 135M model's skill.

Skipped, with the install command, when the server is not installed (see tests/llm_server.py). Sized for
a 2-core machine, where llama.cpp on one thread evaluates about 100 prompt tokens per second: 10 documents
(``CPA_LLM_TEST_DOCS`` overrides) cut to 160 characters, m = 2, a shortlist of 3, short answers, mostly one
request at a time (consecutive requests of a document then share their prompt prefix in llama.cpp's cache).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from llm_server import client_factory, llm_server  # noqa: F401  (the session fixture)

from cpa_core.attack.attackers.forced_choice import ForcedChoiceAttacker
from cpa_core.attack.attackers.profile import ProfileAttacker, attributes_from_registry, certified_attribute_sets
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.clues import LLMClueExtractor
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import load_config
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.metrics import summarize
from cpa_core.store.records import manifest

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"

N_DOCS = int(os.environ.get("CPA_LLM_TEST_DOCS", "10"))  # even; 10 keeps the file near 4 minutes beside other tests
TEXT_CHARS = 160
SHORTLIST_K = 3
CONFIDENCES = (0.8, 0.9)
KEY_ENV = "CPA_TEST_SERVER_ATTACKERS_KEY"
SECRET = "sk-local-server-DO-NOT-LEAK-7731"
SUMMARY_KEYS = {"coverage", "coverage_conditional", "candidate_miss_rate", "median_set_size", "mean_set_size",
                "min_set_size", "max_set_size", "mean_leakage", "empty_rate", "q_hat", "n_cal", "n_test", "top1"}


def shorten(text: str, limit: int = TEXT_CHARS) -> str:
    """The text cut at the last space before ``limit`` characters (short prompts: a fast test)."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0]


@pytest.fixture(scope="module")
def sample():
    project = load_config(SAMPLE_DIR / "audit.toml")
    documents = load_documents(SAMPLE_DIR / "documents.csv")
    frame = documents.frame.iloc[:N_DOCS].reset_index(drop=True)
    frame["text"] = [shorten(t) for t in frame["text"]]
    documents = replace(documents, frame=frame)
    registry = load_registry(SAMPLE_DIR / "registry.csv")
    return project, documents, registry


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("llm-attackers-cache"))


@pytest.fixture
def make_client(llm_server, cache_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, SECRET)  # the local server accepts any key: it must still never be written
    yield from client_factory(llm_server, api_key_env=KEY_ENV, timeout_s=120.0, cache_dir=cache_dir)


def audit(documents, registry, attacker, level, score="aps"):
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), score=score, confidences=CONFIDENCES,
                         n_cal=N_DOCS // 2, n_test=N_DOCS // 2, seed=7, protocol="split")
    return run_audit(documents, registry, attacker, config)


def check_certificates(result, pool_size: int) -> None:
    assert len(result.calibration_split) == N_DOCS // 2 and len(result.test_split) == N_DOCS // 2
    table = result.test_split.table
    assert (table.pool_sizes == pool_size).all()
    summary = summarize(result).to_dict()
    for level in CONFIDENCES:
        cert = result.certificate(level)
        assert ((cert.set_sizes >= 0) & (cert.set_sizes <= table.pool_sizes)).all()
        assert cert.covered.dtype == bool and (cert.covered <= result.test_split.in_pool).all()
        q_hat = result.calibration.q_hat(level)
        assert isinstance(q_hat, float) and not math.isnan(q_hat)
        # the set is exactly the candidates scoring at most q_hat
        assert (cert.set_sizes == np.count_nonzero(result.test_split.sorted_scores <= q_hat, axis=1)).all()
        entry = summary["confidence"][f"{level:g}"]
        assert SUMMARY_KEYS <= set(entry)
        assert 0.0 <= entry["coverage"] <= 1.0 and entry["n_test"] == N_DOCS // 2
        assert entry["coverage"] == pytest.approx(float(cert.covered.mean()))


def check_manifest(result, llm_server, template) -> dict:  # noqa: F811
    record = manifest(result)
    text = json.dumps(record, default=str)
    assert SECRET not in text
    attacker = record["attacker"]
    llm = attacker["llm"] if "llm" in attacker else attacker["clue_extractor"]["llm"]
    assert llm["base_url"] == llm_server.base_url and llm["model"] == llm_server.model
    assert llm["api_key_env"] == KEY_ENV and "api_key" not in llm
    assert template.sha256 in text
    return attacker


def rerun_from_cache(make_client, build, documents, registry, level, first, failed, score="aps"):
    """A fresh client on the same cache directory: the same tables; the only HTTP requests are the ``failed``
    answers of the first run (cut at the short max_tokens of these tests: never cached), which the seeded server
    answers the same way again."""
    client = make_client()
    attacker = build(client)
    doc_ids, texts = documents.frame["doc_id"].tolist(), documents.frame["text"].tolist()
    estimate = attacker.estimate_calls(doc_ids, texts, registry, level)
    # the dry run takes an uncached clue answer for a usable one: it cannot count the retries that will follow
    assert estimate == failed or (level.query_mode == "direct_plus_clues" and estimate <= failed)
    second = audit(documents, registry, attacker, level, score)
    assert client.calls_made_ == failed and client.failed_answers_ == failed
    for a, b in ((first.calibration_split, second.calibration_split), (first.test_split, second.test_split)):
        assert np.array_equal(a.table.candidates, b.table.candidates)
        assert np.array_equal(a.table.weights, b.table.weights)
        assert a.table.queries == b.table.queries
    return attacker


def test_clue_attacker_end_to_end(sample, make_client, llm_server):  # noqa: F811
    project, documents, registry = sample
    level = replace(project.level("K2"), name="K2+clues", query_mode="direct_plus_clues")
    texts = documents.frame["text"].tolist()

    def build(client):
        return TfidfAttacker(temperature=0.1, clue_extractor=LLMClueExtractor(client, max_clues=3, retries=1, seed=3))

    client = make_client()
    attacker = build(client)
    result = audit(documents, registry, attacker, level)
    extractor = attacker.clue_extractor
    assert N_DOCS <= client.calls_made_ <= 2 * N_DOCS + client.retries_
    assert extractor.no_clue_documents_ <= N_DOCS and set(extractor.clues_) == set(documents.frame["doc_id"])
    queries = result.calibration_split.table.queries + result.test_split.table.queries
    for doc_id, query in zip(list(result.calibration_split.table.doc_ids) + list(result.test_split.table.doc_ids),
                             queries):
        clues = extractor.clues_[doc_id]
        text = texts[documents.frame.index[documents.frame["doc_id"] == doc_id][0]]
        assert query == (text + "\n" + "; ".join(clues) if clues else text)
    check_certificates(result, len(registry))
    params = extractor.params()
    assert extractor.counters()["documents"] == N_DOCS and params["prompt"]["sha256"] == extractor.template.sha256
    rerun_from_cache(make_client, build, documents, registry, level, result, client.failed_answers_)
    assert "clue_extractor" in result.config.attacker.details  # the manifest names the clue prompt
    check_manifest(result, llm_server, extractor.template)


@pytest.mark.parametrize("mode", ["sampling", "logprobs"])
def test_forced_choice_end_to_end(sample, make_client, llm_server, mode):  # noqa: F811
    project, documents, registry = sample
    level = project.level("K1")

    def build(client):
        return ForcedChoiceAttacker(TfidfAttacker(temperature=0.1), client, m=2, shortlist_k=SHORTLIST_K, mode=mode,
                                    seed=5, max_tokens=4)

    client = make_client(concurrency=2)  # two requests in flight: the client's thread pool against the server
    attacker = build(client)
    result = audit(documents, registry, attacker, level)
    assert client.calls_made_ == N_DOCS * (2 if mode == "sampling" else 1) + client.retries_
    check_certificates(result, SHORTLIST_K)
    table = result.test_split.table
    assert table.weight_kind == "probability"
    assert np.all(table.weights >= 0) and np.all(table.weights.sum(axis=1) <= 1 + 1e-9)
    assert np.all(np.diff(table.weights, axis=1) <= 1e-12)  # ranked by decreasing weight
    counters = attacker.counters()["attacker"]
    assert counters["documents"] == N_DOCS and counters["samples"] == N_DOCS * attacker.samples_per_document
    assert 0 <= counters["invalid_picks"] <= counters["samples"]
    assert sum(d["invalid_picks"] for d in attacker.per_document_.values()) == counters["invalid_picks"]
    if mode == "sampling":
        # weights are pick frequencies in steps of 1/m, or uniform where every pick was invalid
        uniform = np.array([attacker.per_document_[d]["uniform"] for d in table.doc_ids])
        assert np.allclose((table.weights[~uniform] * 2) % 1, 0)
        assert np.allclose(table.weights[uniform], 1 / SHORTLIST_K)
    else:
        assert counters["logprob_fallbacks"] <= N_DOCS
        assert np.allclose(table.weights.sum(axis=1), 1.0)
    record = check_manifest(result, llm_server, attacker.template)
    assert record["mode"] == mode and record["shortlist_k"] == SHORTLIST_K
    assert record["shortlister"]["top_k"] == SHORTLIST_K
    assert counters["failed_answers"] == client.failed_answers_ <= counters["invalid_answers"]
    rerun_from_cache(make_client, build, documents, registry, level, result, client.failed_answers_)


def test_profile_attacker_end_to_end(sample, make_client, llm_server):  # noqa: F811
    project, documents, registry = sample
    level = project.level("K1")
    attributes = attributes_from_registry(registry, ["gender", "age_band"])

    def build(client):
        return ProfileAttacker(client, attributes, m=2, seed=11, max_tokens=6)

    client = make_client()
    attacker = build(client)
    result = audit(documents, registry, attacker, level, score="given")
    assert client.calls_made_ == N_DOCS * len(attributes) * 2 + client.retries_
    check_certificates(result, len(registry))
    assert result.test_split.table.weight_kind == "score"
    record = check_manifest(result, llm_server, attacker.template)
    assert record["score"] == "given" and [a["name"] for a in record["attributes"]] == ["gender", "age_band"]
    # the identity set is the registry rows consistent with every certified attribute set
    frame = registry.frame
    for level_ in CONFIDENCES:
        cert = result.certificate(level_)
        for row, sets in enumerate(certified_attribute_sets(cert, attacker)):
            brute = {ident for ident, gender, age in zip(frame["identity_id"], frame["gender"], frame["age_band"])
                     if sets["gender"].contains(gender) and sets["age_band"].contains(age)}
            assert set(cert.members(row).tolist()) == brute
    rerun_from_cache(make_client, build, documents, registry, level, result, client.failed_answers_, score="given")
