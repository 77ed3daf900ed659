"""A registry fit (index or trained model) is shared by the attackers of one process that would fit the same one, and
only by them: same kind, same fitting settings, same identities and profile texts."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pandas as pd
from word_registry import WORDS, make_registry

from cpa_core.attack.attackers.bm25 import Bm25Attacker
from cpa_core.attack.attackers.learned import LearnedAttacker
from cpa_core.attack.attackers.lexical_fusion import LexicalFusionAttacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.fitted import profiles_digest
from cpa_core.io.tables import Registry, ValidationReport

PROFILES = {"P1": "alpha beta chess club", "P2": "gamma violin lessons", "P3": "alpha marathon runner",
            "P4": "delta delta sailing boat"}
KINDS = {TfidfAttacker: "index_", Bm25Attacker: "index_", LexicalFusionAttacker: "index_",
         LearnedAttacker: "model_"}


def fit(attacker, registry):
    attacker.attack(["d"], ["alpha chess"], registry, WORDS)
    return getattr(attacker, KINDS[type(attacker)])


def test_attackers_declared_alike_share_one_fit_and_attack_alike():
    registry = make_registry(PROFILES)
    for kind in KINDS:
        first, second = kind(temperature=1.0), kind(temperature=0.5)  # the temperature is not a fitting setting
        assert fit(first, registry) is fit(second, registry), kind
        again = make_registry(PROFILES)  # the same profiles read again: the same fit
        third = kind(temperature=1.0)
        assert fit(third, again) is fit(first, registry), kind
        a, b = (x.attack(["d"], ["alpha chess"], registry, WORDS) for x in (first, third))
        assert np.array_equal(a.weights, b.weights) and np.array_equal(a.candidates, b.candidates)


def test_other_settings_profiles_identities_or_kinds_fit_again():
    registry = make_registry(PROFILES)
    assert fit(TfidfAttacker(temperature=1.0), registry) is not fit(TfidfAttacker(temperature=1.0, ngram_max=2),
                                                                     registry)
    assert fit(Bm25Attacker(temperature=1.0), registry) is not fit(Bm25Attacker(temperature=1.0, k1=2.0), registry)
    assert fit(LearnedAttacker(temperature=1.0), registry) is not fit(LearnedAttacker(temperature=1.0, ridge=3.0),
                                                                       registry)
    edited = make_registry({**PROFILES, "P4": "delta sailing boat"})
    assert fit(TfidfAttacker(temperature=1.0), registry) is not fit(TfidfAttacker(temperature=1.0), edited)
    renamed = make_registry({("Q1" if k == "P1" else k): v for k, v in PROFILES.items()})
    assert fit(LearnedAttacker(temperature=1.0), registry) is not fit(LearnedAttacker(temperature=1.0), renamed)
    assert fit(TfidfAttacker(temperature=1.0), registry) is not fit(Bm25Attacker(temperature=1.0), registry)


def test_two_mappings_of_the_same_file_are_two_fits():
    """Two registries from the same bytes (same checksum) whose profiles differ: never one fit for both."""
    frame = pd.DataFrame({"identity_id": list(PROFILES), "words": list(PROFILES.values()),
                          "other": ["violin alpha", "violin beta", "gamma chess", "delta club"]}, dtype=object)
    report = ValidationReport("registry.csv", 4, 4)
    one = Registry(frame[["identity_id", "words"]], "registry.csv", "0" * 64, report)
    two = Registry(frame[["identity_id", "other"]].rename(columns={"other": "words"}), "registry.csv", "0" * 64,
                   report)
    first = TfidfAttacker(temperature=1.0)
    assert fit(first, one) is not fit(TfidfAttacker(temperature=1.0), two)


def test_a_fit_nobody_holds_is_freed():
    registry = make_registry(PROFILES)
    attacker, other = TfidfAttacker(temperature=1.0), TfidfAttacker(temperature=1.0)
    held = weakref.ref(fit(attacker, registry))
    assert fit(other, registry) is held()
    del attacker
    gc.collect()
    assert held() is not None  # ``other`` still holds it
    del other
    gc.collect()
    assert held() is None


def test_the_digest_keeps_identities_and_texts_apart():
    assert profiles_digest(["a", "b"], ["x", "y"]) != profiles_digest(["a", "b"], ["y", "x"])
    assert profiles_digest(["ab"], ["c"]) != profiles_digest(["a"], ["bc"])
    assert profiles_digest(["a"], ["b c"]) != profiles_digest(["a"], ["b", "c"])
    assert profiles_digest([], []) == profiles_digest([], [])
