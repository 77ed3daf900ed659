"""A document's evidence as every surface shows it: the attacker's explainer with the declared placeholders
(:func:`audit_explainer`), the candidates and the query it is about, the driving terms, the clues inferred, and many
documents explained in one batch as each alone."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace

import numpy as np
from placeholder_release import CUSTOM, DOCUMENTS_CSV, REGISTRY_CSV, toml_list
from toy_release import toy_release_fixture  # noqa: F401 (the fixture toy_release)
from word_registry import TOY, WORDS, make_registry

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.candidates import CandidateTable
from cpa_core.attack.explainers import LeaveOneOutExplainer, Span, TermExplainer
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import declare_audit, parse_config
from cpa_core.audit.results import ScoredSplit
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, placeholder_regions
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.evidence import (
    N_CANDIDATES,
    audit_explainer,
    document_evidence,
    document_inferred_clues,
    document_query,
    driving_terms,
    evidence_rows,
)
from cpa_core.store.records import write_audit


def split_of(queries=None, clues=None) -> ScoredSplit:
    """Two documents: d1 ranks five candidates (p2, p0, p1, p4, p3), d2 only one (p1, then padding)."""
    table = CandidateTable(np.array(["d1", "d2"], dtype=object),
                           np.array([[2, 0, 1, 4, 3], [1, -1, -1, -1, -1]]),
                           np.array([[0.4, 0.3, 0.15, 0.1, 0.05], [1.0, 0.0, 0.0, 0.0, 0.0]]), np.array([5, 1]),
                           np.array([f"p{j}" for j in range(5)], dtype=object), queries, clues=clues)
    return ScoredSplit.build(table, ["p0", "p1"], None, "aps")


def test_the_evidence_is_about_the_top_candidates_never_padding():
    split = split_of()
    assert N_CANDIDATES == 3
    assert evidence_rows(split, 0) == [2, 0, 1]
    assert evidence_rows(split, 0, n_candidates=5) == [2, 0, 1, 4, 3]
    assert evidence_rows(split, 1) == [1]  # a pool of one


def test_the_query_gives_the_released_text_and_its_clues():
    assert document_query(split_of(), 0) is None  # no stored query
    plain = split_of(queries=("Seen in Leeds.", "A nurse."))
    assert document_query(plain, 1) == ("A nurse.", ())
    with_clues = split_of(queries=("Seen in Leeds.\nnurse; Leeds", "A nurse."), clues=(("nurse", "Leeds"), ()))
    assert document_query(with_clues, 0) == ("Seen in Leeds.", ("nurse", "Leeds"))
    assert document_query(with_clues, 1) == ("A nurse.", ())
    # the clue the text writes is evidence, the other one was inferred
    assert document_inferred_clues(with_clues, 0) == ["nurse"] and document_inferred_clues(plain, 0) == []
    # a query that does not end with its clues is not its text: no offsets to trust
    assert document_query(split_of(queries=("Seen in Leeds.", "x"), clues=(("York",), ())), 0) is None


def test_driving_terms_are_the_distinct_texts_heaviest_first():
    spans = [Span(0, 5, "Leeds", "leeds", 2.0), Span(10, 15, "leeds", "leeds", 2.0), Span(20, 24, "York", "york", 3.0),
             Span(30, 35, "nurse", "nurse", 2.0), Span(40, 45, "Leeds", "leeds", 2.0)]
    assert driving_terms(spans) == ["York", "Leeds", "leeds", "nurse"]  # ties by position in the text
    assert driving_terms([]) == []


class PluginExplainer:
    """An explainer that is not a dataclass (a plugin's)."""

    def __init__(self, placeholders=DEFAULT_PLACEHOLDERS):
        self.placeholders = placeholders


class Plugin:
    def __init__(self, explainer):
        self._explainer = explainer

    def explainer(self, registry, level):
        return self._explainer


def test_the_audit_explainer_of_any_attacker_has_the_declared_placeholders():
    registry, level = make_registry(TOY), WORDS
    config = AuditConfig(knowledge=level, attacker=AttackerConfig("plugin"), placeholders=CUSTOM)
    assert audit_explainer(Plugin(None), registry, config) is None  # an attacker that explains nothing
    mine = PluginExplainer()
    given = audit_explainer(Plugin(mine), registry, config)
    assert given is not mine and given.placeholders == CUSTOM and mine.placeholders == DEFAULT_PLACEHOLDERS
    already = PluginExplainer(CUSTOM)
    assert audit_explainer(Plugin(already), registry, config) is already
    term = audit_explainer(TfidfAttacker(temperature=1.0), registry, replace(config, placeholders=()))
    assert isinstance(term, TermExplainer) and term.placeholders == ()


def test_the_audit_explainer_has_the_declared_placeholders_and_every_span_respects_them(tmp_path):
    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    documents = load_documents(DOCUMENTS_CSV.encode(), name="documents.csv")
    project = parse_config(f"[evidence]\nplaceholders = {toml_list(CUSTOM)}\n"
                           "[attacker.tfidf]\ntemperature = 0.5\n", "audit.toml")
    config, attacker = declare_audit(project, registry, documents=documents)
    explainer = audit_explainer(attacker, registry, config)
    assert isinstance(explainer, TermExplainer) and explainer.placeholders == CUSTOM
    assert explainer.similarity is not None  # the rest of the explainer is the attacker's
    result = run_audit(documents, registry, attacker, config)
    texts = dict(zip(documents.frame["doc_id"], documents.frame["text"]))
    cert = result.certificate(config.policy_confidence)
    split = cert.split
    spans = {split.table.doc_ids[row]: document_evidence(split, row, explainer) for row in range(len(split))}
    assert "York" not in [s.text for s in spans["d1"]] and "Hull" not in [s.text for s in spans["d2"]]
    assert "Leeds" in [s.text for s in spans["d1"]]
    # without the declared list, the words inside the custom placeholders are evidence
    default = audit_explainer(attacker, registry, replace(config, placeholders=DEFAULT_PLACEHOLDERS))
    assert "York" in [s.text for s in document_evidence(split, list(split.table.doc_ids).index("d1"), default)]

    # what the command line writes: the worklist with the configuration's explainer
    paths = write_audit(result, tmp_path / "out", audit_explainer(attacker, registry, config))
    for record in json.loads(paths["worklist.json"].read_text(encoding="utf-8")):
        text = texts[record["doc_id"]]
        regions = placeholder_regions(text, CUSTOM)
        for span in record["evidence"]:
            start, end = span["offset"], span["offset"] + span["length"]
            assert text[start:end] == span["text"] and not any(a < end and start < b for a, b in regions)
    assert tomllib.loads(paths["audit.toml"].read_text(encoding="utf-8"))["evidence"]["placeholders"] == list(CUSTOM)


def test_the_dense_explainer_takes_the_declared_placeholders(tmp_path):
    class Letters:
        def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                   show_progress_bar=False):
            out = np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], np.float32)
            return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    attacker = DenseAttacker(model="fake-letters", encoder=Letters(), temperature=1.0, cache=False)
    level = KnowledgeLevel("L", ("city", "job"))
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), placeholders=CUSTOM)
    explainer = audit_explainer(attacker, registry, config)
    assert isinstance(explainer, LeaveOneOutExplainer) and explainer.placeholders == CUSTOM
    text = "Works in Leeds {{as a nurse}} today. Seen «in York» once."
    spans = explainer.evidence(text, [0, 1])
    assert spans and all(text[s.start:s.end] == s.text for s in spans)
    assert not any("nurse" in s.text or "York" in s.text for s in spans)
    assert audit_explainer(TfidfAttacker(temperature=1.0), registry, config).placeholders == CUSTOM


def test_a_panel_reads_sentences_left_out_only_when_no_member_explains_by_words():
    from cpa_core.report.evidence import panel_explainers

    class Letters:
        calls = 0

        def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                   show_progress_bar=False):
            Letters.calls += 1
            out = np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], np.float32)
            return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    dense = DenseAttacker(model="fake-letters", encoder=Letters(), temperature=1.0, cache=False)
    tfidf = TfidfAttacker(temperature=1.0)
    level = KnowledgeLevel("L", ("city", "job"))
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(dense), placeholders=CUSTOM)

    with_words = panel_explainers([(config, tfidf), (config, dense)], registry)
    assert isinstance(with_words[0], TermExplainer) and with_words[1] is None
    alone = panel_explainers([(config, dense)], registry)
    assert isinstance(alone[0], LeaveOneOutExplainer) and alone[0].placeholders == CUSTOM


def test_evidence_explained_in_one_batch_is_each_document_explained_alone(toy_release):
    from cpa_core.report.evidence import document_evidence, documents_evidence

    result, explainer, _ = toy_release
    split = result.test_split
    rows = list(range(len(split)))[::-1]  # any order, every document
    batch = documents_evidence(split, rows, explainer)
    assert sum(map(len, batch)) > 0
    assert batch == [document_evidence(split, row, explainer) for row in rows]
    assert documents_evidence(split, rows, None) == [[] for _ in rows]


def test_a_query_that_is_not_its_text_and_clues_gives_no_evidence():
    explainer = TermExplainer(lambda query, rows: {"leeds": 1.0}, str.lower)
    table = TfidfAttacker(temperature=1.0).attack(["d1"], ["Leeds"], make_registry(TOY), WORDS)
    from dataclasses import replace
    split = ScoredSplit.build(replace(table, clues=(("York",),)), ["P1"], None, "aps")
    assert document_evidence(split, 0, explainer) == []  # "Leeds" does not end with "\nYork": no offsets to trust
    split = ScoredSplit.build(replace(table, queries=("Leeds\nYork",), clues=(("York",),)), ["P1"], None, "aps")
    assert [(s.text, s.start) for s in document_evidence(split, 0, explainer)] == [("Leeds", 0)]
