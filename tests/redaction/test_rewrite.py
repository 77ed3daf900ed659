"""The LLM rewrite of a document the search would withhold: the rewrite as edits of the released text (a property over
random texts), and the rule that keeps a rewrite only when every attacker finds it within the policy and none finds it
riskier than the released text, through a real client talking to a scripted endpoint."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_scripted import Scripted, api_key, make_client, user_message  # noqa: F401

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.rescoring import PanelRisk, Rescored, Risk
from cpa_core.redaction.rewrite import REWRITE_V1, Rewriter, rewrite_edits, rewrite_withheld
from cpa_core.redaction.suggestions import REDACT, WITHHOLD, Step, Suggestion, apply_edits

WORDS = st.sampled_from(["Anna", "Leeds", "nurse", "the", "a", "harp", "1984", "[CITY]", "went", "to", ","])


def _text(words, gaps) -> str:
    return "".join(word + gap for word, gap in zip(words, gaps))


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=12), st.lists(WORDS, max_size=12), st.data())
def test_a_rewrite_as_edits_of_the_released_text_reads_as_the_rewrite(old, new, data):
    gaps = st.lists(st.sampled_from([" ", "  ", "\n", " \t"]), min_size=12, max_size=12)
    released, rewritten = _text(old, data.draw(gaps)), _text(new, data.draw(gaps))
    edits = rewrite_edits(released, rewritten)
    assert apply_edits(released, edits).split() == rewritten.split()  # the same words, in order
    ordered = sorted(edits, key=lambda e: e.offset)
    for edit in ordered:
        assert released[edit.offset:edit.offset + edit.length] == edit.original and edit.kind == "rewrite"
    assert all(a.offset + a.length <= b.offset for a, b in zip(ordered, ordered[1:]))  # no overlap
    if released.split() == rewritten.split():
        assert edits == ()


def test_a_rewrite_by_hand():
    released = "I am Anna, a nurse in Leeds since 1984."
    edits = rewrite_edits(released, "I am a nurse in a northern city since the 1980s.")
    assert [(e.original, e.replacement) for e in edits] == [("Anna,", ""), ("Leeds", "a northern city"),
                                                            ("1984.", "the 1980s.")]
    assert apply_edits(released, edits) == "I am  a nurse in a northern city since the 1980s."


NAMES = ("tfidf", "fusion")
POLICY = ReleasePolicy(3, acceptable_linkage=0.2)


def _risk(sizes, linkages) -> PanelRisk:
    return PanelRisk(NAMES, tuple(Risk(s, p, 0.1) for s, p in zip(sizes, linkages)))


def _withheld(doc_id: str) -> Suggestion:
    risk = _risk((1, 1), (0.6, 0.5))
    return Suggestion(doc_id, risk, risk, (), 3, WITHHOLD, "no safe redaction of its evidence is acceptable",
                      (Step("Anna", risk),), ("Leeds",))


RELEASED = {"safe": "Anna the nurse from Leeds.", "raises": "Anna the nurse from Leeds.",
            "stubborn": "Anna the nurse from Leeds."}
REWRITES = {"safe": "A nurse from a northern city.", "raises": "Anna Smith, the harpist nurse of Leeds.",
            "stubborn": "Anna the nurse from a city."}
RISKS = {  # the risk under each attacker of each text, as the rescoring would give it
    "Anna the nurse from Leeds.": _risk((1, 2), (0.6, 0.5)),
    "A nurse from a northern city.": _risk((8, 5), (0.05, 0.1)),
    "Anna Smith, the harpist nurse of Leeds.": _risk((4, 1), (0.1, 0.7)),  # fusion: a smaller set, higher linkage
    "Anna the nurse from a city.": _risk((2, 4), (0.3, 0.2)),  # lower, still flagged (tfidf's set of 2 < k)
}


def _rescore(calls):
    def rescore(names, texts):
        calls.append(list(zip(names, texts)))
        return [Rescored(RISKS[" ".join(text.split())], ()) for text in texts]
    return rescore


def test_a_rewrite_is_kept_only_when_safe_and_no_riskier(tmp_path):
    # three documents with the same words, told apart by their whitespace: the endpoint answers by the text asked
    texts = {"safe": RELEASED["safe"], "raises": RELEASED["raises"] + " ", "stubborn": RELEASED["stubborn"] + "  "}

    def answer_by_text(body):
        text = user_message(body).split("Text:\n", 1)[1]
        found = {t: d for d, t in texts.items()}.get(text)
        return REWRITES[found] if found else REWRITES["stubborn"]
    script = Scripted(answer_by_text)
    calls = []
    suggestions = [_withheld(d) for d in ("safe", "raises", "stubborn")] + [
        Suggestion("kept", _risk((5, 5), (0.1, 0.1)), _risk((5, 5), (0.1, 0.1)), (), 3)]
    with make_client(tmp_path, script, max_tokens=64) as client:
        out = rewrite_withheld(suggestions, {d: (0, i) for i, d in enumerate(texts)}, texts, _rescore(calls),
                               Rewriter(client, rounds=2, seed=5), POLICY)
    by_id = {s.doc_id: s for s in out}
    # kept: within the policy under both attackers and no riskier: its edits make the rewrite
    safe = by_id["safe"]
    assert safe.action == REDACT and safe.reason == "" and safe.after == RISKS["A nurse from a northern city."]
    assert apply_edits(texts["safe"], safe.edits).split() == REWRITES["safe"].split()
    assert {e.kind for e in safe.edits} == {"rewrite"} and safe.before == RISKS[RELEASED["safe"]]
    # refused: fusion's set shrinks and its linkage rises; the document stays withheld and says why
    raises = by_id["raises"]
    assert raises.action == WITHHOLD and raises.edits == ()
    assert raises.reason.endswith("an LLM rewrite was refused: its rewrite raises the risk under fusion")
    # refused after both attempts: lower but still flagged
    stubborn = by_id["stubborn"]
    assert stubborn.action == WITHHOLD and stubborn.reason.endswith("its rewrite is still flagged by the policy")
    assert by_id["kept"] == suggestions[3]  # not withheld: never offered
    asked = [user_message(body) for body in script.bodies]
    assert len(asked) == 4  # three first attempts, one second attempt (the stubborn one's rewrite)
    assert sum(REWRITES["stubborn"] in m for m in asked) == 1
    assert all("Clues to remove or generalise: Anna, Leeds" in m for m in asked)
    assert script.bodies[0]["temperature"] == 0.0 and script.bodies[0]["messages"][0]["content"] == REWRITE_V1.system
    # the released texts and the rewrites are attacked by the document's own name
    assert calls[0] == [((0, 0), texts["safe"]), ((0, 1), texts["raises"]), ((0, 2), texts["stubborn"])]


def test_no_usable_answer_and_an_answer_that_is_no_rewrite_are_refused(tmp_path):
    texts = {"empty": "Anna the nurse from Leeds.", "long": "Anna the nurse from Leeds.  "}

    def answer(body):
        text = user_message(body).split("Text:\n", 1)[1]
        return "   " if text == texts["empty"] else "word " * 200
    with make_client(tmp_path, Scripted(answer), max_tokens=512) as client:
        out = rewrite_withheld([_withheld("empty"), _withheld("long")], {"empty": 0, "long": 1}, texts,
                               _rescore([]), Rewriter(client), POLICY)
    assert [s.action for s in out] == [WITHHOLD, WITHHOLD]
    assert re.search(r"refused: the model gave no usable rewrite$", out[0].reason)
    assert out[1].reason.endswith("refused: the model's answer is much longer than the text: not a rewrite")


def test_nothing_withheld_asks_nothing(tmp_path):
    script = Scripted(lambda body: pytest.fail("no document to rewrite: no call"))
    kept = Suggestion("d", _risk((5, 5), (0.1, 0.1)), _risk((5, 5), (0.1, 0.1)), (), 3)
    with make_client(tmp_path, script) as client:
        assert rewrite_withheld([kept], {"d": 0}, {"d": "text"}, _rescore([]), Rewriter(client), POLICY) == [kept]


def test_at_most_max_documents_are_offered_in_order(tmp_path):
    texts = {"a": "Anna the nurse from Leeds.", "b": "Anna the nurse from Leeds. ", "c": "Anna the nurse from Leeds.  "}
    script = Scripted(lambda body: REWRITES["safe"])
    with make_client(tmp_path, script) as client:
        out = rewrite_withheld([_withheld(d) for d in texts], {d: i for i, d in enumerate(texts)}, texts,
                               _rescore([]), Rewriter(client, max_documents=2), POLICY)
    assert [s.action for s in out] == [REDACT, REDACT, WITHHOLD] and len(script.bodies) == 2
    assert out[2] == _withheld("c")  # never offered: as the search left it
