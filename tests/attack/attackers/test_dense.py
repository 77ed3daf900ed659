"""The dense retrieval attacker: cosine / softmax / top-K by hand with a fake encoder, the embedding
cache (warm re-attack encodes nothing, changes re-encode, corrupt files are rewritten, keyed by model),
and progress. The real packaged all-MiniLM-L6-v2 (an end-to-end audit on the sample data) is run by
tests/integration/test_dense_model.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re

import numpy as np
import pandas as pd
import pytest

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.embedding_cache import EmbeddingCache, default_cache_dir, texts_digest
from cpa_core.attack.model_store import fingerprint_model
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry, ValidationReport


class VocabularyEncoder:
    """Counts of known words (one dimension per word); records every call."""

    def __init__(self, vocabulary):
        self.vocabulary = {w: i for i, w in enumerate(vocabulary)}
        self.calls: list[list[str]] = []
        self.kwargs: list[dict] = []

    def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False):
        self.calls.append(list(texts))
        self.kwargs.append({"batch_size": batch_size, "convert_to_numpy": convert_to_numpy,
                            "normalize_embeddings": normalize_embeddings, "show_progress_bar": show_progress_bar})
        out = np.zeros((len(texts), len(self.vocabulary)), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                if word in self.vocabulary:
                    out[row, self.vocabulary[word]] += 1
        if normalize_embeddings:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
        return out


class HashingEncoder(VocabularyEncoder):
    """A deterministic hashed bag of words in 64 dimensions."""

    def __init__(self, dim: int = 64):
        super().__init__([])
        self.dim = dim

    def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim] += 1
        if normalize_embeddings:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


def make_registry(rows: dict[str, str], field: str = "words") -> Registry:
    frame = pd.DataFrame({"identity_id": list(rows), field: list(rows.values())}, dtype=object)
    return Registry(frame, "registry.csv", "0" * 64, ValidationReport("registry.csv", len(frame), len(frame)))


WORDS = KnowledgeLevel("W", ("words",))
TOY = {"P1": "alpha beta", "P2": "gamma", "P3": "alpha", "P4": "delta delta"}


def toy_world(rows=None, n_docs: int = 6, seed: int = 0):
    """A registry of people with distinctive words and documents that repeat some of them."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i:02d}" for i in range(40)]
    people = rows or {f"P{i:02d}": " ".join(rng.choice(vocabulary, size=4, replace=False)) for i in range(12)}
    ids = list(people)
    docs, texts, truth = [], [], []
    for k in range(n_docs):
        who = ids[k % len(ids)]
        words = people[who].split()
        docs.append(f"D{k:03d}")
        texts.append(f"seen near {words[0]} and {words[1]} today")
        truth.append(who)
    return make_registry(people), docs, texts, truth


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "embeddings"


def attacker(cache_dir, encoder=None, **kwargs) -> DenseAttacker:
    kwargs.setdefault("model", "fake-hashing-v1")
    kwargs.setdefault("temperature", 1.0)  # attacked directly, outside an audit: no labelled documents to learn from
    return DenseAttacker(encoder=encoder or HashingEncoder(), cache_dir=str(cache_dir), **kwargs)


# --------------------------------------------------------------------------------------------------
# similarity, softmax and top-K, by hand


def test_cosine_softmax_and_top_k_by_hand(cache_dir):
    encoder = VocabularyEncoder(["alpha", "beta", "gamma", "delta"])
    dense = DenseAttacker(model="fake-vocabulary", encoder=encoder, temperature=0.5, cache_dir=str(cache_dir))
    table = dense.attack(["d1", "d2"], ["alpha", "gamma delta"], make_registry(TOY), WORDS)

    # query "alpha": cos = 1 (P3), 1/sqrt2 (P1), 0 (P2, P4); "gamma delta": 1/sqrt2 (P2, P4), 0 (P1, P3)
    assert table.candidate_ids.tolist() == ["P1", "P2", "P3", "P4"]
    assert table.candidates[0, :2].tolist() == [2, 0]
    logits = np.array([1.0, 1 / math.sqrt(2), 0.0, 0.0]) / 0.5
    expected = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(table.weights[0], expected, rtol=1e-6)
    assert sorted(table.candidates[1, :2].tolist()) == [1, 3]
    logits = np.array([1 / math.sqrt(2)] * 2 + [0.0] * 2) / 0.5
    np.testing.assert_allclose(table.weights[1], np.exp(logits) / np.exp(logits).sum(), rtol=1e-6)
    assert table.pool_sizes.tolist() == [4, 4] and table.queries == ("alpha", "gamma delta")
    assert table.weight_kind == "probability"
    assert all(k["normalize_embeddings"] and k["convert_to_numpy"] and not k["show_progress_bar"]
               for k in encoder.kwargs)

    # top-2: the two most similar profiles, with their weights over the whole pool (no renormalisation)
    top2 = DenseAttacker(model="fake-vocabulary", encoder=encoder, temperature=0.5, top_k=2,
                         cache_dir=str(cache_dir)).attack(["d1"], ["alpha"], make_registry(TOY), WORDS)
    assert top2.candidates.tolist() == [[2, 0]] and top2.pool_sizes.tolist() == [2]
    np.testing.assert_allclose(top2.weights[0], table.weights[0, :2], rtol=1e-12)
    np.testing.assert_allclose(top2.tail_mass, [table.weights[0, 2:].sum()], rtol=1e-12)


def test_temperature_sharpens_without_reordering(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=10)
    cold = attacker(cache_dir, temperature=1.0).attack(docs, texts, registry, WORDS)
    sharp = attacker(cache_dir, temperature=0.05).attack(docs, texts, registry, WORDS)
    np.testing.assert_allclose(cold.weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(sharp.weights.sum(axis=1), 1.0)
    assert (sharp.weights[:, 0] >= cold.weights[:, 0]).all()
    assert (np.diff(sharp.weights, axis=1) <= 1e-12).all()
    # the same similarities: the top candidate has the same cosine under both temperatures
    assert (cold.candidates[:, 0] == sharp.candidates[:, 0]).all()


def test_chunked_top_k_equals_one_block(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=25, seed=3)
    whole = attacker(cache_dir, top_k=5, chunk_size=1000).attack(docs, texts, registry, WORDS)
    chunked = attacker(cache_dir, top_k=5, chunk_size=3).attack(docs, texts, registry, WORDS)
    full = attacker(cache_dir, chunk_size=4).attack(docs, texts, registry, WORDS)
    np.testing.assert_array_equal(whole.weights, chunked.weights)
    np.testing.assert_array_equal(np.sort(whole.candidates, axis=1), np.sort(chunked.candidates, axis=1))
    assert full.width == len(registry) and whole.width == 5
    # the top-5 are the full pool's top-5 with the same weights; the cut mass is the tail
    np.testing.assert_allclose(whole.weights, full.truncate(5).weights, rtol=1e-9)
    np.testing.assert_allclose(whole.tail_mass, full.truncate(5).tail_mass, rtol=1e-9)


def test_top1_finds_the_person_on_a_toy_world(cache_dir):
    registry, docs, texts, truth = toy_world(n_docs=24, seed=1)
    table = attacker(cache_dir).attack(docs, texts, registry, WORDS)
    positions = table.truth_positions(truth)
    assert (positions >= 0).all() and (positions == 0).mean() >= 0.75


# --------------------------------------------------------------------------------------------------
# batches, progress, duplicates


def test_batches_progress_and_duplicates(cache_dir):
    rows = {"P1": "alpha", "P2": "beta", "P3": "alpha", "P4": "gamma", "P5": "delta", "P6": "epsilon"}
    encoder = HashingEncoder()
    dense = attacker(cache_dir, encoder=encoder, batch_size=2)
    calls = []
    dense.attack(["d1", "d2", "d3"], ["alpha x", "beta y", "alpha x"], make_registry(rows), WORDS,
                 progress=lambda done, total, step: calls.append((done, total, step)))
    # 5 distinct profile texts in batches of 2 (3 calls), 2 distinct queries (1 call)
    assert [len(c) for c in encoder.calls] == [2, 2, 1, 2]
    assert dense.encoder_calls_ == 4 and dense.encoded_texts_ == 7
    assert sorted(sum(encoder.calls[:3], [])) == ["alpha", "beta", "delta", "epsilon", "gamma"]
    profiles = [c for c in calls if c[2] == "encoding profiles"]
    assert profiles[0] == (0, 6, "encoding profiles") and profiles[-1] == (6, 6, "encoding profiles")
    assert [d for d, _, _ in profiles] == sorted(d for d, _, _ in profiles)
    assert [c for c in calls if c[2] == "encoding queries"][-1] == (3, 3, "encoding queries")
    assert calls[-1] == (3, 3, "ranking the registry")
    # longest texts first across the whole list, as the encoder itself would sort them
    lengths = [len(t) for t in sum(encoder.calls[:3], [])]
    assert lengths == sorted(lengths, reverse=True)

    # a warm attack reports each step as done
    warm_calls = []
    attacker(cache_dir, batch_size=2).attack(["d1", "d2", "d3"], ["alpha x", "beta y", "alpha x"],
                                            make_registry(rows), WORDS,
                                            progress=lambda *a: warm_calls.append(a))
    assert (6, 6, "encoding profiles") in warm_calls and (3, 3, "encoding queries") in warm_calls


def test_empty_document_list(cache_dir):
    table = attacker(cache_dir, top_k=2).attack([], [], make_registry(TOY), WORDS)
    assert len(table) == 0 and table.candidates.shape == (0, 2)


# --------------------------------------------------------------------------------------------------
# the embedding cache


def test_second_attack_encodes_nothing(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=12)
    first = attacker(cache_dir)
    table = first.attack(docs, texts, registry, WORDS)
    assert first.encoder_calls_ > 0 and first.cache_misses_ == 2
    assert len(list(cache_dir.glob("emb-*.npy"))) == 2  # profiles and queries

    encoder = HashingEncoder()
    second = attacker(cache_dir, encoder=encoder)
    again = second.attack(docs, texts, registry, WORDS)
    assert encoder.calls == [] and second.encoder_calls_ == 0 and second.encoded_texts_ == 0
    assert second.cache_hits_ == 2
    np.testing.assert_array_equal(table.candidates, again.candidates)
    np.testing.assert_array_equal(table.weights, again.weights)

    # the same attacker object again: the same inputs were prepared once (no cache lookup, no encoding)
    second.attack(docs, texts, registry, WORDS)
    assert second.encoder_calls_ == 0 and second.cache_hits_ == 2


def test_changed_registry_text_reencodes_profiles_only(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=8)
    attacker(cache_dir).attack(docs, texts, registry, WORDS)
    frame = registry.frame.copy()
    frame.loc[3, "words"] = frame.loc[3, "words"] + " w39"
    changed = Registry(frame, registry.file, registry.sha256, registry.report)
    dense = attacker(cache_dir)
    dense.attack(docs, texts, changed, WORDS)
    assert dense.encoded_texts_ == len(set(frame["words"]))  # profiles re-encoded, queries from the cache
    assert dense.cache_hits_ == 1 and dense.cache_misses_ == 1
    # the key is the texts, not the level's name: a renamed level with the same fields hits the cache
    other = KnowledgeLevel("W-renamed", ("words",), "direct", "another description")
    again = attacker(cache_dir)
    again.attack(docs, texts, changed, other)
    assert again.encoder_calls_ == 0


def test_corrupt_cache_file_is_ignored_and_rewritten(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=8)
    reference = attacker(cache_dir).attack(docs, texts, registry, WORDS)
    files = sorted(cache_dir.glob("emb-*.npy"))
    files[0].write_bytes(b"\x93NUMPY garbage")                         # truncated / not an array
    np.save(files[1], np.zeros((3, 5), dtype=np.float32))                # wrong shape
    dense = attacker(cache_dir)
    table = dense.attack(docs, texts, registry, WORDS)
    assert dense.cache_misses_ == 2 and dense._cache.corrupt == 2 and dense.encoder_calls_ > 0
    np.testing.assert_array_equal(reference.weights, table.weights)
    warm = attacker(cache_dir)
    warm.attack(docs, texts, registry, WORDS)
    assert warm.encoder_calls_ == 0 and warm.cache_hits_ == 2  # rewritten and readable
    assert not list(cache_dir.glob(".tmp-*"))                      # no temporary files left behind

    nan = np.load(files[0])
    nan[0, 0] = np.nan
    np.save(files[0], nan)                                          # non-finite values
    recovered = attacker(cache_dir)
    recovered.attack(docs, texts, registry, WORDS)
    assert recovered.cache_misses_ == 1 and recovered.encoder_calls_ > 0


def test_cache_is_keyed_by_model(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=8)
    a = attacker(cache_dir, model="fake-model-a")
    a.attack(docs, texts, registry, WORDS)
    b = attacker(cache_dir, model="fake-model-b")
    b.attack(docs, texts, registry, WORDS)
    assert b.encoder_calls_ > 0 and b.cache_hits_ == 0
    assert a.params()["model_fingerprint"] != b.params()["model_fingerprint"]
    pinned = attacker(cache_dir, model="fake-model-a", model_fingerprint="0" * 64)
    pinned.attack(docs, texts, registry, WORDS)
    assert pinned.encoder_calls_ > 0
    assert len(list(cache_dir.glob("emb-*.npy"))) == 6


def test_cache_directory_from_the_environment_and_disabled_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path / "from-env"))
    assert default_cache_dir() == tmp_path / "from-env" / "embeddings"
    registry, docs, texts, _ = toy_world(n_docs=4)
    DenseAttacker(model="fake", encoder=HashingEncoder(), temperature=1.0).attack(docs, texts, registry, WORDS)
    assert len(list((tmp_path / "from-env" / "embeddings").glob("emb-*.npy"))) == 2
    monkeypatch.delenv("CPA_CACHE_DIR")
    assert default_cache_dir() == (tmp_path / "x").home() / ".cache" / "cpa" / "embeddings"

    off = DenseAttacker(model="fake", encoder=HashingEncoder(), cache=False, cache_dir=str(tmp_path / "off"),
                        temperature=1.0)
    off.attack(docs, texts, registry, WORDS)
    off.attack(docs[:2], texts[:2], registry, WORDS)  # other documents: encoded again, nothing cached
    assert off.encoder_calls_ == 4 and not (tmp_path / "off").exists()


def test_unwritable_cache_directory_warns_and_goes_on(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    registry, docs, texts, _ = toy_world(n_docs=4)
    dense = DenseAttacker(model="fake", encoder=HashingEncoder(), cache_dir=str(blocker / "embeddings"), temperature=1.0)
    with pytest.warns(RuntimeWarning, match="cannot write the embedding cache"):
        table = dense.attack(docs, texts, registry, WORDS)
    assert len(table) == 4


def test_texts_digest_is_exact():
    assert texts_digest(["a", "bc"]) != texts_digest(["ab", "c"])
    assert texts_digest(["a", "b"]) != texts_digest(["b", "a"])
    assert texts_digest([]) != texts_digest([""])
    assert texts_digest(["Zoë"]) == texts_digest(["Zoë"])
    cache = EmbeddingCache("/nonexistent-cpa-dir")
    assert cache.load("k", texts_digest(["a"]), 1) is None and cache.misses == 1


# --------------------------------------------------------------------------------------------------
# parameters, query modes, validation, privacy


def test_params_record_the_model_and_the_attack(cache_dir):
    params = attacker(cache_dir, temperature=0.07, top_k=20).params()
    assert params["attacker"] == "dense" and params["model"] == "fake-hashing-v1"
    assert params["model_source"] == "model name" and len(params["model_fingerprint"]) == 64
    assert params["temperature"] == 0.07 and params["top_k"] == 20
    assert params["normalize_embeddings"] is True and params["similarity"] == "cosine"
    json.dumps(params)
    config = AuditConfig(knowledge=WORDS, attacker=AttackerConfig.of(attacker(cache_dir, temperature=0.07, top_k=20)))
    assert config.config_id == AuditConfig(knowledge=WORDS, attacker=AttackerConfig.of(
        attacker(cache_dir, temperature=0.07, top_k=20))).config_id


def test_local_model_directory_fingerprint(tmp_path):
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "config.json").write_text('{"a": 1}')
    (model / "1_Pooling" / "config.json").write_text("{}")
    first = fingerprint_model(model)
    moved = tmp_path / "moved"
    model.rename(moved)
    assert fingerprint_model(moved) == first                     # a move keeps the cache valid
    (moved / "config.json").write_text('{"a": 2}')                # same size, other content
    stat = (moved / "config.json").stat()                           # (a later edit: coarse file clocks may
    os.utime(moved / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # not tick in a test)
    assert fingerprint_model(moved) != first
    dense = DenseAttacker(model=str(moved), encoder=HashingEncoder(), cache_dir=str(tmp_path / "c"))
    assert dense.params()["model_source"] == "local directory"
    assert dense.params()["model_fingerprint"] == fingerprint_model(moved)


def test_query_modes(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=3)
    clues_level = KnowledgeLevel("C", ("words",), "direct_plus_clues")
    with pytest.raises(ConfigError, match="clue extractor"):
        attacker(cache_dir).attack(docs, texts, registry, clues_level)
    encoder = HashingEncoder()
    seen = []

    def extractor(doc_ids, texts_, progress):
        seen.append(list(doc_ids))
        return [["w01", "w02"]] * len(doc_ids)

    table = attacker(cache_dir, encoder=encoder, clue_extractor=extractor).attack(docs, texts, registry, clues_level)
    assert seen == [docs]
    assert all(q.endswith("\nw01; w02") for q in table.queries)
    assert encoder.calls[-1] and all(q.endswith("w01; w02") for q in encoder.calls[-1])


@pytest.mark.parametrize("bad", [{"temperature": 0}, {"temperature": -1.0}, {"temperature": float("nan")},
                                 {"top_k": 0}, {"batch_size": 0}, {"chunk_size": 0}, {"model": 3},
                                 {"model": "/no/such/model/dir", "encoder": None}, {"cache_dir": 3}, {"batch_size": 2.5},
                                 {"temperature": "hot"}])
def test_invalid_parameters(bad, cache_dir):
    with pytest.raises(ConfigError):
        DenseAttacker(**{"model": "fake", "encoder": HashingEncoder(), "cache_dir": str(cache_dir), **bad})


def test_empty_model_means_the_default(cache_dir):
    assert DenseAttacker(model=" ", encoder=HashingEncoder(), cache_dir=str(cache_dir)).model is None


def test_encoder_with_a_wrong_shape_is_a_clear_error(cache_dir):
    class Broken(HashingEncoder):
        def encode(self, texts, **kwargs):
            return np.zeros((len(texts) + 1, 3), dtype=np.float32)

    with pytest.raises(ConfigError, match="shape"):
        attacker(cache_dir, encoder=Broken()).attack(["d"], ["x"], make_registry(TOY), WORDS)


def test_texts_never_logged(cache_dir, caplog):
    secret = "zanzibarquokka"
    registry = make_registry({"P1": f"alpha {secret}", "P2": "beta"})
    with caplog.at_level(logging.DEBUG):
        dense = attacker(cache_dir)
        dense.attack(["d1"], [f"{secret} beta"], registry, WORDS)
        (cache_dir / next(p.name for p in cache_dir.glob("emb-*.npy"))).write_bytes(b"junk")
        attacker(cache_dir).attack(["d1"], [f"{secret} beta"], registry, WORDS)
    assert caplog.records and secret not in caplog.text
    for path in cache_dir.iterdir():
        assert secret.encode() not in path.read_bytes()
