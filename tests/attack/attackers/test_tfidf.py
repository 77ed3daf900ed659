"""The TF-IDF attacker on a hand-made registry: ranking, softmax weights, top-K, chunks, explanations
and the spec it is built from."""

import math

import numpy as np
import pytest

from cpa_core.attack.attackers.tfidf import SPEC, TfidfAttacker
from cpa_core.attack.spec import BuildContext
from cpa_core.attack.tfidf_index import TfidfIndex
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.io.tables import load_registry

CSV = b"""identity_id,city,hobby,secret
a,Paris,zymurgy and chess,alpha
b,Paris,chess at the club,beta
c,Lyon,chess and painting,gamma
d,Nice,painting,delta
"""
# profile texts under LEVEL: "Paris. zymurgy and chess", "Paris. chess at the club", "Lyon. chess and painting",
# "Nice. painting"; document frequencies: paris 2, zymurgy 1, and 2, chess 3, at 1, the 1, club 1, lyon 1,
# painting 2, nice 1
LEVEL = KnowledgeLevel("K", ("city", "hobby"))
CITY_ONLY = KnowledgeLevel("C", ("city",))
QUERIES = ["I brew zymurgy in Paris", "the chess club", "painting in Lyon", "a painting from Nice",
           "chess and zymurgy", "nothing in common", "Paris club painting"]


def idf(df: int, n: int = 4) -> float:
    """scikit-learn's smoothed idf."""
    return math.log((1 + n) / (1 + df)) + 1


@pytest.fixture(scope="module")
def registry():
    return load_registry(CSV, name="r.csv")


@pytest.fixture(scope="module")
def index(registry):
    return TfidfIndex().fit(profile_texts(registry, LEVEL))


def similarities(index, queries):
    return index.similarities(index.transform(queries))(0, len(queries))


def attack(registry, texts, level=LEVEL, **kwargs):
    kwargs.setdefault("temperature", 1.0)  # attacked directly, outside an audit
    return TfidfAttacker(**kwargs).attack([f"d{i}" for i in range(len(texts))], texts, registry, level)


def test_vocabulary_is_the_level_fields_only(index):
    assert sorted(index.terms_.tolist()) == ["and", "at", "chess", "club", "lyon", "nice", "painting", "paris",
                                             "the", "zymurgy"]


def test_cosine_similarity_by_hand(index):
    # every tf is 1 (sublinear), so profile a's vector is (idf of each term) / norm
    norm_a = math.sqrt(idf(2) ** 2 + idf(1) ** 2 + idf(2) ** 2 + idf(3) ** 2)  # paris, zymurgy, and, chess
    norm_d = math.sqrt(idf(1) ** 2 + idf(2) ** 2)  # nice, painting
    sims = similarities(index, ["zymurgy", "painting", "unknown words"])
    assert sims.shape == (3, 4)
    assert sims[0].tolist() == pytest.approx([idf(1) / norm_a, 0, 0, 0], rel=1e-5)
    assert sims[1, 3] == pytest.approx(idf(2) / norm_d, rel=1e-5)
    assert sims[1, 0] == 0 and sims[1, 1] == 0 and sims[1, 2] > 0
    assert (sims[2] == 0).all()


def test_a_rare_shared_word_ranks_its_profile_first(registry):
    table = attack(registry, ["I brew zymurgy in Paris", "a lovely club"])
    assert table.candidate_ids[table.candidates[0, 0]] == "a"
    assert table.candidate_ids[table.candidates[0, 1]] == "b"  # shares only "paris"
    assert table.candidate_ids[table.candidates[1, 0]] == "b"
    assert table.weights[0, 0] > table.weights[0, 1] > table.weights[0, 2]


def test_weights_are_a_softmax_of_the_similarities_at_the_temperature(registry, index):
    for temperature in (0.1, 0.5, 2.0):
        table = attack(registry, QUERIES, temperature=temperature)
        sims = similarities(index, QUERIES)
        for row in range(len(QUERIES)):
            s = sims[row, table.candidates[row]]
            assert (np.diff(s) <= 1e-7).all()  # ranked by decreasing similarity
            w = table.weights[row]
            assert w.sum() == pytest.approx(1.0)
            assert w[0] / w[1] == pytest.approx(math.exp((s[0] - s[1]) / temperature), rel=1e-5)
            assert w[0] / w[-1] == pytest.approx(math.exp((s[0] - s[-1]) / temperature), rel=1e-5)
            expected = np.exp(s / temperature) / np.exp(s / temperature).sum()
            assert w == pytest.approx(expected, rel=1e-5)


def test_a_smaller_temperature_concentrates_the_weight(registry):
    hot, cold = (attack(registry, ["I brew zymurgy in Paris"], temperature=t) for t in (2.0, 0.1))
    assert cold.weights[0, 0] > hot.weights[0, 0] > 0.25


def test_the_table_describes_the_attack(registry):
    table = attack(registry, QUERIES)
    assert table.doc_ids.tolist() == [f"d{i}" for i in range(len(QUERIES))]
    assert table.queries == tuple(QUERIES)
    assert table.candidate_ids.tolist() == ["a", "b", "c", "d"]
    assert table.width == 4 and table.pool_sizes.tolist() == [4] * len(QUERIES)
    assert sorted(table.candidates[0].tolist()) == [0, 1, 2, 3]


def test_top_k_truncates_the_pool_and_keeps_the_weights(registry, index):
    full = attack(registry, QUERIES, temperature=0.5)
    top2 = attack(registry, QUERIES, temperature=0.5, top_k=2)
    assert top2.width == 2 and top2.pool_sizes.tolist() == [2] * len(QUERIES)
    sims = similarities(index, QUERIES)
    for row in range(len(QUERIES)):
        s = sims[row, top2.candidates[row]]
        # the two kept candidates are two of the best (ties may be broken either way)
        assert s.min() >= np.sort(sims[row])[-2] - 1e-7
        tied = top2.cut_ties[row] * top2.weights[row, -1]  # cut candidates tied with the last kept: its tie group
        assert top2.weights[row].sum() + tied + top2.tail_mass[row] == pytest.approx(1.0)  # no renormalisation
        assert top2.weights[row] == pytest.approx(full.weights[row, :2])
        assert top2.weights[row, 0] / top2.weights[row, 1] == pytest.approx(math.exp((s[0] - s[1]) / 0.5), rel=1e-5)
    assert top2.candidates[0].tolist() == full.candidates[0, :2].tolist() == [0, 1]  # no tie at the top there
    assert attack(registry, QUERIES, top_k=10).width == 4


def test_chunk_size_does_not_change_the_table(registry):
    for top_k in (None, 2):
        reference = attack(registry, QUERIES, top_k=top_k, chunk_size=512)
        for chunk_size in (1, 3):
            table = attack(registry, QUERIES, top_k=top_k, chunk_size=chunk_size)
            assert np.array_equal(table.candidates, reference.candidates)
            assert np.allclose(table.weights, reference.weights, rtol=0, atol=1e-12)


def test_a_field_outside_the_level_is_not_searched(registry):
    # "alpha" is only in the secret field
    hidden = attack(registry, ["alpha"])
    assert hidden.weights[0].tolist() == pytest.approx([0.25] * 4)
    seen = attack(registry, ["alpha"], level=KnowledgeLevel("S", ("secret",)))
    assert seen.candidate_ids[seen.candidates[0, 0]] == "a" and seen.weights[0, 0] > 0.25
    # under the city-only level, the hobby words match nothing
    city = attack(registry, ["zymurgy chess club"], level=CITY_ONLY)
    assert city.weights[0].tolist() == pytest.approx([0.25] * 4)


def terms(spans) -> list[str]:
    return [span.term for span in sorted(spans, key=lambda s: -s.weight)]


def test_term_weights_leave_out_stop_words_and_rank_rare_terms_first(index):
    assert "the" in index.terms_ and "and" in index.terms_  # stop words are indexed ...
    # ... but not given as explanations; "club" (df 1) weighs more than "chess" (df 3) for profile b
    weights = index.term_weights("the chess club", [1])
    assert sorted(weights, key=weights.get, reverse=True) == ["club", "chess"]
    assert list(index.term_weights("the zymurgy and painting club", [0])) == ["zymurgy"]
    assert set(index.term_weights("the zymurgy and painting club", [0, 3])) == {"zymurgy", "painting"}
    assert index.term_weights("the chess club", []) == {} == index.term_weights("no match at all", [3])


def test_explainer_gives_spans_of_the_text_heaviest_terms_only(index):
    explain = index.explainer()
    assert terms(explain.spans("the chess club", [1, 4, -1, 99])) == ["club", "chess"]  # rows outside: skipped
    assert explain.spans("the chess club", [-1, 4]) == []
    spans = explain.spans("The CHESS club; chess again", [1], n_terms=1)
    assert [(s.start, s.end, s.text) for s in spans] == [(10, 14, "club")]
    spans = explain.spans("The CHESS club; chess again", [1])
    assert [(s.start, s.text) for s in spans] == [(4, "CHESS"), (10, "club"), (16, "chess")]


def test_attacker_explainer_uses_the_level_it_is_asked_about(registry):
    attacker = TfidfAttacker(temperature=1.0)
    attacker.attack(["d0"], ["the chess club"], registry, LEVEL)
    assert terms(attacker.explainer(registry, LEVEL).spans("the chess club", [1])) == ["club", "chess"]
    assert terms(attacker.explainer(registry, CITY_ONLY).spans("the chess club in Paris", [1])) == ["paris"]
    assert terms(TfidfAttacker().explainer(registry, LEVEL).spans("the chess club", [1])) == ["club", "chess"]


def test_an_empty_vocabulary_is_a_config_error():
    registry = load_registry(b"identity_id,code\na,x\nb,y\n", name="codes.csv")  # one-letter tokens are dropped
    with pytest.raises(ConfigError, match="the TF-IDF attacker cannot index the profile texts"):
        attack(registry, ["x y"], level=KnowledgeLevel("K", ("code",)))
    with pytest.raises(ConfigError, match="cannot index"):
        TfidfIndex().fit(["", "  "])


def test_min_df_above_the_number_of_profiles_is_a_config_error(registry):
    with pytest.raises(ConfigError, match="cannot index"):
        attack(registry, ["chess"], min_df=5)


@pytest.mark.parametrize("kwargs, part", [({"temperature": 0}, "temperature must be a positive number .* or 'auto'"),
                                          ({"temperature": -1.0}, "temperature must be a positive number .* or 'auto'"),
                                          ({"top_k": 0}, "top-K must be at least 1"),
                                          ({"ngram_max": 0}, "ngram_max and max_features")])
def test_invalid_settings(kwargs, part):
    with pytest.raises(ConfigError, match=part):
        TfidfAttacker(**kwargs)


def test_params_for_the_manifest():
    params = TfidfAttacker(temperature=0.2, top_k=3).params()
    assert params == {"attacker": "tfidf", "max_features": 50_000, "ngram_max": 1, "min_df": 1, "temperature": 0.2,
                      "top_k": 3, "sublinear_tf": True}


def test_spec_declares_the_temperature():
    assert SPEC.name == "tfidf" and SPEC.uses_clues and not SPEC.sends_text and not SPEC.needs_scores
    temperature = SPEC.param("temperature")
    assert temperature.option == "--temperature" and temperature.kind == "float"
    assert temperature.default == "auto" and temperature.special == ("auto",) and temperature.min == 0.001
    assert [p.name for p in SPEC.params] == ["temperature", "max_features", "ngram_max", "min_df", "chunk_size"]
    with pytest.raises(ConfigError, match=r"\[attacker.tfidf\] temperature: expected a number at least 0.001 .*'auto'"):
        SPEC.resolve({"temperature": 0})


def test_spec_builds_the_attacker_with_the_context_top_k(registry):
    attacker = SPEC.build(SPEC.resolve({}), BuildContext(registry, LEVEL, top_k=5))
    assert isinstance(attacker, TfidfAttacker)
    assert attacker.top_k == 5 and attacker.temperature == "auto" and attacker.chunk_size == 512
    assert attacker.clue_extractor is None
    tuned = SPEC.build(SPEC.resolve({"temperature": 0.25, "chunk_size": 2}), BuildContext(registry, LEVEL))
    assert tuned.temperature == 0.25 and tuned.chunk_size == 2 and tuned.top_k is None


def test_spec_with_clues_needs_an_llm_endpoint(registry):
    clues = KnowledgeLevel("K", ("city",), "direct_plus_clues")
    with pytest.raises(ConfigError, match="needs an endpoint"):
        SPEC.build(SPEC.resolve({}), BuildContext(registry, clues))


def test_term_weights_of_many_queries_at_once_equal_each_query_alone(index):
    """The batch (one transform, two sparse products) against each query's own product with its candidates'
    summed profiles, including rows outside the registry, repeated rows and a query without candidates."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    queries = ["the chess club", "the zymurgy and painting club", "no match at all", "chess chess painting", ""]
    rows = [[1], [0, 3], [3], [1, 1, 4, -1, 99], []]
    batch = index.term_weights_batch(queries, rows)
    for query, picked, got in zip(queries, rows, batch):
        kept = [r for r in picked if 0 <= r < index.profiles_.shape[0]]
        if not kept:
            assert got == {}
            continue
        alone = index.transform([query]).multiply(index.profiles_[kept].sum(axis=0)).tocoo()
        expected = {str(index.terms_[c]): float(v) for c, v in zip(alone.col, alone.data)
                    if v > 0 and str(index.terms_[c]) not in ENGLISH_STOP_WORDS}
        assert got.keys() == expected.keys()
        for term in expected:
            assert got[term] == pytest.approx(expected[term], rel=1e-6)
