"""The on-disk cache of text embeddings, as the dense attacker uses it (fake encoders: tests/dense_encoders.py): a
warm re-attack encodes nothing, changed texts re-encode, corrupt files are rewritten, the key is the model, the
folder follows ``CPA_CACHE_DIR``; and the cache by itself: the exact digest of a list of texts, files by key and
texts, atomic writes."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest
from dense_encoders import (
    HashingEncoder,
    attacker,
    cache_dir_fixture,  # noqa: F401 (the fixture cache_dir)
    toy_world,
)
from word_registry import WORDS

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.embedding_cache import EmbeddingCache, default_cache_dir, texts_digest
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry


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


KEY = "model-fingerprint|normalize=True"


def test_a_file_per_key_and_list_of_texts(tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    digest = texts_digest(["a", "b"])
    key_part = hashlib.sha256(KEY.encode("utf-8")).hexdigest()[:16]
    assert cache.path(KEY, digest) == tmp_path / "emb" / f"emb-{key_part}-{digest}.npy"  # the documented name
    assert len(digest) == 64 and cache.path("other key", digest) != cache.path(KEY, digest)


def test_saved_embeddings_load_back_as_float32_and_are_counted(tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    digest = texts_digest(["a", "b"])
    assert cache.load(KEY, digest, 2) is None and (cache.hits, cache.misses, cache.corrupt) == (0, 1, 0)
    embeddings = np.array([[1.0, 0.5, 0.25], [0.0, -1.0, 2.0]])  # float64 in
    path = cache.save(KEY, digest, embeddings)
    assert path == cache.path(KEY, digest) and cache.writes == 1
    assert [p.name for p in (tmp_path / "emb").iterdir()] == [path.name]  # no temporary file left
    loaded = cache.load(KEY, digest, 2, dim=3)
    assert loaded.dtype == np.float32 and loaded.tolist() == embeddings.tolist()  # exact in float32
    assert (cache.hits, cache.misses, cache.corrupt) == (1, 1, 0)


@pytest.mark.parametrize("stored, rows, dim", [
    (np.ones((2, 3), dtype=np.float32), 3, None),          # other texts' count
    (np.ones((2, 3), dtype=np.float32), 2, 4),             # another model's dimension
    (np.ones((2, 0), dtype=np.float32), 2, None),          # no dimension at all
    (np.ones(6, dtype=np.float32), 2, None),               # not a matrix
    (np.ones((2, 3), dtype=np.int32), 2, None),            # not floating point
    (np.array([[1.0, np.inf, 0.0]] * 2), 2, None),         # not finite
])
def test_an_unusable_file_is_a_miss_and_counted_corrupt(tmp_path, stored, rows, dim):
    cache = EmbeddingCache(tmp_path)
    digest = texts_digest(["x"])
    np.save(cache.path(KEY, digest), stored)
    assert cache.load(KEY, digest, rows, dim) is None
    assert (cache.hits, cache.misses, cache.corrupt) == (0, 1, 1)


def test_an_unwritable_folder_warns_once(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    cache = EmbeddingCache(blocker / "emb")
    with pytest.warns(RuntimeWarning, match="cannot write the embedding cache"):
        assert cache.save(KEY, texts_digest(["a"]), np.ones((1, 2))) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second failure is silent
        assert cache.save(KEY, texts_digest(["b"]), np.ones((1, 2))) is None
    assert cache.writes == 0


def test_the_default_folder_is_the_cache_roots(tmp_path, monkeypatch):
    monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path / "root"))
    assert EmbeddingCache().directory == tmp_path / "root" / "embeddings"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert EmbeddingCache("~/emb").directory == tmp_path / "home" / "emb"
