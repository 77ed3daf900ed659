"""Suggested redactions: greedy on the evidence, re-scored against the stored threshold, as edits of the
released text (applying them to the sample and auditing again lowers the flagged count:
tests/integration/test_suggestions_sample.py)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.attack.explainers import TermExplainer
from cpa_core.audit.rescoring import Rescored, Risk
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.redaction.suggestions import Edit, apply_edits, released_offsets, search_redactions, suggest
from toy_release import toy_release_fixture  # noqa: F401


def test_edits_apply_from_the_end_and_keep_the_rest():
    text = "Zoë drove a bus in Gdańsk"
    edits = [Edit(0, 3, "Zoë", "[REDACTED]", "zoe"), Edit(19, 6, "Gdańsk", "", "gdansk")]
    assert apply_edits(text, edits) == "[REDACTED] drove a bus in "
    assert apply_edits(text, []) == text


def test_greedy_removes_the_heaviest_term_everywhere_until_the_set_reaches_k():
    text = "alpha beta gamma, Beta again; delta"
    weights = {"alpha": 1.0, "beta": 3.0, "gamma": 2.0, "delta": 0.5}
    explainer = TermExplainer(lambda query, rows: {t: w for t, w in weights.items() if t in query.lower()}, str.lower)
    # the set grows by 4 people per redacted word occurrence (a hand-made attacker), which names person 1 rather
    # than person 0 once the set holds 11 people
    def rescore(edited):
        size = 2 + 4 * edited.count("[REDACTED]")
        return size, [0] if size < 11 else [1]
    done = suggest("d1", text, rescore, explainer, flag_below=11)
    assert (done.set_size_before, done.set_size_after, done.reaches_k) == (2, 14, True)
    assert [(e.original, e.term) for e in done.edits] == [("beta", "beta"), ("gamma", "gamma"), ("Beta", "beta")]
    assert all(text[e.offset:e.offset + e.length] == e.original for e in done.edits)
    assert apply_edits(text, done.edits) == "alpha [REDACTED] [REDACTED], [REDACTED] again; delta"
    assert done.characters == 13
    # nothing more to remove: it stops, and says k is not reached
    # each word lowers the attacker's certainty but the set never reaches k: every term goes, and the document is
    # to be withheld, with the reason
    fading = lambda edited: Rescored(Risk(1, None, len(edited) / len(text)), (0,))  # noqa: E731
    stuck = suggest("d2", text, fading, explainer, flag_below=11, strategy="delete")
    assert not stuck.reaches_k and {e.term for e in stuck.edits} == set(weights)
    assert all(e.replacement == "" for e in stuck.edits)
    assert stuck.action == "withhold" and "after redacting 4 terms (5 edits), |C| = 1 < k = 11" in stuck.reason
    assert done.action == "redact" and done.reason == ""
    # whom the attacker names first is no stopping rule: the same search, whoever it names, ends where the set
    # reaches k; and an edit that only moves the first guess (onto the truth, maybe) without lowering the risk is
    # never taken
    naming = suggest("d5", text, lambda edited: (2 + 4 * edited.count("[REDACTED]"), [0]), explainer, flag_below=11)
    assert (naming.action, naming.edits, naming.reason) == (done.action, done.edits, "")
    moving = suggest("d6", text, lambda edited: (2, [edited.count("[REDACTED]")]), explainer, flag_below=11)
    assert moving.edits == () and moving.action == "withhold" and set(moving.rejected) == set(weights)
    # within the target a search can reach, but flagged by the release policy: never left unchanged
    reach, release = ReleasePolicy(11, acceptable_linkage=0.3), ReleasePolicy(11, acceptable_linkage=0.1)
    at_floor = lambda edited: Rescored(Risk(20, 0.2, len(edited) / len(text)), (0,))  # noqa: E731
    changed = search_redactions([("d7", "d7", text)], lambda names, texts: [at_floor(t) for t in texts], explainer,
                                reach, "delete", flagged_by=release)[0]
    assert changed.action == "redact" and len(changed.steps) == 1 and changed.edits
    still = lambda edited: Rescored(Risk(20, 0.2, 0.5), (0,))  # noqa: E731
    unchanged = search_redactions([("d8", "d8", text)], lambda names, texts: [still(t) for t in texts], explainer,
                                  reach, "placeholder", flagged_by=release)[0]
    assert unchanged.action == "withhold" and unchanged.edits == ()
    assert "linkage probability 0.2 > 0.1" in unchanged.reason
    assert search_redactions([("d9", "d9", text)], lambda names, texts: [still(t) for t in texts], explainer,
                             reach, "placeholder")[0].action == "redact"  # no release policy: within the target
    # nothing lowers its risk: no edit at all, and the reason says so
    frozen = suggest("d4", text, lambda edited: (1, [0]), explainer, flag_below=11)
    assert frozen.edits == () and frozen.action == "withhold" and "no redaction of its evidence" in frozen.reason
    assert suggest("d3", text, lambda edited: (20, [0]), explainer, flag_below=11).edits == ()  # not flagged


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcé ,.", min_size=1, max_size=40), st.data())
def test_a_span_of_the_edited_text_maps_back_to_the_released_text(text, data):
    """Brute force: every span of the edited text that misses the replacements is the same text in the release."""
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=6)))
    edits = [Edit(a, b - a, text[a:b], data.draw(st.sampled_from(["", "[X]", "ü"])), "t")
             for a, b in zip(cuts[::2], cuts[1::2])]
    edited = apply_edits(text, edits)
    # which characters of the edited text an edit wrote, and where each kept character came from
    origin, position = [], 0
    for edit in edits:
        origin += list(range(position, edit.offset)) + [None] * len(edit.replacement)
        position = edit.offset + edit.length
    origin += list(range(position, len(text)))
    assert len(origin) == len(edited)
    for start in range(len(edited) + 1):
        for end in range(start + 1, len(edited) + 1):
            where = released_offsets(edits, start, end)
            kept = origin[start:end]
            contiguous = None not in kept and kept == list(range(kept[0], kept[0] + len(kept)))
            assert (where is not None) == contiguous
            if where is not None:
                assert where == (kept[0], kept[-1] + 1) and text[where[0]:where[1]] == edited[start:end]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_the_redacted_file_from_the_bytes_read_is_the_release_written(tmp_path, suffix):
    from cpa_core.io.tables import load_documents
    from cpa_core.redaction.suggestions import redacted_file, redacted_release

    frame = pd.DataFrame({"doc_id": ["a", "b", "c"], "text": ["seen in Gdańsk in 2014", "nothing here", "withheld"],
                          "identity_id": ["P1", "P2", "P3"]})
    source = tmp_path / f"docs{suffix}"
    if suffix == ".csv":
        frame.to_csv(source, index=False)
    else:
        source.write_text(frame.to_json(orient="records", lines=True, force_ascii=False), encoding="utf-8")
    documents = load_documents(source.read_bytes(), name=source.name)
    edits = {"a": [Edit(8, 6, "Gdańsk", "[CITY]", "gdansk"), Edit(18, 4, "2014", "the 2010s", "2014", "generalize")]}
    name, payload = redacted_file(source.read_bytes(), documents, edits, withheld={"c"})
    (tmp_path / "out").mkdir()
    written = redacted_release(source, documents, edits, tmp_path / "out", withheld={"c"})
    # named after the input, never as the input: downloading it cannot overwrite the original
    assert name == f"docs-redacted{suffix}" and written == tmp_path / "out" / name
    assert payload == written.read_bytes() and written.stat().st_mode & 0o777 == 0o600
    again = load_documents(payload, name=name)
    assert again.frame["text"].tolist() == ["seen in [CITY] in the 2010s", "nothing here"]  # c withheld


def test_a_replacement_the_releases_encoding_cannot_write_is_refused_naming_the_file(tmp_path):
    from cpa_core.common.errors import DataError
    from cpa_core.io.tables import load_documents
    from cpa_core.redaction.suggestions import redacted_file

    data = "doc_id,text,identity_id\na,from Lodz,P1\n".encode("latin-1")
    documents = load_documents(data, name="docs.csv", encoding="latin-1")
    edits = {"a": [Edit(5, 4, "Lodz", "Łódź Voivodeship", "lodz", "generalize")]}
    with pytest.raises(DataError, match=r"docs.csv: the redacted release cannot be written in its encoding.*U\+0141"):
        redacted_file(data, documents, edits)


def test_the_worklist_carries_each_documents_suggested_edits_as_offsets():
    from cpa_core.redaction.suggestions import Suggestion, suggested_worklist
    from cpa_core.report.worklist import worklist_csv, worklist_json

    work = pd.DataFrame({"doc_id": ["a", "b"], "set_size": [2, 5], "evidence": [[], []], "config_id": ["c", "c"],
                         "confidence": [0.9, 0.9]})
    edits = (Edit(3, 5, "Leeds", "[CITY]", "leeds"), Edit(12, 4, "2014", "the 2010s", "2014"))
    frame = suggested_worklist(work, [Suggestion("a", Risk(2, None, 0.0), Risk(12, None, 0.0), edits, 11)])
    assert list(frame.columns)[-2:] == ["config_id", "confidence"]
    assert frame["set_size_after_edits"].tolist()[0] == 12 and pd.isna(frame["set_size_after_edits"].tolist()[1])
    assert frame["suggested_edits"].tolist()[1] == []
    assert [e["replacement"] for e in json.loads(worklist_json(frame))[0]["suggested_edits"]] == ["[CITY]", "the 2010s"]
    row = pd.read_csv(io.StringIO(worklist_csv(frame)), dtype=str, keep_default_na=False).iloc[0]
    assert row["suggested_edits"] == "3+5=[CITY]; 12+4=the 2010s" and row["reaches_k"] == "True"


def test_a_document_whose_pool_is_smaller_than_k_is_to_be_withheld_without_a_search(toy_release):
    """No redaction gives a set more people than the pool holds: such a document is withheld at once, saying so."""
    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.redaction.suggestions import suggest_redactions

    result, _, documents = toy_release
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    pool = int(result.test_split.table.pool_sizes.max())
    found = suggest_redactions(result, toy_release.attacker, toy_release.registry, texts,
                               policy=ReleasePolicy(pool + 1, acceptable_linkage=0.999))
    assert found and all(s.action == "withhold" and s.edits == () and f"fewer than k = {pool + 1}" in s.reason
                         for s in found)


def test_between_two_edits_that_make_a_document_acceptable_the_one_that_keeps_more_wins():
    """Either word alone makes the set reach k: the heavier but longer word stays, the short one goes."""
    text = "Washingtonian Ann lived here"
    weights = {"washingtonian": 2.0, "ann": 1.0}
    explainer = TermExplainer(lambda query, rows: {t: w for t, w in weights.items() if t in query.lower()}, str.lower)

    def rescore(edited):  # any redacted word lifts the set to 12, an acceptable one at k = 11
        return Rescored(Risk(12 if "[REDACTED]" in edited else 2, None, 0.5), (0,))
    done = suggest("d1", text, rescore, explainer, flag_below=11)
    assert done.action == "redact" and [e.original for e in done.edits] == ["Ann"] and done.characters == 3
    # until it is acceptable, risk decides: a longer word that lowers the risk more is taken first
    def graded(edited):
        size = 2 + (8 if "Washingtonian" not in edited else 0) + (1 if "Ann" not in edited else 0)
        return Rescored(Risk(size, None, 0.5), (0,))
    stepwise = suggest("d2", text, graded, explainer, flag_below=11)
    assert [e.original for e in stepwise.edits] == ["Washingtonian", "Ann"]


def test_the_reason_to_withhold_counts_terms_and_edits_in_agreeing_words():
    from cpa_core.redaction.suggestions import Step, _Search, _withhold_reason

    policy = ReleasePolicy(flag_below=11)
    stuck = Rescored(Risk(3, None, 0.5), (0,))
    one = _Search("n", "d", "alpha beta", Risk(2, None, 0.6), stuck, edits=[Edit(0, 5, "alpha", "", "alpha")],
                  steps=[Step("alpha", stuck.risk)], rejected=["beta"])
    assert _withhold_reason(one, policy) == ("after redacting 1 term (1 edit), |C| = 3 < k = 11; 1 more term would "
                                             "not lower its risk")
    none = _Search("n", "d", "alpha beta", Risk(2, None, 0.6), stuck, rejected=["alpha"])
    assert _withhold_reason(none, policy).startswith("no redaction of its evidence lowers its risk (1 term tried)")
