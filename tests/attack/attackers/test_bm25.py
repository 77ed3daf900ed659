"""The BM25 attacker: BM25 scores computed by hand on a three-profile registry and by a brute-force Lucene BM25 on
random ones, the per-document standardisation and the softmax, top-K and chunks, evidence spans in the released
text, one-line configuration errors, the spec, what travels to a cluster, and ``cpa audit --attacker bm25`` on the
sample data."""

from __future__ import annotations

import json
import math
import pickle
import re
import tomllib

import numpy as np
import pytest
from cli_checks import OUTPUT_FILES, assert_one_line_error, ok
from conftest import run_cli_inprocess
from evidence_checks import fits, flagged
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, strip_accents_unicode
from word_registry import WORDS, make_registry

from cpa_core.attack.attackers import BUILTIN, lexical_fusion
from cpa_core.attack.attackers.bm25 import SPEC, Bm25Attacker
from cpa_core.attack.attackers.lexical_fusion import Z_SCALE
from cpa_core.attack.engine import shipped_attacker
from cpa_core.attack.registry import get_spec
from cpa_core.attack.spec import BuildContext
from cpa_core.attack.temperature import FALLBACK_TEMPERATURE, TEMPERATURE_GRID
from cpa_core.audit.project import parse_config
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.report.evidence import document_evidence

# Three profiles of 2, 3 and 1 words (mean length 2). Lucene's idf is ln(1 + (N - df + 0.5) / (df + 0.5)):
# harp, leeds and york (df 1) ln(8/3), nurse (df 2) ln(1.6). With k1 = 1.5 and b = 0.75 a word's saturation is
# tf / (tf + 1.5 (0.25 + 0.75 |p| / 2)): in P1 (|p| 2, tf 1) 1 / 2.5 = 0.4; in P2 (|p| 3) leeds (tf 2) 2 / 4.0625
# and nurse (tf 1) 1 / 3.0625; in P3 (|p| 1) york 1 / 1.9375.
TOY = {"P1": "harp nurse", "P2": "nurse leeds leeds", "P3": "york"}
L_RARE, L_NURSE = math.log(8 / 3), math.log(1.6)
BY_HAND = {  # each query's BM25 of P1, P2, P3
    "Harp LEEDS": [0.4 * L_RARE, 2 / 4.0625 * L_RARE, 0.0],
    "a nurse": [0.4 * L_NURSE, 1 / 3.0625 * L_NURSE, 0.0],
    "harp harp harp": [0.4 * L_RARE, 0.0, 0.0],  # a word counts once however often the document repeats it
    "Leeds nurse, York": [0.4 * L_NURSE, 2 / 4.0625 * L_RARE + 1 / 3.0625 * L_NURSE, L_RARE / 1.9375],
}
BY_HAND_RANKS = {"Harp LEEDS": ["P2", "P1", "P3"], "a nurse": ["P1", "P2", "P3"], "harp harp harp": ["P1", "P2", "P3"],
                 "Leeds nurse, York": ["P2", "P3", "P1"]}


@pytest.fixture(scope="module")
def toy():
    return make_registry(TOY)


def attack(registry, texts, level=WORDS, **kwargs):
    kwargs.setdefault("temperature", 1.0)  # attacked directly, outside an audit
    return Bm25Attacker(**kwargs).attack([f"d{i}" for i in range(len(texts))], texts, registry, level)


def words(text: str) -> list[str]:
    """The attacker's tokens: lower case, accents stripped, two or more word characters."""
    return re.findall(r"(?u)\b\w\w+\b", strip_accents_unicode(text.lower()))


def lucene_bm25(queries, profiles, k1=1.5, b=0.75) -> np.ndarray:
    """The reference: Lucene's BM25 of each profile for each query's distinct words, one term at a time."""
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
                if tf:  # a profile without the word adds nothing (an empty one, at b = 1, would divide 0 by 0)
                    out[i, j] += idf * tf / (tf + k1 * (1 - b + b * len(d) / average))
    return out


def z_scores(scores: np.ndarray) -> np.ndarray:
    spread = scores.std(axis=1, keepdims=True)
    return np.divide(scores - scores.mean(axis=1, keepdims=True), spread, out=np.zeros_like(scores),
                     where=spread > 0)


def softmax(values: np.ndarray) -> np.ndarray:
    e = np.exp(values - values.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------------- scores by hand


def test_bm25_scores_and_ranks_by_hand(toy):
    queries = list(BY_HAND)
    attacker = Bm25Attacker(temperature=1.0)
    index = attacker.index(toy, WORDS)
    raw = index.similarities(index.transform(queries))(0, len(queries))
    assert raw == pytest.approx(np.array(list(BY_HAND.values())), rel=1e-6)
    assert raw == pytest.approx(lucene_bm25(queries, profile_texts(toy, WORDS)), rel=1e-6)
    table = attacker.attack([f"d{i}" for i in range(len(queries))], queries, toy, WORDS)
    assert [table.candidate_ids[row].tolist() for row in table.candidates] == list(BY_HAND_RANKS.values())


def test_weights_are_a_softmax_of_the_standardised_score_by_hand(toy):
    queries = list(BY_HAND)
    expected_z = z_scores(np.array(list(BY_HAND.values())))
    _, blocks = Bm25Attacker(temperature=1.0).similarities(["d"] * len(queries), queries, toy, WORDS)
    assert blocks(0, len(queries)) == pytest.approx(expected_z / Z_SCALE, rel=1e-5, abs=1e-6)
    for temperature in (0.05, 0.5, 2.0):
        table = attack(toy, queries, temperature=temperature)
        expected = softmax(expected_z / (Z_SCALE * temperature))
        got = np.take_along_axis(table.weights, np.argsort(table.candidates, axis=1), axis=1)  # back to P1, P2, P3
        assert got == pytest.approx(expected, rel=1e-5)
    # "Harp LEEDS": scores 0.3923, 0.4829, 0 (P1, P2, P3) have z = 0.4800, 0.9120, -1.3920 (population spread); at
    # T = 0.1, Z_SCALE * T = 1 and the weights are softmax(z): 0.5717, 0.3712, 0.0571 over P2, P1, P3
    weights = attack(toy, ["Harp LEEDS"], temperature=0.1).weights[0]
    assert weights == pytest.approx([0.5717, 0.3712, 0.0571], abs=1e-4)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["harp", "nurse", "leeds", "york", "bees", "Élan", "the"]), min_size=0,
                         max_size=8).map(" ".join), min_size=2, max_size=7),
       st.lists(st.lists(st.sampled_from(["harp", "nurse", "elan", "bees", "oak", "the"]), max_size=6).map(" ".join),
                min_size=1, max_size=5),
       st.sampled_from([(1.5, 0.75), (0.9, 0.4), (1.2, 0.0), (2.0, 1.0)]))
def test_scores_and_ranks_equal_a_brute_force_lucene_bm25(profiles, queries, settings_):
    if not any(words(p) for p in profiles):
        return  # nothing to index: a configuration error, tested below
    k1, b = settings_
    registry = make_registry({f"P{i}": text for i, text in enumerate(profiles)})
    reference = lucene_bm25(queries, profile_texts(registry, WORDS), k1, b)
    attacker = Bm25Attacker(k1=k1, b=b, temperature=1.0)
    index = attacker.index(registry, WORDS)
    assert index.similarities(index.transform(queries))(0, len(queries)) == pytest.approx(reference, rel=1e-5,
                                                                                          abs=1e-6)
    table = attacker.attack([f"d{i}" for i in range(len(queries))], queries, registry, WORDS)
    for row in range(len(queries)):
        ranked = reference[row, table.candidates[row]]
        assert (np.diff(ranked) <= 1e-6).all()  # ranked by decreasing BM25
        assert table.weights[row].sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------- weights


def test_a_smaller_temperature_concentrates_the_weight_and_keeps_the_ranking(toy):
    tops = []
    for temperature in (2.0, 0.5, 0.1, 0.02, 0.005):
        table = attack(toy, ["Harp LEEDS"], temperature=temperature)
        assert table.candidate_ids[table.candidates[0]].tolist() == ["P2", "P1", "P3"]
        tops.append(table.weights[0, 0])
    assert all(a < b for a, b in zip(tops, tops[1:])) and tops[-1] > 0.99


def test_the_scale_is_the_documents_own_spread(toy):
    """Standardised per document: "harp oboe" scores P1 twice what "harp" does (two words of the same frequencies)
    and every other profile 0, so both documents weigh the profiles alike; repeated words and words no profile has
    change nothing; a document that matches no profile gives every profile the same weight."""
    twins = make_registry({"P1": "harp oboe", "P2": "nurse", "P3": "york"})
    one, two = attack(twins, ["harp", "harp oboe"], temperature=0.05).weights
    assert one == pytest.approx(two, rel=1e-6)
    # scores (s, 0, 0) have z = (√2, -√2/2, -√2/2) whatever s: the first weighs 1 / (1 + 2 exp(-1.5 √2 / (Z_SCALE T)))
    assert one[0] == pytest.approx(1 / (1 + 2 * math.exp(-1.5 * math.sqrt(2) / (Z_SCALE * 0.05))), rel=1e-6)
    base = attack(toy, ["Harp LEEDS"]).weights[0]
    assert attack(toy, ["harp leeds harp LEEDS zymurgy oak"]).weights[0] == pytest.approx(base, rel=1e-6)
    assert attack(toy, ["nothing known here"]).weights[0] == pytest.approx([1 / 3] * 3)
    assert attack(toy, [""]).weights[0] == pytest.approx([1 / 3] * 3)


def test_auto_temperature_is_chosen_on_a_tuning_fold(toy):
    attacker = Bm25Attacker()
    texts = ["harp", "leeds leeds", "york", "harp nurse", "nurse leeds", "york again"] * 2
    ids = [f"d{i}" for i in range(len(texts))]
    identities = ["P1", "P2", "P3", "P1", "P2", "P3"] * 2
    learned = attacker.learn(ids, texts, toy, WORDS, identities)
    assert learned["temperature"] in TEMPERATURE_GRID + (FALLBACK_TEMPERATURE,)
    assert learned["tuning_documents"] and set(learned["tuning_documents"]) <= set(ids)
    assert attacker.attack(ids, texts, toy, WORDS).width == 3
    assert attacker.effective_temperature == learned["temperature"]
    with pytest.raises(ConfigError, match="temperature 'auto'"):
        Bm25Attacker().attack(ids, texts, toy, WORDS)


# ---------------------------------------------------------------------------------------------- the engine


QUERIES = ["harp in Leeds", "the nurse", "York", "nurse leeds harp", "bees", "Leeds Leeds nurse", "harp york"]


def test_top_k_keeps_the_whole_pools_weights_and_counts_the_tail(toy):
    whole = attack(toy, QUERIES)
    short = attack(toy, QUERIES, top_k=2)
    assert short.width == 2 and np.array_equal(short.candidates, whole.candidates[:, :2])
    assert short.weights == pytest.approx(whole.weights[:, :2], rel=1e-12)  # no renormalisation
    tied = short.cut_ties * short.weights[:, -1]
    assert short.weights.sum(axis=1) + tied + short.tail_mass == pytest.approx(np.ones(len(QUERIES)))
    assert attack(toy, QUERIES, top_k=10).width == 3


def test_chunks_and_the_kernel_give_the_table_of_one_block(toy):
    for top_k in (None, 2):
        reference = attack(toy, QUERIES, top_k=top_k, kernel=False)
        for chunk_size, kernel in ((1, True), (3, True), (3, False), (512, True)):
            table = attack(toy, QUERIES, top_k=top_k, chunk_size=chunk_size, kernel=kernel)
            assert np.array_equal(table.candidates, reference.candidates)
            assert np.allclose(table.weights, reference.weights, rtol=0, atol=1e-12)


def test_the_table_describes_the_attack_and_only_the_levels_fields_are_searched():
    registry = make_registry({"a": "chess", "b": "painting"})
    registry.frame["secret"] = ["alpha", "beta"]
    table = attack(registry, ["chess alpha", "beta"])
    assert table.doc_ids.tolist() == ["d0", "d1"] and table.queries == ("chess alpha", "beta")
    assert table.candidate_ids.tolist() == ["a", "b"] and table.clues is None
    assert table.weights[1].tolist() == pytest.approx([0.5, 0.5])  # "beta" is in a field the attacker does not know
    seen = attack(registry, ["beta"], level=KnowledgeLevel("S", ("secret",)))
    assert seen.candidate_ids[seen.candidates[0, 0]] == "b" and seen.weights[0, 0] > 0.5


def test_clues_are_appended_to_the_query(toy):
    level = KnowledgeLevel("C", ("words",), "direct_plus_clues")
    attacker = Bm25Attacker(temperature=1.0, clue_extractor=lambda ids, texts, progress=None: [["Leeds"], []])
    table = attacker.attack(["d0", "d1"], ["a nurse", "harp"], toy, level)
    assert table.queries == ("a nurse\nLeeds", "harp") and table.clues == (("Leeds",), ())
    assert table.candidate_ids[table.candidates[0, 0]] == "P2"  # "a nurse" alone ranks P1 first
    with pytest.raises(ConfigError, match="needs a clue extractor"):
        attack(toy, ["harp"], level=level)


# ---------------------------------------------------------------------------------------------- evidence


def test_evidence_spans_are_the_released_text_weighted_by_bm25_contributions(toy):
    text = "Harp lessons in LEEDS; the harp again, PERSON_FIRSTNAME_1 nurse"
    attacker = Bm25Attacker(temperature=1.0)
    table = attacker.attack(["d0"], [text], toy, WORDS)
    explainer = attacker.explainer(toy, WORDS)
    rows = [int(r) for r in table.candidates[0, :2]]  # P2, P1
    spans = explainer.spans(text, rows)
    assert spans and all(fits(text, span) for span in spans)
    assert [(s.text, s.term) for s in spans] == [("Harp", "harp"), ("LEEDS", "leeds"), ("harp", "harp"),
                                                 ("nurse", "nurse")]
    # each word weighs what it adds to the candidates' summed BM25: harp P1's 0.4 ln(8/3), leeds P2's
    by_term = {s.term: s.weight for s in spans}
    assert by_term == pytest.approx({"harp": 0.4 * L_RARE, "leeds": 2 / 4.0625 * L_RARE,
                                     "nurse": (0.4 + 1 / 3.0625) * L_NURSE}, rel=1e-5)
    index = attacker.index(toy, WORDS)
    assert sum(by_term.values()) == pytest.approx(index.summed_similarity([text], rows)[0], rel=1e-5)
    assert [s.term for s in explainer.spans(text, rows, n_terms=1)] == ["leeds"]
    assert explainer.spans("the York", [0]) == []  # nothing shared with P1 (and "the" is a stop word)
    fresh = Bm25Attacker().explainer(toy, WORDS)  # fitted on demand, before any attack
    assert fresh.spans(text, rows) == spans


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["harp", "Leeds", "NURSE", "york", "élan", "[REDACTED]", "PERSON_FIRSTNAME_1", ",",
                                 ". ", "the", "\n"]), max_size=14).map(" ".join))
def test_every_span_of_an_audited_document_is_its_released_text(text):
    registry = make_registry({**TOY, "P4": "elan harp"})
    attacker = Bm25Attacker(temperature=0.5)
    cert = flagged(attacker.attack(["d0"], [text], registry, WORDS), ["P4"])
    spans = document_evidence(cert.split, 0, attacker.explainer(registry, WORDS))
    assert all(fits(text, span) for span in spans)
    assert all(span.term not in ENGLISH_STOP_WORDS and span.weight > 0 for span in spans)
    assert not any("REDACTED" in span.text or "PERSON" in span.text for span in spans)


# ---------------------------------------------------------------------------------------------- declaration


@pytest.mark.parametrize("kwargs, part", [({"temperature": 0}, "temperature must be a positive number"),
                                          ({"top_k": 0}, "top-K must be at least 1, found 0"),
                                          ({"chunk_size": 0}, "chunk_size must be at least 1, found 0"),
                                          ({"k1": -1.0}, "BM25 needs k1 >= 0 and 0 <= b <= 1, found k1=-1.0"),
                                          ({"b": 1.5}, "found k1=1.5, b=1.5")])
def test_invalid_settings_are_one_line_errors(kwargs, part):
    with pytest.raises(ConfigError, match=re.escape(part)) as raised:
        Bm25Attacker(**kwargs)
    assert "\n" not in str(raised.value)


def test_declared_tables_are_checked_in_one_line():
    for table, part in (("b = 2", r"\[attacker.bm25\] b: expected a number"),
                        ("k1 = -0.5", r"\[attacker.bm25\] k1: expected a number at least 0"),
                        ("temperature = 0", r"\[attacker.bm25\] temperature: expected a number at least 0.001"),
                        ("chunk_size = 0", r"\[attacker.bm25\] chunk_size: expected an integer at least 1"),
                        ("max_features = 10", "unknown key 'max_features'.*expected one of b, chunk_size, k1, "
                                              "temperature")):
        with pytest.raises(ConfigError, match=part) as raised:
            parse_config(f"[attacker.bm25]\n{table}\n", "audit.toml")
        assert "\n" not in str(raised.value)


def test_profiles_without_words_cannot_be_indexed():
    codes = make_registry({"a": "x", "b": "y"})  # one-letter tokens are no words
    with pytest.raises(ConfigError, match="BM25 cannot index the profile texts"):
        attack(codes, ["x y"])


def test_params_for_the_manifest():
    params = Bm25Attacker(temperature=0.2, top_k=3, k1=1.2, b=0.5).params()
    assert params == {"attacker": "bm25", "variant": "lucene", "k1": 1.2, "b": 0.5, "query_terms": "distinct",
                      "standardisation": "z-score over the registry", "z_scale": Z_SCALE, "temperature": 0.2,
                      "top_k": 3}


def test_spec_is_built_in_and_declares_its_parameters(toy):
    assert SPEC in BUILTIN and get_spec("bm25") is SPEC
    assert SPEC.uses_clues and SPEC.runs_on_cluster and not SPEC.sends_text and not SPEC.needs_scores
    assert [p.name for p in SPEC.params] == ["temperature", "k1", "b", "chunk_size"]
    assert SPEC.param("temperature") is get_spec("tfidf").param("temperature")  # one --temperature option
    assert SPEC.param("k1") is lexical_fusion.SPEC.param("k1") and SPEC.param("b") is lexical_fusion.SPEC.param("b")
    defaults = SPEC.resolve({})
    assert defaults == {name: getattr(Bm25Attacker(), name) for name in defaults}
    attacker = SPEC.build(defaults, BuildContext(toy, WORDS, top_k=5))
    assert isinstance(attacker, Bm25Attacker) and attacker.top_k == 5 and attacker.temperature == "auto"
    with pytest.raises(ConfigError, match="needs an endpoint"):
        SPEC.build(defaults, BuildContext(toy, KnowledgeLevel("C", ("words",), "direct_plus_clues")))


def test_the_docstring_table_is_a_valid_declaration():
    import cpa_core.attack.attackers.bm25 as module

    text = module.__doc__.split("::", 1)[1]
    declared = tomllib.loads("\n".join(line[4:] for line in text.splitlines()))
    assert declared["attacker"]["name"] == "bm25"
    section = declared["attacker"]["bm25"]
    assert set(section) == {p.name for p in SPEC.params} and SPEC.resolve(section) == SPEC.resolve({})


def test_a_fresh_copy_travels_to_a_cluster_worker(toy):
    local = Bm25Attacker(temperature="auto", top_k=2, k1=1.1)
    local.temperature_ = 0.5
    local.index(toy, WORDS)  # local state must not travel
    shipped = shipped_attacker(local, {"temperature": 0.25})
    assert shipped is not local and shipped.index_ is None and shipped.effective_temperature == 0.25
    assert (shipped.top_k, shipped.k1) == (2, 1.1)
    restored = pickle.loads(pickle.dumps(local))  # a fitted index pickles too
    assert np.array_equal(restored.attack(["d0"], ["harp"], toy, WORDS).weights,
                          local.attack(["d0"], ["harp"], toy, WORDS).weights)


# ---------------------------------------------------------------------------------------------- the command line


def test_cpa_audit_with_the_bm25_attacker_on_the_sample_data(sample_paths, tmp_path):
    common = ("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
              "--config", sample_paths["config"], "--no-history")
    out = tmp_path / "audit"
    done = ok(run_cli_inprocess(*common, "--attacker", "bm25", "--param", "k1=1.2", "--out", out))
    assert all((out / name).is_file() for name in OUTPUT_FILES)
    assert "first guess is the right person" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["attacker"]["attacker"] == "bm25" and manifest["attacker"]["k1"] == 1.2
    assert manifest["attacker"]["temperature"] == "auto" and manifest["inputs"]["learned"]["temperature"] > 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["attacker"] == "bm25" and summary["confidence"]["0.9"]["n_test"] == 1000
    bad = run_cli_inprocess(*common, "--attacker", "bm25", "--param", "b=2.0", "--out", tmp_path / "bad")
    assert_one_line_error(bad, "[attacker.bm25] b: expected a number")
