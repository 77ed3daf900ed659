"""The dense retrieval attacker: cosine / softmax / top-K by hand with a fake encoder (tests/dense_encoders.py),
batches, progress, query modes, parameters and privacy (its embedding cache: tests/attack/test_embedding_cache.py;
the model's fingerprint: tests/attack/test_model_store.py). The real packaged all-MiniLM-L6-v2 (an end-to-end audit
on the sample data) is run by tests/integration/test_dense_model.py.
"""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
from dense_encoders import (
    HashingEncoder,
    VocabularyEncoder,
    attacker,
    cache_dir_fixture,  # noqa: F401 (the fixture cache_dir)
    toy_world,
)
from word_registry import TOY, WORDS, make_registry

from cpa_core.attack.attackers.dense import SPEC, DenseAttacker
from cpa_core.attack.model_store import SentenceTransformerEncoder
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel

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


# --------------------------------------------------------------------------------------------------
# whole documents: windows over long texts and their pooling


def test_windows_cover_the_whole_text_with_the_stated_overlap(cache_dir):
    dense = attacker(cache_dir, window_pooling="max", window_tokens=4, window_overlap=1)
    text = " ".join(f"t{i}" for i in range(11))
    pieces, starts = dense.windows([text, "short one", ""])
    assert pieces[:4] == ["t0 t1 t2 t3", "t3 t4 t5 t6", "t6 t7 t8 t9", "t9 t10"]
    assert pieces[4:] == ["short one", ""] and starts.tolist() == [0, 4, 5]
    covered = [w for piece in pieces[:4] for w in piece.split()]
    assert set(covered) == set(text.split())
    assert dense.params()["window_tokens"] == 4 and dense.params()["window_overlap"] == 1
    assert dense.params()["window_pooling"] == "max"
    with pytest.raises(ConfigError):
        attacker(cache_dir, window_pooling="best")
    with pytest.raises(ConfigError):
        attacker(cache_dir, window_tokens=4, window_overlap=4)


@pytest.mark.parametrize("pooling", ["max", "mean_best"])
def test_window_pooling_equals_brute_force(cache_dir, pooling):
    rng = np.random.default_rng(3)
    vocabulary = [f"w{i:02d}" for i in range(30)]
    people = {f"P{i}": " ".join(rng.choice(vocabulary, size=int(rng.integers(2, 12)))) for i in range(7)}
    texts = [" ".join(rng.choice(vocabulary, size=int(rng.integers(1, 14)))) for _ in range(9)]
    encoder = VocabularyEncoder(vocabulary)
    dense = attacker(cache_dir, encoder, window_pooling=pooling, window_tokens=3, window_overlap=1, chunk_size=4)
    registry = make_registry(people)
    docs = [f"d{k}" for k in range(len(texts))]
    queries, block = dense.similarities(docs, texts, registry, WORDS)
    got = np.vstack([block(s, min(s + 4, len(texts))) for s in range(0, len(texts), 4)])

    def vectors(text):
        pieces, _ = dense.windows([text])
        out = np.asarray(encoder.encode(pieces), dtype=np.float64)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    profiles = [vectors(t) for t in dense_profile_texts(registry)]
    expected = np.empty((len(texts), len(profiles)))
    for i, query in enumerate(queries):
        q = vectors(query)
        for j, p in enumerate(profiles):
            pairs = q @ p.T
            expected[i, j] = pairs.max() if pooling == "max" else pairs.max(axis=1).mean()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def dense_profile_texts(registry):
    from cpa_core.io.knowledge import profile_texts
    return profile_texts(registry, WORDS)


def test_a_profile_longer_than_one_window_changes_the_ranking(cache_dir):
    vocabulary = ["alpha", "beta", "gamma", "delta", "filler"]
    people = {"P1": "alpha beta " + "filler " * 10 + "gamma delta", "P2": "alpha beta filler", "P3": "gamma"}
    registry = make_registry(people)
    ranks = {}
    for pooling in ("first", "max", "mean_best"):
        dense = attacker(cache_dir, VocabularyEncoder(vocabulary), window_pooling=pooling, window_tokens=4,
                         window_overlap=0, model=f"fake-vocab-{pooling}")
        if pooling == "first":  # the model's own truncation: only the first window of every text
            dense.encoder = TruncatingEncoder(vocabulary, 4)
        table = dense.attack(["d1"], ["gamma delta"], registry, WORDS)
        ranks[pooling] = table.candidate_ids[table.candidates[0, 0]]
    assert ranks["first"] == "P3"  # P1's "gamma delta" lies beyond its first window
    assert ranks["max"] == ranks["mean_best"] == "P1"


class TruncatingEncoder(VocabularyEncoder):
    """Reads the first ``limit`` words of each text, as a model reads its first max_seq_length word pieces."""

    def __init__(self, vocabulary, limit):
        super().__init__(vocabulary)
        self.max_seq_length = limit

    def encode(self, texts, **kwargs):
        return super().encode([" ".join(t.split()[:self.max_seq_length]) for t in texts], **kwargs)


# --------------------------------------------------------------------------------------------------
# precision: float32 (the reference) or int8 (dynamic quantisation of the default encoder)


class QuantisedStandIn(SentenceTransformerEncoder):
    """The default encoder class at precision int8, with a hashing encoder in place of the loaded model."""

    def __init__(self, model="fake-hashing-v1"):
        super().__init__(model, precision="int8")
        self.stand_in = HashingEncoder()
        self.stand_in.tokenizer = self.stand_in.max_seq_length = None

    def loaded(self):
        return self.stand_in


def test_precision_is_validated(cache_dir):
    with pytest.raises(ConfigError, match=r"precision must be one of float32, int8, found 'fp16'"):
        attacker(cache_dir, precision="fp16")
    with pytest.raises(ConfigError, match=r"CPU only, found device 'cuda'"):
        DenseAttacker(model="fake", precision="int8", device="cuda", cache_dir=str(cache_dir))
    # quantisation applies to the default encoder only: a supplied encoder is refused at int8
    with pytest.raises(ConfigError, match="default sentence-transformers encoder only"):
        attacker(cache_dir, precision="int8")
    with pytest.raises(ConfigError, match="default sentence-transformers encoder only"):
        attacker(cache_dir, encoder=QuantisedStandIn(), precision="float32")
    # the default encoder is built at the attacker's precision (and not loaded before it encodes)
    default = DenseAttacker(model="fake-name", precision="int8", device="cpu", cache_dir=str(cache_dir))
    assert isinstance(default.encoder, SentenceTransformerEncoder) and default.encoder.precision == "int8"
    assert DenseAttacker(model="fake-name", cache_dir=str(cache_dir)).encoder.precision == "float32"
    with pytest.raises(ConfigError, match="precision must be one of float32, int8"):
        SentenceTransformerEncoder("fake-name", precision="int4")


def test_precision_is_declared_after_the_batch_size():
    names = [p.name for p in SPEC.params]
    assert names[names.index("batch_size") + 1] == "precision"
    precision = SPEC.param("precision")
    assert precision.kind == "choice" and precision.default == "float32" and precision.choices == ("float32", "int8")
    assert SPEC.resolve({})["precision"] == "float32" and SPEC.resolve({"precision": "int8"})["precision"] == "int8"
    with pytest.raises(ConfigError, match=r"\[attacker.dense\] precision: expected one of 'float32', 'int8'"):
        SPEC.resolve({"precision": "bf16"})


def test_the_cache_key_and_the_params_state_the_precision(cache_dir):
    reference = attacker(cache_dir)
    # float32 keeps the key it always had: caches written before the option stay valid
    assert reference.cache_key == f"{reference.fingerprint()}|normalize=1|v1"
    assert reference.params()["precision"] == "float32" and "quantization" not in reference.params()
    quantised = attacker(cache_dir, encoder=QuantisedStandIn(), precision="int8")
    assert quantised.fingerprint() == reference.fingerprint() and quantised.cache_key != reference.cache_key
    assert quantised.cache_key.startswith(reference.cache_key + "|precision=int8")
    params = quantised.params()
    assert params["precision"] == "int8" and "per output channel" in params["quantization"]
    json.dumps(params)
    config = {p: AuditConfig(knowledge=WORDS, attacker=AttackerConfig.of(a)).config_id
              for p, a in (("float32", reference), ("int8", quantised))}
    assert config["float32"] != config["int8"]


def test_int8_and_float32_embeddings_never_share_the_cache(cache_dir):
    registry, docs, texts, _ = toy_world(n_docs=4)
    reference = attacker(cache_dir)
    reference.attack(docs, texts, registry, WORDS)
    assert reference.cache_misses_ == 2 and reference.encoder_calls_ > 0

    quantised = attacker(cache_dir, encoder=QuantisedStandIn(), precision="int8")
    quantised.attack(docs, texts, registry, WORDS)
    assert quantised.cache_hits_ == 0 and quantised.cache_misses_ == 2    # float32's embeddings are not served
    assert quantised.encoder.stand_in.calls

    for precision, encoder in (("float32", None), ("int8", QuantisedStandIn())):
        warm = attacker(cache_dir, encoder=encoder, precision=precision)
        warm.attack(docs, texts, registry, WORDS)
        assert warm.cache_hits_ == 2 and warm.encoder_calls_ == 0, precision


def test_an_edited_text_encodes_only_its_changed_windows_and_gets_the_same_embeddings(cache_dir):
    rows = {"P1": "alpha beta", "P2": "gamma"}
    encoder = HashingEncoder()
    dense = attacker(cache_dir, encoder=encoder, window_pooling="max", window_tokens=4, window_overlap=1)
    registry = make_registry(rows)
    text = " ".join(f"t{i}" for i in range(11))  # windows "t0 t1 t2 t3", "t3 t4 t5 t6", "t6 t7 t8 t9", "t9 t10"
    first = dense.attack(["d1"], [text], registry, WORDS)
    edited = text.replace("t10", "[REDACTED]")  # the last window changes, the first three do not
    before = len(encoder.calls)
    again = dense.attack(["d1"], [edited], registry, WORDS)
    assert sum(encoder.calls[before:], []) == ["t9 [REDACTED]"]  # the three unchanged windows are remembered
    fresh = attacker(cache_dir, encoder=HashingEncoder(), cache=False, window_pooling="max", window_tokens=4,
                     window_overlap=1).attack(["d1"], [edited], registry, WORDS)
    assert np.array_equal(again.weights, fresh.weights) and np.array_equal(again.candidates, fresh.candidates)
    assert first.candidates.shape == again.candidates.shape


def test_a_second_attack_on_the_same_profiles_reads_no_profile_again(cache_dir, monkeypatch):
    rows = {"P1": "alpha beta gamma delta epsilon", "P2": "gamma"}
    dense = attacker(cache_dir, encoder=HashingEncoder(), window_pooling="max", window_tokens=2, window_overlap=0)
    registry = make_registry(rows)
    dense.attack(["d1"], ["alpha beta"], registry, WORDS)
    cut = []
    original = dense.windows
    monkeypatch.setattr(dense, "windows", lambda texts: cut.append(list(texts)) or original(texts))
    again = dense.attack(["d1"], ["alpha gamma"], registry, WORDS)  # a re-scored text
    assert cut == [["alpha gamma"]]  # the query's windows only: the profiles' are the first attack's
    fresh = attacker(cache_dir, encoder=HashingEncoder(), cache=False, window_pooling="max", window_tokens=2,
                     window_overlap=0).attack(["d1"], ["alpha gamma"], registry, WORDS)
    assert np.array_equal(fresh.weights, again.weights) and np.array_equal(fresh.candidates, again.candidates)
    other = make_registry({**rows, "P3": "zeta"})
    dense.attack(["d1"], ["alpha gamma"], other, WORDS)
    assert len(cut) == 3 and len(cut[1]) == 3  # another registry: its profiles are cut again
