"""Evidence of the retrieval attackers: dense retrieval leaves one sentence out at a time (weights by hand with an
encoder whose embeddings are word counts), placeholders are never evidence, and in the ``direct_plus_clues``
mode every span is an offset into the released text (the clues' occurrences included); clues the text does not
write are listed as inferred. The packaged model explaining sample matches:
tests/integration/test_explainers_model.py.
"""

from __future__ import annotations

import math
import re
import unicodedata

import numpy as np
import pytest
from evidence_checks import fits, flagged
from hypothesis import given, settings
from hypothesis import strategies as st
from word_registry import TOY, WORDS, make_registry

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.explainers import LeaveOneOutExplainer, clue_query, find_clue, inferred_clues
from cpa_core.attack.tfidf_index import TfidfIndex
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.placeholders import placeholder_regions
from cpa_core.redaction.suggestions import apply_edits, suggest
from cpa_core.report.evidence import document_evidence, document_inferred_clues, driving_terms
from cpa_core.report.worklist import worklist, worklist_csv


class WordCounts:
    """An embedding we can compute by hand: one dimension per known word, its count; records every call."""

    def __init__(self, vocabulary):
        self.vocabulary = {w: i for i, w in enumerate(vocabulary)}
        self.calls: list[list[str]] = []

    def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), len(self.vocabulary)), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                if word in self.vocabulary:
                    out[row, self.vocabulary[word]] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def unit(*counts) -> np.ndarray:
    vector = np.array(counts, dtype=float)
    return vector / np.linalg.norm(vector)


VOCABULARY = ["alpha", "beta", "gamma", "delta"]
CLUES = KnowledgeLevel("C", ("words",), "direct_plus_clues")


def dense(tmp_path, encoder, **kwargs) -> DenseAttacker:
    return DenseAttacker(model="fake-word-counts", encoder=encoder, temperature=1.0, cache_dir=str(tmp_path / "emb"),
                         **kwargs)


# --------------------------------------------------------------------------------------------------
# dense retrieval: one sentence left out at a time, by hand


def test_a_sentence_weighs_the_drop_of_the_summed_cosine_when_it_is_left_out(tmp_path):
    encoder = WordCounts(VOCABULARY)
    attacker = dense(tmp_path, encoder)
    text = "Alpha and beta. Gamma only! Nothing else"
    registry = make_registry(TOY)
    attacker.attack(["d1"], [text], registry, WORDS)
    before = len(encoder.calls)
    explainer = attacker.explainer(registry, WORDS)
    assert isinstance(explainer, LeaveOneOutExplainer) and len(encoder.calls) == before  # the attack's profiles

    # query (alpha, beta, gamma); P1 = (alpha, beta): cos 2/sqrt(6). Without "Alpha and beta." the query is
    # (gamma): cos 0, a drop of 2/sqrt(6); without "Gamma only!" it is (alpha, beta): cos 1, a rise (no
    # evidence); "Nothing else" changes nothing (no evidence)
    spans = explainer.evidence(text, [0])
    assert [(s.start, s.end, s.text, s.term) for s in spans] == [
        (0, 15, "Alpha and beta.", "sentence: Alpha and beta.")]
    assert spans[0].weight == pytest.approx(2 / math.sqrt(6), abs=1e-6)
    # its three variants in one encoder call (the query itself is remembered from the attack)
    assert len(encoder.calls) == before + 1
    assert sorted(encoder.calls[-1]) == sorted([" Gamma only! Nothing else", "Alpha and beta.  Nothing else",
                                                "Alpha and beta. Gamma only! "])

    # with P2 = (gamma) too, the similarities add up: each of the first two sentences takes
    # 2/sqrt(6) + 1/sqrt(3) - 1 away
    spans = explainer.evidence(text, [0, 1])
    assert [s.text for s in spans] == ["Alpha and beta.", "Gamma only!"]
    expected = 2 / math.sqrt(6) + 1 / math.sqrt(3) - 1
    assert [s.weight for s in spans] == pytest.approx([expected, expected], abs=1e-6)
    assert len(encoder.calls) == before + 1  # the same variants: from the embedding cache
    assert explainer.evidence(text, []) == [] and explainer.evidence("", [0]) == []

    # another attacker on the same cache: profiles and variants from the cache, the model never called
    cold = WordCounts(VOCABULARY)
    again = dense(tmp_path, cold).explainer(registry, WORDS).evidence(text, [0, 1])
    assert again == spans and cold.calls == []


def test_a_sentence_cut_by_placeholders_is_its_pieces_under_one_term():
    seen = []

    def similarity(texts, rows):
        seen.append(list(texts))
        return np.array([len(re.findall(r"\w", t)) for t in texts], dtype=float)  # every letter counts 1

    text = "PERSON_FIRSTNAME_1 met beta in LOCATION_2, then alpha. He [REDACTED]. Gamma."
    spans = LeaveOneOutExplainer(similarity).evidence(text, [0])
    assert [(s.text, s.term) for s in spans] == [
        ("met beta in", "sentence: met beta in … , then alpha."),
        (", then alpha.", "sentence: met beta in … , then alpha."),
        ("He", "sentence: He"), ("Gamma.", "sentence: Gamma.")]
    assert all(fits(text, s) for s in spans)
    # the pieces are deleted, the placeholders stay; a weight is the letters deleted
    assert seen == [[text, "PERSON_FIRSTNAME_1  LOCATION_2 He [REDACTED]. Gamma.",
                     "PERSON_FIRSTNAME_1 met beta in LOCATION_2, then alpha.  [REDACTED]. Gamma.",
                     "PERSON_FIRSTNAME_1 met beta in LOCATION_2, then alpha. He [REDACTED]. "]]
    assert [s.weight for s in spans] == [len("metbetainthenalpha")] * 2 + [2, 5]
    # the declared placeholders decide: without them, PERSON_FIRSTNAME_1 is words of the first sentence
    plain = LeaveOneOutExplainer(similarity, placeholders=()).evidence(text, [0])
    assert plain[0].text == "PERSON_FIRSTNAME_1 met beta in LOCATION_2, then alpha."
    # identical sentences are one term, left out together
    twice = LeaveOneOutExplainer(similarity).evidence("Gamma. Alpha. Gamma.", [0])
    assert [(s.text, s.term, s.weight) for s in twice] == [("Gamma.", "sentence: Gamma.", 10.0),
                                                           ("Alpha.", "sentence: Alpha.", 5.0),
                                                           ("Gamma.", "sentence: Gamma.", 10.0)]


TOKENS = st.sampled_from(["Gdańsk", "gdansk", "Zoë", "Müller", "Straße", "café", "bus", "driver", "Łódź", "2014",
                          "naïve", "東京", "İstanbul", "PERSON_FIRSTNAME_1", "PRONOUN", "[REDACTED]", "<NAME>", "***",
                          "Dr", "3.5"])
SEPARATORS = st.sampled_from([" ", ", ", ". ", ".\n", "! ", "? ", "… ", "\n", " – ", "; ", "\t", ""])
PLACEHOLDER_TOKENS = {"PERSON_FIRSTNAME_1", "PRONOUN", "[REDACTED]", "<NAME>", "***"}


def letters(text: str) -> int:
    return len(re.findall(r"\w", text))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(TOKENS, SEPARATORS), min_size=1, max_size=25))
def test_dense_spans_are_the_released_text_and_never_a_placeholder(pieces):
    text = "".join(token + separator for token, separator in pieces)
    spans = LeaveOneOutExplainer(lambda texts, rows: np.array([letters(t) for t in texts], float)).evidence(text, [0])
    regions = placeholder_regions(text)
    covered = set()
    for span in spans:
        assert fits(text, span)                                          # offsets into the text, non-ASCII included
        assert not any(a < span.end and span.start < b for a, b in regions)  # never a placeholder
        assert span.text == span.text.strip() and re.search(r"\w", span.text)
        assert span.term.startswith("sentence: ")
        covered.update(range(span.start, span.end))
    by_term: dict[str, list] = {}
    for span in spans:
        by_term.setdefault(span.term, []).append(span)
    for group in by_term.values():  # a term weighs the letters its pieces hold (deleting them removes those)
        assert {s.weight for s in group} == {float(sum(letters(s.text) for s in group))}
    # every letter outside the placeholders is in a sentence's evidence
    outside = {i for i, c in enumerate(text) if re.match(r"\w", c) and not any(a <= i < b for a, b in regions)}
    assert outside <= covered
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))  # text order, no overlap


# --------------------------------------------------------------------------------------------------
# clues: offsets into the released text, occurrences case and accents aside, inferred clues listed


def test_clues_are_found_case_accents_and_spacing_aside_as_whole_words():
    text = "Zoë moved to GDAŃSK in 2014; the Leedsville bus\u00a0driver, Zoe\u0308, drives  a bus. Straße"
    assert [text[a:b] for a, b in find_clue(text, "gdansk")] == ["GDAŃSK"]
    assert [text[a:b] for a, b in find_clue(text, "zoe")] == ["Zoë", "Zoe\u0308"]  # its combining mark included
    assert [text[a:b] for a, b in find_clue(text, "Bus driver")] == ["bus\u00a0driver"]
    assert [text[a:b] for a, b in find_clue(text, "drives a BUS")] == ["drives  a bus"]
    assert find_clue(text, "leeds") == [] and find_clue(text, "Stra") == []  # inside a word
    assert [text[a:b] for a, b in find_clue(text, "STRASSE")] == ["Straße"]
    assert find_clue("Straße", "ss") == []                                   # half a character
    assert find_clue("Jo\u0301ann and Ann", "ann") == [(11, 14)]          # not inside a word with an accent apart
    assert [t[a:b] for t in ["Ann\u0301 went"] for a, b in find_clue(t, "ann")] == ["Ann\u0301"]
    assert find_clue(text, "  ") == [] and find_clue(text, "") == []
    assert inferred_clues(text, ["Gdansk", "gdańsk", "a nurse", "[REDACTED]", "Bus driver", "A NURSE"]) == [
        "a nurse", "[REDACTED]"]
    assert inferred_clues("Seen by [REDACTED] today", ["redacted"]) == ["redacted"]  # only in a placeholder


CLUE_MATCHES = {"GDANSK": {"Gdańsk", "gdansk"}, "zoe": {"Zoë"}, "muller": {"Müller"}, "STRASSE": {"Straße"},
                "Cafe": {"café"}, "BUS": {"bus"}, "2014": {"2014"}, "NAIVE": {"naïve"}, "東京": {"東京"},
                "istanbul": {"İstanbul"}, "Reykjavík": set(), "a nurse": set(), "pronoun": set(),
                "person_firstname_1": set(), "redacted": set()}
"""Each clue and the tokens that write it (placeholders never do)."""
CLUE_INDEX = TfidfIndex().fit(["gdansk bus driver 2014 zoe", "muller strasse cafe lodz", "naive 東京 istanbul"])


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(TOKENS, SEPARATORS), min_size=1, max_size=20),
       st.lists(st.sampled_from(sorted(CLUE_MATCHES)), max_size=6))
def test_clue_mode_spans_are_offsets_into_the_released_text(pieces, clues):
    text, written = "", set()
    for position, (token, separator) in enumerate(pieces):
        before = text[-1:] if text else ""
        after = (separator or (pieces[position + 1][0] if position + 1 < len(pieces) else ""))[:1]
        if not re.match(r"\w", before) and not re.match(r"\w", after):
            written.add(token)  # a whole word of the text
        text += token + separator
    index = CLUE_INDEX
    similarity = lambda texts, rows: np.array([letters(t) for t in texts], float)  # noqa: E731
    regions = placeholder_regions(text)
    for explainer in (index.explainer(), LeaveOneOutExplainer(similarity)):
        for span in explainer.evidence(text, [0, 1, 2], clues):
            assert fits(text, span) and not any(a < span.end and span.start < b for a, b in regions)
    # every clue that a token writes as a whole word has spans, every other one is inferred
    spans = LeaveOneOutExplainer(similarity).evidence(text, [0], clues)
    clue_terms = {s.term[len("clue: "):] for s in spans if s.term.startswith("clue: ")}
    expected = {clue for clue in clues if CLUE_MATCHES[clue] & written}
    assert clue_terms == expected
    assert inferred_clues(text, clues) == [clue for clue in dict.fromkeys(clues) if clue not in expected]
    for span in spans:
        if span.term.startswith("clue: "):  # found case and accents aside; weighs its letters (every copy)
            clue = span.term[len("clue: "):]
            assert fold_key(span.text) == fold_key(clue) and span.text in CLUE_MATCHES[clue]
            assert span.weight == letters(clue) * clues.count(clue)


def fold_key(text: str) -> str:
    return " ".join("".join(c for c in unicodedata.normalize("NFKD", text.casefold())
                            if not unicodedata.combining(c)).split())


def clue_extractor(answers: dict):
    def extract(doc_ids, texts, progress=None):
        return [list(answers[d]) for d in doc_ids]
    return extract


def test_dense_clue_mode_by_hand_every_span_in_the_released_text(tmp_path):
    encoder = WordCounts(VOCABULARY)
    registry = make_registry({"P1": "beta", "P2": "alpha beta", "P3": "delta"})
    text = "Alpha here. Met beta."
    attacker = dense(tmp_path, encoder, clue_extractor=clue_extractor({"d1": ["Beta", "gamma"]}))
    table = attacker.attack(["d1"], [text], registry, CLUES)
    assert table.queries == ("Alpha here. Met beta.\nBeta; gamma",) and table.clues == (("Beta", "gamma"),)
    assert table.rows(np.array([0, 0])).clues == (("Beta", "gamma"),) * 2
    cert = flagged(table, ["P2"])
    explainer = attacker.explainer(registry, CLUES)
    spans = document_evidence(cert.split, 0, explainer)

    # the three candidates' profiles add up to S; a variant weighs q . S for its unit-length word counts q
    s = unit(0, 1, 0, 0) + unit(1, 1, 0, 0) + unit(0, 0, 0, 1)
    full = unit(1, 2, 1, 0) @ s                        # alpha, beta, beta (clue), gamma (clue)
    without_alpha = unit(0, 2, 1, 0) @ s               # " Met beta.\nBeta; gamma"
    without_beta = unit(1, 1, 1, 0) @ s                # "Alpha here. \nBeta; gamma" and "Alpha here. Met beta.\ngamma"
    assert [(s_.start, s_.end, s_.text, s_.term) for s_ in spans] == [
        (0, 11, "Alpha here.", "sentence: Alpha here."), (12, 21, "Met beta.", "sentence: Met beta."),
        (16, 20, "beta", "clue: Beta")]
    assert [s_.weight for s_ in spans] == pytest.approx(
        [full - without_alpha, full - without_beta, full - without_beta], abs=1e-6)
    assert sorted(encoder.calls[-1]) == sorted([" Met beta.\nBeta; gamma", "Alpha here. \nBeta; gamma",
                                                "Alpha here. Met beta.\ngamma"])  # the query: the attack's
    assert driving_terms(spans) == ["Met beta.", "beta", "Alpha here."]
    assert document_inferred_clues(cert.split, 0, explainer) == ["gamma"]

    work = worklist(cert, ReleasePolicy(10), "cfg", explain=explainer)
    assert work.loc[0, "inferred_clues"] == ["gamma"]
    assert all(text[e["offset"]:e["offset"] + e["length"]] == e["text"] for e in work.loc[0, "evidence"])
    assert ",gamma,cfg," in worklist_csv(work)


def test_tfidf_clue_mode_weighs_each_clue_by_leaving_it_out(tmp_path):
    registry = make_registry({"P1": "harp nurse leeds", "P2": "bees nurse leeds", "P3": "boats baker york",
                              "P4": "stamps pilot york"})
    texts = ["Seen in Leeds: plays the harp, night shifts.", "PERSON_FIRSTNAME_1 keeps bees. [REDACTED] Leeds."]
    answers = {"d1": ["harp", "Nurse", "LEEDS"], "d2": ["redacted", "bees", "York"]}
    attacker = TfidfAttacker(temperature=1.0, clue_extractor=clue_extractor(answers))
    table = attacker.attack(["d1", "d2"], texts, registry, CLUES)
    # the queries (hence LLM cache keys and results) are what they were: the text, then the clues
    assert table.queries == (texts[0] + "\nharp; Nurse; LEEDS", texts[1] + "\nredacted; bees; York")
    assert table.clues == (("harp", "Nurse", "LEEDS"), ("redacted", "bees", "York"))
    assert table.truncate(2).clues == table.clues
    cert = flagged(table, ["P1", "P2"])
    explainer = attacker.explainer(registry, CLUES)
    index = attacker.index(registry, CLUES)

    for row, text in enumerate(texts):
        spans = document_evidence(cert.split, row, explainer)
        assert spans and all(fits(text, span) for span in spans)
        rows = [int(r) for r in cert.split.table.candidates[row, :3]]
        query, clues = table.queries[row], table.clues[row]
        # the summed cosine, from the vectors themselves, is the sum of the terms' contributions
        vector = index.transform([query]).toarray()[0]
        profiles = index.profiles_[rows].toarray()
        assert index.summed_similarity([query], rows)[0] == pytest.approx(float(profiles.sum(axis=0) @ vector))
        assert sum(index.term_weights(query, rows).values()) == pytest.approx(float(profiles.sum(axis=0) @ vector))
        weights = index.term_weights(query, rows)  # a word weighs its contribution in the query, clues included
        assert [s.weight for s in spans if not s.term.startswith("clue: ")] == pytest.approx(
            [weights[s.term] for s in spans if not s.term.startswith("clue: ")])
        written = {"d1": ["harp", "LEEDS"], "d2": ["bees"]}[table.doc_ids[row]]
        for clue in written:  # left out of the query (every copy): a span when the summed cosine drops
            rest = [c for c in clues if c != clue]
            drop = float(profiles.sum(axis=0) @ vector
                         - profiles.sum(axis=0) @ index.transform([clue_query(text, rest)]).toarray()[0])
            found = [span for span in spans if span.term == f"clue: {clue}"]
            assert [span.weight for span in found] == pytest.approx([drop] * len(found), abs=1e-6)
            assert bool(found) == (drop > 1e-9), (clue, drop)
            assert all(span.text.lower() == clue.lower() for span in found)

    first = document_evidence(cert.split, 0, explainer)
    # "harp" singles P1 out, and leaving it out of the query raises the cosine with P2 more than it lowers
    # the one with P1: no evidence as a clue (the word "harp" of the text is); "LEEDS" is
    assert ("harp", "harp") in [(s.text, s.term) for s in first] and "clue: harp" not in {s.term for s in first}
    assert ("Leeds", "clue: LEEDS") in [(s.text, s.term) for s in first]
    assert ("Leeds", "leeds") in [(s.text, s.term) for s in first]  # the word, and the clue, both there
    assert document_inferred_clues(cert.split, 0, explainer) == ["Nurse"]
    # "redacted" is written only inside a placeholder: inferred, never a span
    second = document_evidence(cert.split, 1, explainer)
    assert all(s.text.lower() != "redacted" for s in second)
    assert document_inferred_clues(cert.split, 1, explainer) == ["redacted", "York"]

    work = worklist(cert, ReleasePolicy(10), "cfg", explain=explainer)
    for record in work.to_dict(orient="records"):
        text = texts[["d1", "d2"].index(record["doc_id"])]
        assert all(text[e["offset"]:e["offset"] + e["length"]] == e["text"] for e in record["evidence"])
    # the direct mode: no clues on the table, none inferred
    direct = attacker.attack(["d1"], texts[:1], registry, WORDS)
    assert direct.clues is None and direct.queries == (texts[0],)
    assert document_inferred_clues(flagged(direct, ["P1"]).split, 0, explainer) == []


# --------------------------------------------------------------------------------------------------
# redaction with sentence evidence


def test_greedy_redaction_removes_whole_sentences_heaviest_first():
    secret = {"alpha": 3.0, "beta": 2.0, "gamma": 1.0}

    def similarity(texts, rows):
        return np.array([sum(secret.get(w, 0.0) for w in re.findall(r"\w+", t.lower())) for t in texts])

    text = "Alpha was here. Beta too. Gamma last. Beta too."
    def rescore(edited):  # the attacker names someone else once the set holds 9 people
        size = 10 - int(similarity([edited], [0])[0])
        return size, [0] if size < 9 else [1]
    done = suggest("d1", text, rescore, LeaveOneOutExplainer(similarity), flag_below=9, strategy="delete")
    # "Alpha was here." weighs 3, the two "Beta too." together 4: removed first, then "Alpha was here."
    assert [(e.original, e.term) for e in done.edits] == [("Alpha was here.", "sentence: Alpha was here."),
                                                          ("Beta too.", "sentence: Beta too."),
                                                          ("Beta too.", "sentence: Beta too.")]
    assert apply_edits(text, done.edits) == "  Gamma last. " and done.set_size_after == 9 and done.reaches_k
