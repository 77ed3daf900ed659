"""The learned re-identifier on hand-made registries: the chunking rule by hand, scores by hand where the features do
not overlap, the ridge formula computed directly, identities weighed equally whatever their chunks, the leave-one-out
against refitting, the choice of the penalty, determinism, the memory refusal before any work, the attack's table and
the spec it is built from."""

import math
import re
import tomllib

import numpy as np
import pytest

import cpa_core.attack.attackers.learned as learned
from cpa_core.attack.attackers import BUILTIN
from cpa_core.attack.attackers.learned import (
    FALLBACK_RIDGE,
    RIDGE_GRID,
    SPEC,
    LearnedAttacker,
    LearnedModel,
    check_training_fits,
    chunk_count,
    chunk_length,
    cut,
    first_guess_share,
    leave_one_out_scores,
    training_bytes,
)
from cpa_core.attack.registry import get_spec
from cpa_core.attack.spec import BuildContext
from cpa_core.attack.temperature import FALLBACK_TEMPERATURE, TEMPERATURE_GRID
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import load_registry

CSV = b"""identity_id,city,hobby
a,Paris,zymurgy and chess
b,Paris,chess at the club
c,Lyon,chess and painting
d,Nice,painting
"""
LEVEL = KnowledgeLevel("K", ("city", "hobby"))
TEXT = KnowledgeLevel("T", ("text",))
QUERIES = ["I brew zymurgy in Paris", "the chess club", "painting in Lyon", "a painting from Nice", "qqq xqx"]


@pytest.fixture(scope="module")
def registry():
    return load_registry(CSV, name="r.csv")


def text_registry(texts: dict[str, str]):
    rows = "".join(f"{identity},{text}\n" for identity, text in texts.items())
    return load_registry(f"identity_id,text\n{rows}".encode(), name="t.csv")


def written(n_people: int, words: int, seed: int = 0) -> dict[str, str]:
    """Profiles of ``words`` words each: every person writes their own few words among words everyone uses."""
    rng = np.random.default_rng(seed)
    common = [f"common{i}" for i in range(30)]
    texts = {}
    for person in range(n_people):
        own = [f"own{person}x{i}" for i in range(4)]
        texts[f"p{person:02d}"] = " ".join(rng.choice(own if rng.random() < 0.3 else common) for _ in range(words))
    return texts


def attack(registry, texts, level=LEVEL, **kwargs):
    kwargs.setdefault("temperature", 1.0)  # attacked directly, outside an audit
    return LearnedAttacker(**kwargs).attack([f"d{i}" for i in range(len(texts))], texts, registry, level)


# ---------------------------------------------------------------------------------------------- chunks by hand


def test_the_chunking_rule_by_hand():
    assert [chunk_count(w, 100) for w in (0, 1, 149, 150, 249, 250, 1000)] == [1, 1, 1, 2, 2, 3, 10]
    assert cut("a b c d e", 2) == ["a b", "c d e"] and cut("a b c d e f g", 3) == ["a b", "c d", "e f g"]
    assert cut("one", 1) == ["one"] and cut("", 1) == [""]
    assert chunk_length([1000, 1000, 10], 100, 100) == 100  # 10 + 10 + 1 chunks: under the cap
    # 21 chunks at 100 words > 5: the shortest length giving at most 5 is 401 (round(1000 / 401) = 2, at 400: 3)
    assert chunk_length([1000, 1000, 10], 100, 5) == 401
    assert sum(chunk_count(w, 401) for w in (1000, 1000, 10)) == 5 and chunk_count(1000, 400) == 3
    # one chunk per profile at least: 3 chunks, from 667 words (1000 / 666 is above one and a half)
    assert chunk_length([1000, 1000, 10], 100, 1) == 667 and chunk_count(1000, 666) == 2


def test_the_model_trains_on_the_chunks_of_the_rule():
    texts = {"a": " ".join(f"w{i}" for i in range(250)), "b": "two words", "c": " ".join(f"v{i}" for i in range(149))}
    model = LearnedModel(chunk_words=100, ridge=1.0).fit(list(texts.values()), list(texts))
    assert model.chunk_length_ == 100 and model.owners_.tolist() == [0, 0, 0, 1, 2]
    capped = LearnedModel(chunk_words=100, max_chunks=3, ridge=1.0).fit(list(texts.values()), list(texts))
    assert capped.owners_.tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------------------------- scores


def test_scores_by_hand_where_identities_share_no_feature():
    """``abc`` and ``xyz`` share no word and no character n-gram: ``K`` is the identity, a document equal to a profile
    scores 1 for it and 0 for the other (``(1 / (1 + λ)) x (1 + λ)``), and ``abc xyz`` scores 1/√2 for both (half its
    word vector and half its character vector on each)."""
    for ridge in (0.5, 3.0):
        model = LearnedModel(chunk_words=1, ridge=ridge).fit(["abc", "xyz"], ["a", "b"])
        scores = model.scores(model.features(["abc", "xyz", "abc xyz", "nothing"]))
        assert scores == pytest.approx(np.array([[1, 0], [0, 1], [math.sqrt(0.5)] * 2, [0, 0]]), abs=1e-6)


def test_identities_weigh_the_same_whatever_their_number_of_chunks():
    """A profile repeated three times is three identical chunks of weight 1/3 each: the same classifier as one chunk
    (by hand: 3 z + 3 λ z = 1 for each copy, and the identity's score is 3 z (1 + λ) = 1). Unweighted chunks would
    give it 3 / (3 + λ) (1 + λ) instead. (The repeated profile also holds the word pair "abc abc", which no query
    here has.)"""
    once = LearnedModel(chunk_words=1, ridge=0.5).fit(["abc", "xyz"], ["a", "b"])
    thrice = LearnedModel(chunk_words=1, ridge=0.5).fit(["abc abc abc", "xyz"], ["a", "b"])
    assert thrice.owners_.tolist() == [0, 0, 0, 1]
    queries = ["abc", "xyz", "abc xyz", "xyz abc xyz"]
    assert thrice.scores(thrice.features(queries)) == pytest.approx(once.scores(once.features(queries)), abs=1e-6)
    texts = written(8, 90, seed=3)
    profiles = list(texts.values())
    repeated = [profiles[0] + " " + profiles[0] + " " + profiles[0]] + profiles[1:]
    base = LearnedModel(chunk_words=90, ridge=0.3).fit(profiles, list(texts))
    tripled = LearnedModel(chunk_words=90, ridge=0.3).fit(repeated, list(texts))
    assert np.bincount(tripled.owners_).tolist() == [3] + [1] * 7
    probes = [profiles[0][:200], profiles[1][:200], "common1 common2 own0x1"]
    assert tripled.scores(tripled.features(probes)) == pytest.approx(base.scores(base.features(probes)), abs=1e-5)


def reference_scores(model: LearnedModel, profiles: list[str], queries: list[str]) -> np.ndarray:
    """The module docstring's formula in float64 from the model's features: ``(Q Xᵀ) (K + λ N)⁻¹ Y (1 + λ)``."""
    chunks = [piece for text in profiles for piece in cut(text, chunk_count(len(text.split()), model.chunk_length_))]
    features = model.features(chunks).toarray().astype(np.float64)
    owners = model.owners_
    kernel = features @ features.T + np.diag(model.ridge_ * np.bincount(owners)[owners])
    indicator = np.zeros((owners.size, len(profiles)))
    indicator[np.arange(owners.size), owners] = 1.0
    products = model.features(queries).toarray().astype(np.float64) @ features.T
    return products @ np.linalg.solve(kernel, indicator) * (1 + model.ridge_)


@pytest.mark.parametrize("share, block", [(learned.DENSE_SHARE, learned.ROW_BLOCK), (0.5, 4), (2.0, 3)])
def test_scores_are_the_ridge_formula_whatever_the_blocks_and_the_dense_features(monkeypatch, share, block):
    """The kernel computed in row blocks, its frequent features as a dense product and the others sparse (every
    feature dense, half, none), factored once: the direct formula's scores."""
    monkeypatch.setattr(learned, "DENSE_SHARE", share)
    monkeypatch.setattr(learned, "ROW_BLOCK", block)
    texts = written(6, 70, seed=1)
    profiles = list(texts.values())
    model = LearnedModel(chunk_words=20, ridge=0.2).fit(profiles, list(texts))
    assert model.owners_.size == 24 and (model.dense_.size > 0) == (share <= 1)
    queries = [profiles[2][:150], "own4x0 common3", "no known word", profiles[5]]
    assert model.scores(model.features(queries)) == pytest.approx(reference_scores(model, profiles, queries),
                                                                  rel=1e-4, abs=1e-5)


def test_a_word_only_one_identity_uses_names_it(registry):
    for ridge in ("auto", 0.05):
        table = attack(registry, QUERIES, ridge=ridge)
        named = table.candidate_ids[table.candidates[:, 0]].tolist()
        assert named[:4] == ["a", "b", "c", "d"]  # zymurgy: a; club: b; Lyon: c; Nice: d
        assert table.weights[4].tolist() == pytest.approx([0.25] * 4)  # no feature in common: every identity alike


# ---------------------------------------------------------------------------------------------- the penalty


def test_the_leave_one_out_equals_refitting_without_each_chunk():
    rng = np.random.default_rng(5)
    features = rng.random((10, 6))
    kernel = features @ features.T
    owners = np.array([0, 0, 1, 1, 1, 2, 2, 3, 3, 3])
    ridge = 0.3
    penalty = ridge * np.bincount(owners)[owners]  # the other chunks keep their weights
    indicator = np.eye(4)[owners]
    expected = np.empty((10, 4))
    for chunk in range(10):
        rest = np.arange(10) != chunk
        system = kernel[np.ix_(rest, rest)] + np.diag(penalty[rest])
        expected[chunk] = kernel[chunk, rest] @ np.linalg.solve(system, indicator[rest])
    lower_garbage = np.triu(kernel) + np.tril(np.full((10, 10), np.nan), -1)  # only the upper triangle is read
    assert leave_one_out_scores(lower_garbage, owners, ridge) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert first_guess_share(expected, owners) == np.mean(expected.argmax(axis=1) == owners)
    assert first_guess_share(np.zeros((3, 2)), np.array([0, 1, 1])) == 0  # a tie names nobody


def test_auto_penalty_is_the_largest_within_one_standard_error_of_the_best_leave_one_out():
    texts = written(12, 60, seed=2)
    model = LearnedModel(chunk_words=20).fit(list(texts.values()), list(texts))
    assert np.bincount(model.owners_).tolist() == [3] * 12
    assert list(model.loo_) == list(RIDGE_GRID) and all(0 <= share <= 1 for share in model.loo_.values())
    best = max(model.loo_.values())
    within = [ridge for ridge, share in model.loo_.items() if share >= best - math.sqrt(best * (1 - best) / 36)]
    assert model.ridge_ == max(within)  # one standard error of the best share over 36 held-out chunks
    few = dict(list(texts.items())[:9])  # fewer than 10 identities of two chunks: nothing to hold out
    fallback = LearnedModel(chunk_words=20).fit(list(few.values()), list(few))
    assert fallback.ridge_ == FALLBACK_RIDGE and fallback.loo_ == {}


def test_the_same_registry_gives_the_same_model(monkeypatch):
    texts = written(14, 60, seed=4)
    first = LearnedModel(chunk_words=20).fit(list(texts.values()), list(texts))
    again = LearnedModel(chunk_words=20).fit(list(texts.values()), list(texts))
    assert first.ridge_ == again.ridge_ and first.loo_ == again.loo_
    assert np.array_equal(first.factor_[0], again.factor_[0])
    queries = ["common1 own3x2", list(texts.values())[7]]
    assert np.array_equal(first.scores(first.features(queries)), again.scores(again.features(queries)))
    registry = text_registry(texts)
    tables = [LearnedAttacker(temperature=0.5, chunk_words=20).attack(["d0", "d1"], queries, registry, TEXT)
              for _ in range(2)]
    assert np.array_equal(tables[0].candidates, tables[1].candidates)
    assert np.array_equal(tables[0].weights, tables[1].weights)
    monkeypatch.setattr(learned, "LOO_CHUNKS", 30)  # a sample of 10 identities: which ones follows their ids
    order = sorted(texts, reverse=True)
    sampled = LearnedModel(chunk_words=20).fit(list(texts.values()), list(texts))
    reordered = LearnedModel(chunk_words=20).fit([texts[i] for i in order], order)
    assert sampled.loo_ == reordered.loo_ and sampled.ridge_ == reordered.ridge_


# ---------------------------------------------------------------------------------------------- memory


def test_a_registry_too_large_is_refused_in_one_line_naming_what_it_needs():
    gigabytes = 2**30
    with pytest.raises(ConfigError) as refused:
        check_training_fits(100_000, 100_000, 5_000_000, 512, available=21 * gigabytes)
    message = str(refused.value)
    assert "\n" not in message
    needed = training_bytes(100_000, 100_000, 5_000_000, 512)
    assert needed > 4e10  # the kernel alone is 40 billion bytes
    assert message.startswith("the learned attacker would train on 100,000 chunks of 100,000 profiles, which needs "
                              f"about {needed / gigabytes:.1f} GB of memory")
    assert "a 100,000 x 100,000 kernel matrix" in message and "this machine has 21.0 GB available" in message
    assert message.endswith("declare another attacker for this registry (tfidf or lexical_fusion): the learned one "
                            "trains on one chunk per profile at least")

    with pytest.raises(ConfigError, match=r"declare \[attacker.learned\] max_chunks = (\d+) or fewer") as capped:
        check_training_fits(50_000, 2_000, 20_000_000, 512, available=4 * gigabytes)  # 9.8 GB
    fits = int(re.search(r"max_chunks = (\d+)", str(capped.value)).group(1))
    assert 2_000 <= fits < 50_000 and training_bytes(fits, 2_000, 20_000_000, 512) <= 4 * gigabytes
    assert training_bytes(fits + 50, 2_000, 20_000_000, 512) > 4 * gigabytes  # the most that fits, to 50 chunks
    check_training_fits(10_000, 10_000, 500_000, 512, available=4 * gigabytes)  # 0.5 GB: fits


def test_a_machine_that_does_not_say_its_memory_is_not_checked(monkeypatch):
    monkeypatch.setattr(learned, "available_memory", lambda: None)
    check_training_fits(10**6, 10**6, 10**8, 512)


def test_the_spec_refuses_before_any_work(registry, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("trained")

    monkeypatch.setattr(LearnedModel, "fit", never)
    monkeypatch.setattr(learned, "available_memory", lambda: 100 << 10)  # 100 kB
    with pytest.raises(ConfigError, match=r"^the learned attacker would train on 4 chunks of 4 profiles.*0.1 MB avail"):
        SPEC.build(SPEC.resolve({}), BuildContext(registry, LEVEL))
    with pytest.raises(ConfigError, match="0.1 MB available"):
        LearnedAttacker().check_fits(registry, LEVEL, available=120 << 10)
    LearnedAttacker().check_fits(registry, LEVEL, available=1 << 20)  # 1 MB: fits
    assert LearnedAttacker().plan(registry, LEVEL) == (4, 4, 15)  # 4 + 5 + 4 + 2 words


# ---------------------------------------------------------------------------------------------- the attack


def test_weights_are_a_softmax_of_the_scores_over_the_whole_pool(registry):
    attacker = LearnedAttacker(temperature=0.1, ridge=0.05, top_k=2)
    table = attacker.attack([f"d{i}" for i in range(len(QUERIES))], QUERIES, registry, LEVEL)
    model = attacker.model_
    scores = model.scores(model.features(QUERIES)).astype(np.float64)
    assert scores.shape == (len(QUERIES), 4) and table.width == 2
    for row in range(len(QUERIES)):
        exponentials = np.exp((scores[row] - scores[row].max()) / 0.1)
        order = np.argsort(-scores[row], kind="stable")
        assert table.candidates[row].tolist() == order[:2].tolist()
        assert table.weights[row] == pytest.approx(exponentials[order[:2]] / exponentials.sum(), rel=1e-6)
    tied = table.cut_ties * table.weights[:, -1]
    assert table.weights.sum(axis=1) + tied + table.tail_mass == pytest.approx(np.ones(len(QUERIES)))


def test_blocks_of_documents_and_the_model_trained_once(registry):
    reference = attack(registry, QUERIES, chunk_size=512)
    for chunk_size in (1, 2):
        table = attack(registry, QUERIES, chunk_size=chunk_size)
        assert np.array_equal(table.candidates, reference.candidates)
        assert np.allclose(table.weights, reference.weights, rtol=1e-6, atol=0)  # float32 products, other shapes
    attacker = LearnedAttacker(temperature=1.0)
    steps = []
    attacker.attack(["d0"], ["the chess club"], registry, LEVEL, progress=lambda done, total, step: steps.append(step))
    model = attacker.model_
    assert "training the learned attacker" in steps
    attacker.attack(["d1"], ["painting"], registry, LEVEL)
    assert attacker.model_ is model  # an edited document re-scored trains nothing
    attacker.attack(["d1"], ["painting"], registry, KnowledgeLevel("C", ("city",)))
    assert attacker.model_ is not model


def test_auto_temperature_is_chosen_on_a_tuning_fold(registry):
    attacker = LearnedAttacker()
    texts = QUERIES[:4] * 3
    ids = [f"d{i}" for i in range(len(texts))]
    learned_inputs = attacker.learn(ids, texts, registry, LEVEL, ["a", "b", "c", "d"] * 3)
    assert learned_inputs["temperature"] in TEMPERATURE_GRID + (FALLBACK_TEMPERATURE,)
    assert set(learned_inputs["tuning_documents"]) <= set(ids)
    assert attacker.attack(ids, texts, registry, LEVEL).width == 4
    with pytest.raises(ConfigError, match="temperature 'auto'"):
        LearnedAttacker().attack(ids, texts, registry, LEVEL)


def test_evidence_spans_are_the_tfidf_explainers(registry):
    attacker = LearnedAttacker(temperature=1.0)
    attacker.attack(["d0"], ["the chess club"], registry, LEVEL)
    spans = attacker.explainer(registry, LEVEL).spans("The chess club", [1])
    assert [s.term for s in spans] == ["chess", "club"]


def test_invalid_settings_and_profiles_without_words(registry):
    for kwargs, part in (({"ridge": 0}, "ridge must be a number above 0"), ({"ridge": True}, "ridge"),
                         ({"ridge": "x"}, "ridge"), ({"top_k": 0}, "top-K"), ({"chunk_words": 0}, "chunk_words"),
                         ({"max_chunks": 0}, "max_chunks"), ({"temperature": 0}, "temperature must be")):
        with pytest.raises(ConfigError, match=part):
            LearnedAttacker(**kwargs)
    codes = load_registry(b"identity_id,code\na,x\nb,y\n", name="codes.csv")  # one-letter tokens are no words
    with pytest.raises(ConfigError, match="the learned attacker cannot train on the profile texts"):
        attack(codes, ["x y"], level=KnowledgeLevel("K", ("code",)))


# ---------------------------------------------------------------------------------------------- declaration


def test_params_for_the_manifest():
    params = LearnedAttacker(temperature=0.2, top_k=3, ridge=0.5).params()
    assert params["attacker"] == "learned" and params["ridge"] == 0.5 and params["chunk_words"] == 300
    assert params["ridge_rule"]["grid"] == list(RIDGE_GRID) and params["ridge_rule"]["fallback"] == FALLBACK_RIDGE
    assert params["temperature"] == 0.2 and params["top_k"] == 3 and "clue_extractor" not in params


def test_spec_is_built_in_and_declares_its_parameters(registry):
    assert SPEC in BUILTIN and get_spec("learned") is SPEC
    assert SPEC.uses_clues and not SPEC.runs_on_cluster and not SPEC.sends_text and not SPEC.needs_scores
    assert [p.name for p in SPEC.params] == ["temperature", "ridge", "chunk_words", "max_chunks", "chunk_size"]
    assert SPEC.param("temperature") is get_spec("tfidf").param("temperature")  # one --temperature option
    defaults = SPEC.resolve({})
    assert defaults == {name: getattr(LearnedAttacker(), name) for name in defaults}
    attacker = SPEC.build(defaults, BuildContext(registry, LEVEL, top_k=5))
    assert isinstance(attacker, LearnedAttacker) and attacker.top_k == 5 and attacker.ridge == "auto"
    assert attacker.model_ is None  # built, not trained
    assert SPEC.resolve({"ridge": 0.25, "max_chunks": 100})["ridge"] == 0.25
    for bad in (0, -1.0, "often"):
        with pytest.raises(ConfigError, match=r"\[attacker.learned\] ridge: expected a number greater than 0"):
            SPEC.resolve({"ridge": bad})


def test_the_docstring_table_is_a_valid_declaration():
    text = learned.__doc__.split("::", 1)[1]
    declared = tomllib.loads("\n".join(line[4:] for line in text.splitlines()))
    assert declared["attacker"]["name"] == "learned"
    section = declared["attacker"]["learned"]
    assert set(section) == {p.name for p in SPEC.params} and SPEC.resolve(section) == SPEC.resolve({})


def test_what_it_trained_on_the_registry_is_said_for_the_manifest(registry):
    attacker = LearnedAttacker(temperature=1.0, ridge=0.5)
    assert attacker.trained() == {}  # nothing trained yet
    attacker.attack(["d0"], ["the chess club"], registry, LEVEL)
    trained = attacker.trained()
    assert trained["ridge"] == 0.5 and trained["ridge_chosen"] == "declared"
    assert trained["chunks"] == attacker.model_.owners_.size and "ridge_leave_one_out_first_guess" not in trained
    auto = LearnedAttacker(temperature=1.0)
    auto.attack(["d0"], ["the chess club"], registry, LEVEL)
    chosen = auto.trained()
    assert chosen["ridge"] == auto.model_.ridge_ and chosen["ridge_chosen"] in (
        "leave-one-out over the registry's chunks", "fallback")
