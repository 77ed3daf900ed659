"""The what-if over release policies, hand-computed from a stored search: released as they are, edited with the edits
up to the first acceptable step, withheld, never searched; and the grid of policies."""

import numpy as np
import pytest

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.rescoring import Risk
from cpa_core.redaction.suggestions import WITHHOLD, Edit, Step, Suggestion
from cpa_core.redaction.whatif import KS, RATES, WHAT_IF_COLUMNS, policy_grid, what_if


def edit(term: str, length: int) -> Edit:
    return Edit(0, length, "x" * length, "", term)


def release():
    """Four documents. d0: set 20, linkage 0.05 (acceptable under most policies). d1: set 4, linkage 0.3, two steps:
    after 'Ann' (3 characters) set 9 and 0.12, after 'Paris' (5 characters) set 12 and 0.08. d2: set 2, linkage 0.6,
    one step that stays unacceptable ('Bob'), withheld. d3: set 30, linkage 0.15, never searched (the declared policy
    flags it by linkage only at a rate below 0.15, and no search ran for it)."""
    sizes = np.array([20, 4, 2, 30])
    linkage = np.array([0.05, 0.3, 0.6, 0.15])
    suggestions = [
        Suggestion("d1", Risk(4, 0.3, 0.5), Risk(12, 0.08, 0.1), (edit("Ann", 3), edit("Paris", 5)), 11,
                   steps=(Step("Ann", Risk(9, 0.12, 0.3)), Step("Paris", Risk(12, 0.08, 0.1)))),
        Suggestion("d2", Risk(2, 0.6, 0.9), Risk(3, 0.5, 0.8), (edit("Bob", 3),), 11, action=WITHHOLD,
                   steps=(Step("Bob", Risk(3, 0.5, 0.8)),)),
    ]
    return ["d0", "d1", "d2", "d3"], (lambda policy: policy.flags(sizes, linkage)), suggestions


def row(table, k, rate):
    found = table[(table.flag_below == k) & np.isclose(table.acceptable_linkage, rate)]
    assert len(found) == 1
    return found.iloc[0].to_dict()


def test_hand_computed_outcomes():
    doc_ids, flags, suggestions = release()
    table = what_if(ReleasePolicy(11, acceptable_linkage=0.1), doc_ids, flags, suggestions)
    assert list(table.columns) == list(WHAT_IF_COLUMNS)
    declared = row(table, 11, 0.1)
    # d0 released; d1 edited with both steps (0.12 > 0.1 after 'Ann'); d2 withheld; d3 flagged (0.15), never searched
    assert declared["declared"] and (declared["released_as_is"], declared["edited"], declared["withheld"],
                                     declared["not_searched"], declared["characters_removed"]) == (1, 1, 2, 1, 8)
    laxer = row(table, 11, 0.15)  # d3 (0.15, not above) released as it is; d1's set of 9 after 'Ann' is below 11
    assert (laxer["released_as_is"], laxer["edited"], laxer["withheld"], laxer["characters_removed"]) == (2, 1, 1, 8)
    assert laxer["documents_kept"] == 3 and not laxer["declared"]
    lax = row(what_if(ReleasePolicy(8, acceptable_linkage=0.15), doc_ids, flags, suggestions), 8, 0.15)
    assert (lax["edited"], lax["characters_removed"]) == (1, 3)  # d1 acceptable after 'Ann' alone: fewer edits
    strict = row(table, 11, 0.05)  # no step of d1 reaches 0.05; d0 (0.05, not above) still released
    assert (strict["released_as_is"], strict["edited"], strict["withheld"]) == (1, 0, 3)
    small_k = row(table, 3, 0.1)  # k = 3: d2's set of 2 still flags it, d1 needs 0.08: both steps
    assert (small_k["released_as_is"], small_k["edited"], small_k["withheld"]) == (1, 1, 2)


def test_no_search_counts_every_flagged_document_as_withheld_not_searched():
    doc_ids, flags, _ = release()
    table = what_if(ReleasePolicy(11), doc_ids, flags)
    for record in table.to_dict(orient="records"):
        assert record["edited"] == 0 and record["withheld"] == record["not_searched"]
        assert record["released_as_is"] + record["withheld"] == 4


def test_the_grid_holds_every_rate_and_k_once_with_the_declared_policy():
    declared = ReleasePolicy(11)  # a = 1/11, not on the grid of rates
    grid = policy_grid(declared)
    keys = [(p.flag_below, round(p.linkage_rate, 9)) for p in grid]
    assert len(keys) == len(set(keys))
    assert {round(r, 9) for r in RATES} | {round(1 / 11, 9)} <= {rate for k, rate in keys if k == 11}
    assert set(KS) <= {k for k, _ in keys}
    doc_ids, flags, suggestions = release()
    table = what_if(declared, doc_ids, flags, suggestions)
    assert int(table.declared.sum()) == 1 and row(table, 11, 1 / 11)["declared"]
    # k varies at the declared rate, which follows k when none is declared
    assert row(table, 20, 1 / 20)["flag_below"] == 20


@pytest.mark.parametrize("rate", [0.05, 0.1, 0.2])
def test_a_laxer_policy_never_keeps_fewer_documents(rate):
    doc_ids, flags, suggestions = release()
    table = what_if(ReleasePolicy(11, acceptable_linkage=rate), doc_ids, flags, suggestions)
    at_k = table[table.flag_below == 11].sort_values("acceptable_linkage")
    assert np.all(np.diff(at_k.documents_kept.to_numpy()) >= 0)
