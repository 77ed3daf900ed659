"""The risk of an edited text under the stored calibration: the ordering of risks by hand, and on a toy audit,
the released text re-scored gives its certified set, an edit that removes the evidence lowers the risk, and a
text whose certainty moves to another stratum is counted under that stratum's threshold."""

from __future__ import annotations

import numpy as np
import pytest

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.rescoring import Risk, StoredRisk
from toy_release import toy_release_fixture  # noqa: F401


def test_a_risk_is_lower_only_when_nothing_gets_worse():
    start = Risk(3, 0.5, 0.4)
    assert Risk(5, 0.5, 0.4).lower_than(start)  # a larger set
    assert Risk(3, 0.4, 0.4).lower_than(start)  # a lower probability
    assert Risk(3, 0.5, 0.3).lower_than(start)  # a less certain attacker
    assert not Risk(3, 0.5, 0.4).lower_than(start)  # the same
    assert not Risk(9, 0.6, 0.1).lower_than(start)  # a larger set but a higher probability
    assert not Risk(2, 0.1, 0.1).lower_than(start)  # a smaller set, whatever else
    assert Risk(3, None, 0.3).lower_than(Risk(3, None, 0.4)) and not Risk(2, None, 0.3).lower_than(Risk(3, None, 0.4))
    assert Risk(3, 0.5, 0.9).no_higher_than(start) and not Risk(3, 0.51, 0.0).no_higher_than(start)


def test_acceptable_means_not_flagged_by_either_rule():
    policy = ReleasePolicy(flag_below=5, acceptable_linkage=0.2)
    assert Risk(5, 0.2, 0.0).acceptable(policy)
    assert not Risk(4, 0.0, 0.0).acceptable(policy) and not Risk(50, 0.21, 0.0).acceptable(policy)
    assert Risk(5, None, 0.9).acceptable(policy)  # no probability: the set rule alone


def test_the_released_text_rescored_is_its_certificate_and_removing_its_words_lowers_its_risk(toy_release):
    result, _, documents = toy_release
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    cert = result.certificate(0.9)
    stored = StoredRisk(result, toy_release.attacker, toy_release.registry, 0.9)
    rows = list(range(len(cert.set_sizes)))
    ids = cert.split.table.doc_ids.astype(str)
    again = stored.of([(cert, r) for r in rows], [texts[ids[r]] for r in rows])
    assert [found.risk.set_size for found in again] == cert.set_sizes.tolist()
    for r, found in zip(rows, again):
        assert stored.certified(cert, r).certainty == pytest.approx(found.risk.certainty)
        assert found.rows[0] == cert.split.table.candidates[r, 0]  # the attacker's first guess, as audited
    # every word gone: the attacker is no surer than for an empty text, and never more certain than before
    blank = stored.of([(cert, r) for r in rows], ["" for _ in rows])
    assert all(b.risk.certainty <= a.risk.certainty + 1e-12 for a, b in zip(again, blank))
    assert max(b.risk.certainty for b in blank) == pytest.approx(min(b.risk.certainty for b in blank))


def test_a_text_that_moves_stratum_gets_that_strata_threshold():
    from types import SimpleNamespace

    labels = np.array(["certainty 1 of 2", "certainty 2 of 2", "certainty 2 of 2"], dtype=object)
    split = SimpleNamespace(strata=labels, groups=None)
    cert = SimpleNamespace(split=split, q_hat=np.array([-0.2, -0.7, -0.6]))
    result = SimpleNamespace(inputs={}, config=SimpleNamespace(policy_confidence=0.9),
                             strata=({"label": "certainty 1 of 2", "group": None, "margin_low": 0.0},
                                     {"label": "certainty 2 of 2", "group": None, "margin_low": 0.5}))
    attacker = SimpleNamespace(adopt=lambda learned: None)
    stored = StoredRisk(result, attacker, None)
    assert stored._threshold(cert, 0, 0.1) == -0.2  # its own stratum: its own threshold
    assert stored._threshold(cert, 0, 0.8) == -0.7  # the surer stratum: its smallest threshold
    assert stored._threshold(cert, 1, 0.2) == -0.2 and stored._threshold(cert, 2, 0.9) == -0.6
