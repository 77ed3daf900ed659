"""The redaction search over an attacker panel, on hand-made attackers: a step is taken only when no member's risk
rises and one's falls, a document is done only when every member accepts it, and the members' evidence is merged on
a common scale."""

from __future__ import annotations

from cpa_core.attack.explainers import PanelExplainer, TermExplainer
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.rescoring import PanelRisk, Rescored, Risk
from cpa_core.redaction.suggestions import search_redactions

TEXT = "alpha beta gamma, beta again; delta"
NAMES = ("words", "style")


def explainer(weights: dict[str, float]) -> TermExplainer:
    return TermExplainer(lambda query, rows: {t: w for t, w in weights.items() if t in query.lower()}, str.lower)


def panel_rescore(sizes):
    """Each member's set size of an edited text (``sizes[i](text)``), as a panel's risk."""
    def rescore(names, texts):
        return [Rescored(PanelRisk(NAMES, tuple(Risk(size(text), None, 0.0) for size in sizes)), ((0,), (0,)))
                for text in texts]
    return rescore


def removed(text: str, word: str) -> bool:
    return word not in text.lower()


def test_a_step_that_lowers_one_members_risk_and_raises_anothers_is_never_taken():
    # the word member's set grows when "beta" goes, but the style member's shrinks: "beta" is rejected;
    # "gamma" lowers the word member's risk and leaves the style member's alone: it is taken
    words = lambda t: 2 + 10 * removed(t, "beta") + 10 * removed(t, "gamma")  # noqa: E731
    style = lambda t: 12 - 5 * removed(t, "beta")  # noqa: E731
    both = PanelExplainer(members=(explainer({"beta": 3.0, "gamma": 1.0}), None))
    done = search_redactions([("d", "d", TEXT)], panel_rescore((words, style)), both, ReleasePolicy(11), "delete")[0]
    assert [e.term for e in done.edits] == ["gamma"] and "beta" in done.rejected
    assert done.action == "redact" and done.after.members == (Risk(12, None, 0.0), Risk(12, None, 0.0))
    assert all(b.no_higher_than(a) for a, b in zip([done.before] + [s.risk for s in done.steps],
                                                    [s.risk for s in done.steps]))


def test_a_document_is_done_only_when_every_member_accepts_it():
    # one member accepts it as released, the other does not: it is searched, and withheld when nothing helps the other
    words = lambda t: 20  # noqa: E731
    style = lambda t: 3  # noqa: E731
    both = PanelExplainer(members=(explainer({"beta": 3.0, "gamma": 1.0}), explainer({"delta": 1.0})))
    stuck = search_redactions([("d", "d", TEXT)], panel_rescore((words, style)), both, ReleasePolicy(11), "delete")[0]
    assert stuck.action == "withhold" and stuck.edits == ()
    assert "style: |C| = 3 < k = 11" in stuck.reason and "words:" not in stuck.reason


def test_the_members_evidence_is_merged_on_a_common_scale():
    # the word member weighs in hundreds, the style member in hundredths: each one's heaviest term weighs 1
    loud = explainer({"beta": 300.0, "gamma": 100.0})
    quiet = explainer({"delta": 0.02, "beta": 0.01})
    spans = PanelExplainer(members=(loud, None, quiet)).evidence(TEXT, ((0,), (), (0,)), ((), (), ()))
    weights = {}
    for span in spans:
        weights.setdefault(span.term, set()).add(round(span.weight, 9))
    assert weights == {"beta": {1.0}, "gamma": {round(1 / 3, 9)}, "delta": {1.0}}
    assert [s.start for s in spans if s.term == "beta"] == [6, 18]  # one span per range of the text
    assert all(TEXT[s.start:s.end].lower() == s.term for s in spans)


def test_a_costly_member_attacks_only_the_step_the_others_rank_best_and_still_vetoes_it():
    # "dense" (costly) shrinks its set when "beta" goes: beta, the words member's best, is attacked by dense, rejected,
    # and the next best, gamma, is taken; dense never attacks delta's proposal in that round
    names = ("words", "dense")
    sizes = (lambda t: 2 + 10 * removed(t, "beta") + 5 * removed(t, "gamma") + 1 * removed(t, "delta"),
             lambda t: 20 - 5 * removed(t, "beta"))
    attacked = {0: [], 1: []}

    def rescore(names_, texts, members=None):
        chosen = range(len(sizes)) if members is None else members
        for i in chosen:
            attacked[i].extend(texts)
        return [Rescored(PanelRisk(tuple(names[i] for i in chosen), tuple(Risk(sizes[i](t), None, 0.0)
                                                                         for i in chosen)),
                         tuple((0,) for _ in chosen)) for t in texts]

    both = PanelExplainer(members=(explainer({"beta": 3.0, "gamma": 2.0, "delta": 1.0}), None))
    done = search_redactions([("d", "d", TEXT)], rescore, both, ReleasePolicy(11), "delete", costly=(1,))[0]
    assert [s.term for s in done.steps] == ["gamma", "delta"] and "beta" in done.rejected
    assert all(step.risk.member("dense").set_size == 20 for step in done.steps)  # dense never rises
    first_round = attacked[1][1:]  # after the document's own attack by both
    assert [removed(t, "beta") for t in first_round[:2]] == [True, False] and len(attacked[1]) < len(attacked[0])
    assert done.action == "withhold" and done.after.members[0].set_size == 8
