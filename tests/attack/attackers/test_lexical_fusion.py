"""The lexical fusion attacker on hand-made registries: each ranker against a direct computation (scikit-learn's
vectorisers, BM25's formula by hand), the per-document z-scores and their equal-weight mean, the softmax, the kernel
against scipy, top-K and chunks against one block, explanations, the spec and what travels to a cluster."""

import math
import pickle
import re
import tomllib

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer, strip_accents_unicode

from cpa_core.attack.attackers import BUILTIN
from cpa_core.attack.attackers.lexical_fusion import (
    RANKERS,
    SPEC,
    Z_SCALE,
    Bm25Index,
    CharIndex,
    FusionIndex,
    LexicalFusionAttacker,
    char_wb_ngrams,
    standardised,
)
from cpa_core.attack.engine import shipped_attacker
from cpa_core.attack.registry import get_spec
from cpa_core.attack.spec import BuildContext
from cpa_core.attack.temperature import FALLBACK_TEMPERATURE, TEMPERATURE_GRID
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.io.tables import load_registry

CSV = b"""identity_id,city,hobby,secret
a,Paris,zymurgy and chess,alpha
b,Paris,chess at the club,beta
c,Lyon,chess and painting,gamma
d,Nice,painting,delta
"""
LEVEL = KnowledgeLevel("K", ("city", "hobby"))
QUERIES = ["I brew zymurgy in Paris", "the chess club", "painting in Lyon", "a painting from Nice",
           "chess and zymurgy", "nothing in common", "Paris club painting", "chess chess chess club"]
TOY_QUERIES = QUERIES[:3]  # 3 documents x 4 profiles


@pytest.fixture(scope="module")
def registry():
    return load_registry(CSV, name="r.csv")


@pytest.fixture(scope="module")
def profiles(registry):
    return profile_texts(registry, LEVEL)


def attack(registry, texts, level=LEVEL, **kwargs):
    kwargs.setdefault("temperature", 1.0)  # attacked directly, outside an audit
    return LexicalFusionAttacker(**kwargs).attack([f"d{i}" for i in range(len(texts))], texts, registry, level)


# ---------------------------------------------------------------------------------------------- each ranker by hand


def words(text: str) -> list[str]:
    """The tokens of scikit-learn's word analyser (lower case, accents stripped, two or more word characters)."""
    return re.findall(r"(?u)\b\w\w+\b", strip_accents_unicode(text.lower()))


def bm25_by_hand(queries, profiles, k1=1.5, b=0.75) -> np.ndarray:
    """Lucene's BM25 of each profile for each query's distinct words."""
    docs = [words(p) for p in profiles]
    n, average = len(docs), sum(map(len, docs)) / len(docs)
    out = np.zeros((len(queries), n))
    for i, query in enumerate(queries):
        for term in set(words(query)):
            df = sum(term in d for d in docs)
            if df == 0:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for j, d in enumerate(docs):
                tf = d.count(term)
                out[i, j] += idf * tf / (tf + k1 * (1 - b + b * len(d) / average))
    return out


def cosines(vectorizer, queries, profiles) -> np.ndarray:
    matrix = vectorizer.fit_transform(profiles)
    return (vectorizer.transform(queries) @ matrix.T).toarray().astype(np.float64)


def test_bm25_scores_equal_the_formula_by_hand(profiles):
    queries = QUERIES + ["Zymurgy zymurgy ZYMURGY", "", "unknown words only"]
    index = Bm25Index().fit(profiles)
    got = index.similarities(index.transform(queries))(0, len(queries))
    assert got.shape == (len(queries), 4) and got.dtype == np.float32
    assert got == pytest.approx(bm25_by_hand(queries, profiles), rel=1e-5, abs=1e-6)
    once = index.similarities(index.transform(["zymurgy"]))(0, 1)[0]
    assert np.array_equal(got[-3], once) and once[0] > 0  # a repeated word counts once
    assert (got[-2] == 0).all() and (got[-1] == 0).all()
    other = Bm25Index(k1=0.9, b=0.4).fit(profiles)
    assert other.similarities(other.transform(queries))(0, len(queries)) == pytest.approx(
        bm25_by_hand(queries, profiles, 0.9, 0.4), rel=1e-5, abs=1e-6)


def test_bm25_is_bm25s_own_scores_for_the_distinct_words(profiles):
    import bm25s

    index = Bm25Index().fit(profiles)
    reference = bm25s.BM25(method="lucene")
    reference.index([words(p) for p in profiles], show_progress=False)
    for query in QUERIES:
        distinct = sorted(set(words(query)) & set(reference.vocab_dict))
        expected = reference.get_scores(distinct) if distinct else np.zeros(4)
        assert index.similarities(index.transform([query]))(0, 1)[0] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("word", ["a", "ab", "abc", "abcd", "zymurgy", "été"])
def test_character_ngrams_of_a_word_are_scikit_learns(word):
    analyzer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5)).build_analyzer()
    assert char_wb_ngrams(word, 3, 5) == analyzer(word)
    assert char_wb_ngrams(word, 1, 2) == TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 2)).build_analyzer()(word)


@pytest.mark.parametrize("low, high, min_df", [(3, 5, 1), (1, 3, 1), (2, 4, 2), (3, 3, 0.5)])
def test_character_index_is_scikit_learns_char_wb_tfidf(low, high, min_df):
    """The same vocabulary in the same order and bitwise the same vectors, for profiles and for queries with unseen
    words, accents, tabs and runs of spaces, short words, and texts without a word."""
    profiles = ["Gdańsk é  un Été\tnaïve café", "a b cc ddd eeee", "Zoë's rock-band  Été", "aaaa aaaaa"]
    queries = ["Été in gdansk", "unknown wordsmith aaaaaa", "", "   ", "ROCK-band"]
    reference = TfidfVectorizer(analyzer="char_wb", ngram_range=(low, high), min_df=min_df, sublinear_tf=True,
                                strip_accents="unicode", dtype=np.float32)
    expected = reference.fit_transform(profiles)
    index = CharIndex(low, high, min_df).fit(profiles)
    assert list(index.vocabulary_) == reference.get_feature_names_out().tolist()
    assert (index.profiles_ != expected).nnz == 0 and index.profiles_.dtype == np.float32
    assert (index.transform(queries) != reference.transform(queries)).nnz == 0
    assert index.transform(["", " "]).nnz == 0


def test_standardised_rows_are_z_scores_and_a_flat_row_is_zero():
    block = np.array([[0.1, 0.5, 0.0, 0.4], [0.3, 0.3, 0.3, 0.3], [0.0, 0.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0]],
                     dtype=np.float32)
    z = standardised(block)
    values = block.astype(np.float64)
    expected = (values[[0, 3]] - values[[0, 3]].mean(axis=1, keepdims=True)) / values[[0, 3]].std(axis=1, keepdims=True)
    assert z[[0, 3]] == pytest.approx(expected, rel=1e-12)
    assert z[3].tolist() == pytest.approx([math.sqrt(3), -1 / math.sqrt(3), -1 / math.sqrt(3), -1 / math.sqrt(3)])
    assert (z[1] == 0).all() and (z[2] == 0).all()
    assert z.dtype == np.float64 and np.allclose(z[[0, 3]].mean(axis=1), 0) and np.allclose(z[[0, 3]].std(axis=1), 1)


def test_the_fused_score_is_the_mean_of_the_three_z_scores_on_a_3_x_4_toy(profiles):
    """Each ranker computed directly (scikit-learn's word and char_wb TF-IDF, BM25 by hand), z-scored over the four
    profiles with numpy, averaged with equal weights and put in units of ``Z_SCALE``."""
    word = cosines(TfidfVectorizer(ngram_range=(1, 2), max_features=50_000, sublinear_tf=True,
                                   strip_accents="unicode", dtype=np.float32), TOY_QUERIES, profiles)
    char = cosines(TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                                   strip_accents="unicode", dtype=np.float32), TOY_QUERIES, profiles)
    bm25 = bm25_by_hand(TOY_QUERIES, profiles)
    z = [(s - s.mean(axis=1, keepdims=True)) / s.std(axis=1, keepdims=True) for s in (word, char, bm25)]
    expected = (z[0] + z[1] + z[2]) / 3 / Z_SCALE

    index = FusionIndex().fit(profiles)
    parts = index.transform(TOY_QUERIES)
    assert len(parts) == len(RANKERS) == 3
    fused = index.similarities(parts)(0, 3)
    assert fused.shape == (3, 4) and fused.dtype == np.float32
    assert fused == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert fused.argmax(axis=1).tolist() == [0, 1, 2]  # zymurgy in Paris: a; the chess club: b; painting in Lyon: c


def test_weights_are_a_softmax_of_the_fused_score_at_the_temperature(registry, profiles):
    index = FusionIndex().fit(profiles)
    fused = index.similarities(index.transform(QUERIES))(0, len(QUERIES)).astype(np.float64)
    for temperature in (0.05, 0.5):
        table = attack(registry, QUERIES, temperature=temperature)
        for row in range(len(QUERIES)):
            s = fused[row, table.candidates[row]]
            assert (np.diff(s) <= 0).all()  # ranked by decreasing fused score
            expected = np.exp(s / temperature) / np.exp(s / temperature).sum()
            assert table.weights[row] == pytest.approx(expected, rel=1e-9)
    nothing = attack(registry, ["qqq xqx"]).weights[0]
    assert nothing.tolist() == pytest.approx([0.25] * 4)  # no ranker matches anything: all z-scores 0


# ---------------------------------------------------------------------------------------------- the engine


def test_the_kernel_and_scipy_paths_give_the_same_table(registry):
    for top_k in (None, 2):
        kernel = attack(registry, QUERIES, top_k=top_k, kernel=True, chunk_size=3)
        scipy = attack(registry, QUERIES, top_k=top_k, kernel=False, chunk_size=3)
        assert np.array_equal(kernel.candidates, scipy.candidates)
        assert np.array_equal(kernel.weights, scipy.weights)  # bitwise
        if top_k is not None:
            assert np.allclose(kernel.tail_mass, scipy.tail_mass, rtol=1e-12, atol=0)
            assert np.array_equal(kernel.cut_ties, scipy.cut_ties)


def test_the_kernel_and_scipy_blocks_are_bitwise_equal(profiles):
    index = FusionIndex().fit(profiles)
    queries = index.transform(QUERIES)
    kernel, scipy = index.similarities(queries, kernel=True), index.similarities(queries, kernel=False)
    assert kernel.kernel and not scipy.kernel
    assert np.array_equal(kernel(0, len(QUERIES)), scipy(0, len(QUERIES)))
    out = np.full((3, 4), np.nan, dtype=np.float32)
    kernel.into(2, 5, out)
    assert np.array_equal(out, scipy(2, 5))


def test_top_k_and_chunks_give_the_table_of_one_block(registry):
    whole = attack(registry, QUERIES, chunk_size=512)
    for top_k in (None, 2):
        reference = attack(registry, QUERIES, top_k=top_k, chunk_size=512)
        if top_k is not None:  # the shortlist keeps its candidates' weights over the whole pool
            assert reference.weights == pytest.approx(whole.weights[:, :2], rel=1e-12)
            tied = reference.cut_ties * reference.weights[:, -1]
            assert reference.weights.sum(axis=1) + tied + reference.tail_mass == pytest.approx(np.ones(len(QUERIES)))
        for chunk_size in (1, 3):
            table = attack(registry, QUERIES, top_k=top_k, chunk_size=chunk_size)
            assert np.array_equal(table.candidates, reference.candidates)
            assert np.allclose(table.weights, reference.weights, rtol=0, atol=1e-12)


def test_the_table_describes_the_attack(registry):
    table = attack(registry, QUERIES)
    assert table.doc_ids.tolist() == [f"d{i}" for i in range(len(QUERIES))] and table.queries == tuple(QUERIES)
    assert table.candidate_ids.tolist() == ["a", "b", "c", "d"] and table.width == 4
    assert table.candidate_ids[table.candidates[0, 0]] == "a" and table.candidate_ids[table.candidates[1, 0]] == "b"


def test_a_field_outside_the_level_is_not_searched(registry):
    hidden = attack(registry, ["alpha"])
    assert hidden.weights[0].tolist() == pytest.approx([0.25] * 4)
    seen = attack(registry, ["alpha"], level=KnowledgeLevel("S", ("secret",)))
    assert seen.candidate_ids[seen.candidates[0, 0]] == "a" and seen.weights[0, 0] > 0.25


def test_auto_temperature_is_chosen_on_a_tuning_fold(registry):
    attacker = LexicalFusionAttacker()
    texts = QUERIES[:4] * 3
    ids = [f"d{i}" for i in range(len(texts))]
    identities = ["a", "b", "c", "d"] * 3
    learned = attacker.learn(ids, texts, registry, LEVEL, identities)
    assert learned["temperature"] in TEMPERATURE_GRID + (FALLBACK_TEMPERATURE,)
    assert learned["tuning_documents"] and set(learned["tuning_documents"]) <= set(ids)
    table = attacker.attack(ids, texts, registry, LEVEL)
    assert attacker.effective_temperature == learned["temperature"] and table.width == 4
    with pytest.raises(ConfigError, match="temperature 'auto'"):
        LexicalFusionAttacker().attack(ids, texts, registry, LEVEL)


# ---------------------------------------------------------------------------------------------- evidence


def test_explainer_gives_spans_of_the_word_ranker(registry):
    attacker = LexicalFusionAttacker(temperature=1.0)
    attacker.attack(["d0"], ["the chess club"], registry, LEVEL)
    spans = attacker.explainer(registry, LEVEL).spans("The CHESS club; chess again", [1])
    assert [(s.start, s.end, s.text, s.term) for s in spans] == [(4, 9, "CHESS", "chess"), (10, 14, "club", "club"),
                                                                 (16, 21, "chess", "chess")]
    assert all(s.weight > 0 for s in spans)
    fresh = LexicalFusionAttacker().explainer(registry, KnowledgeLevel("C", ("city",)))  # fitted on demand
    assert [s.term for s in fresh.spans("the chess club in Paris", [1])] == ["paris"]


# ---------------------------------------------------------------------------------------------- declaration


def test_invalid_settings_and_profiles_without_words(registry):
    for kwargs, part in (({"temperature": 0}, "temperature must be a positive number"), ({"top_k": 0}, "top-K"),
                         ({"ngram_max": 0}, "ngram_max"), ({"char_ngram_min": 4, "char_ngram_max": 3}, "char_ngram"),
                         ({"k1": -1.0}, "k1"), ({"b": 1.5}, "b=1.5")):
        with pytest.raises(ConfigError, match=part):
            LexicalFusionAttacker(**kwargs)
    codes = load_registry(b"identity_id,code\na,x\nb,y\n", name="codes.csv")  # one-letter tokens are no words
    with pytest.raises(ConfigError, match="cannot index"):
        attack(codes, ["x y"], level=KnowledgeLevel("K", ("code",)))


def test_params_for_the_manifest():
    params = LexicalFusionAttacker(temperature=0.2, top_k=3).params()
    assert params["attacker"] == "lexical_fusion" and params["rankers"] == ["words", "characters", "bm25"]
    assert params["combination"] == "equal-weight mean" and params["z_scale"] == Z_SCALE
    assert params["bm25"] == {"variant": "lucene", "k1": 1.5, "b": 0.75, "query_terms": "distinct"}
    assert params["ngram_max"] == 2 and params["char_ngram_range"] == [3, 5]
    assert params["temperature"] == 0.2 and params["top_k"] == 3 and "clue_extractor" not in params


def test_spec_is_built_in_and_declares_its_parameters(registry):
    assert SPEC in BUILTIN and get_spec("lexical_fusion") is SPEC
    assert SPEC.uses_clues and SPEC.runs_on_cluster and not SPEC.sends_text and not SPEC.needs_scores
    assert [p.name for p in SPEC.params] == ["temperature", "max_features", "ngram_max", "char_ngram_min",
                                             "char_ngram_max", "min_df", "k1", "b", "chunk_size"]
    assert SPEC.param("temperature") is get_spec("tfidf").param("temperature")  # one --temperature option
    defaults = SPEC.resolve({})
    assert defaults == {name: getattr(LexicalFusionAttacker(), name) for name in defaults}
    attacker = SPEC.build(defaults, BuildContext(registry, LEVEL, top_k=5))
    assert isinstance(attacker, LexicalFusionAttacker) and attacker.top_k == 5 and attacker.temperature == "auto"
    with pytest.raises(ConfigError, match=r"\[attacker.lexical_fusion\] b: expected a number"):
        SPEC.resolve({"b": 2})


def test_the_docstring_table_is_a_valid_declaration():
    import cpa_core.attack.attackers.lexical_fusion as module

    text = module.__doc__.split("::", 1)[1]
    declared = tomllib.loads("\n".join(line[4:] for line in text.splitlines()))
    assert declared["attacker"]["name"] == "lexical_fusion"
    section = declared["attacker"]["lexical_fusion"]
    assert set(section) == {p.name for p in SPEC.params} and SPEC.resolve(section) == SPEC.resolve({})


def test_a_fresh_copy_travels_to_a_cluster_worker(registry):
    local = LexicalFusionAttacker(temperature="auto", top_k=2)
    local.temperature_ = 0.5
    local.index(registry, LEVEL)  # local state must not travel
    shipped = shipped_attacker(local, {"temperature": 0.25})
    assert shipped is not local and shipped.index_ is None and shipped.effective_temperature == 0.25
    assert shipped.top_k == 2
    restored = pickle.loads(pickle.dumps(local))  # a fitted index pickles too
    table = restored.attack(["d0"], ["the chess club"], registry, LEVEL)
    assert np.array_equal(table.weights, local.attack(["d0"], ["the chess club"], registry, LEVEL).weights)
