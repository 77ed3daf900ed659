"""Fake sentence encoders whose embeddings can be computed by hand, a toy world of people and documents, and the
dense attacker built on them with its cache in a test folder: shared by the dense attacker's tests and the embedding
cache's. The ``cache_dir`` fixture: import ``cache_dir_fixture`` (``# noqa: F401``) and ask for it by name."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from word_registry import make_registry

from cpa_core.attack.attackers.dense import DenseAttacker


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


@pytest.fixture(name="cache_dir")
def cache_dir_fixture(tmp_path):
    """The embedding cache folder of a test (not created)."""
    return tmp_path / "embeddings"


def attacker(cache_dir, encoder=None, **kwargs) -> DenseAttacker:
    kwargs.setdefault("model", "fake-hashing-v1")
    kwargs.setdefault("temperature", 1.0)  # attacked directly, outside an audit: no labelled documents to learn from
    return DenseAttacker(encoder=encoder or HashingEncoder(), cache_dir=str(cache_dir), **kwargs)
