"""The release verdict: the attack's success first (not releasable when what is left after the flagged documents is
linked above the acceptable rate), never "release" on a vacuous certificate, and the intervals it reads."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace

import numpy as np
import pytest
from tables import LEVEL, documents_and_registry, probability_matrix, sample_truth, table_from_matrix, toy_attacker

from cpa_core.attack.base import AttackerBase
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.report.metrics import (
    AuditSummary,
    GroupMetrics,
    LevelSummary,
    LLMAnswers,
    clopper_pearson,
    llm_answers,
    summarize,
)
from cpa_core.report.verdict import LLM_INVALID_ALLOWED, STATUSES, release_verdict, summary_document

# --- the coverage interval ---------------------------------------------------------------------------------------

def test_clopper_pearson_by_hand():
    # 0/10: the upper bound solves (1 - p)^10 = 0.025, so p = 1 - 0.025^(1/10) = 0.30850; 10/10 mirrors it
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** 0.1, abs=1e-12))
    assert clopper_pearson(10, 10) == (pytest.approx(0.025 ** 0.1, abs=1e-12), 1.0)
    low, high = clopper_pearson(5, 10)  # the textbook interval (0.1871, 0.8129), symmetric about 1/2
    assert low == pytest.approx(0.187086, abs=1e-6) and high == pytest.approx(0.812914, abs=1e-6)
    assert clopper_pearson(0, 0) is None
    # a wider level gives a wider interval, and every interval holds its point estimate
    assert clopper_pearson(5, 10, 0.99)[0] < low and clopper_pearson(5, 10, 0.99)[1] > high
    for k in range(0, 21):
        lo, hi = clopper_pearson(k, 20)
        assert lo <= k / 20 <= hi


def test_the_remainder_bound_is_the_one_sided_97_5_percent_upper_bound_and_says_so():
    """The bound the verdict reads is the top of the two-sided 95 % interval: beta.ppf(0.975, x + 1, n - x), a one-sided
    97.5 % upper bound (hand-worked: 0 of 10 gives 1 - 0.025^(1/10) = 0.308497); every text that names it says so."""
    from scipy.stats import beta

    from cpa_core.report.help import COLUMNS, HELP, UPPER_BOUND

    assert 1 - 0.025 ** 0.1 == pytest.approx(0.308497, abs=1e-6)
    for x, n in [(0, 10), (1, 10), (6, 200), (17, 40), (39, 40)]:
        assert clopper_pearson(x, n)[1] == pytest.approx(beta.ppf(0.975, x + 1, n - x), rel=1e-12, abs=1e-15)
    assert UPPER_BOUND == "97.5 % upper bound (the top of the two-sided 95 % interval)"
    for key in ("verdict", "acceptable_linkage", "remainder_bound"):
        assert UPPER_BOUND in HELP[key] and "95 % upper bound" not in HELP[key].replace(UPPER_BOUND, ""), key
    assert COLUMNS["remainder_bound"][0] == "rest linked at most (97.5 % upper bound)"
    low, high = clopper_pearson(6, 200)
    level = entry(n_flagged=0, n_flagged_by_set=0, n_flagged_by_linkage=0, remainder_documents=200,
                  remainder_labelled=200, remainder_first_guess=0.03, remainder_first_guess_low=low,
                  remainder_first_guess_high=high, remainder_bound=high)
    verdict = release_verdict(summary(level), 0.9)
    assert f"at most {100 * high:.1f} % ({UPPER_BOUND})" in verdict.headline


def test_the_summary_carries_the_interval_of_its_coverage():
    rng = np.random.default_rng(4)
    probabilities = probability_matrix(600, 30, rng)
    truth = [f"p{t}" for t in sample_truth(probabilities, rng)]
    documents, registry = documents_and_registry(truth, m=30)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=300, n_test=300, confidences=(0.9,),
                         protocol="split")
    result = run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))
    entry = summarize(result).level(0.9)
    covered = int(result.certificate(0.9).covered.sum())
    assert covered / 300 == entry.coverage
    assert (entry.coverage_low, entry.coverage_high) == clopper_pearson(covered, 300)
    assert entry.coverage_low < entry.coverage < entry.coverage_high
    assert entry.pool_size == 30 and entry.share_in_registry is not None
    assert json.loads(json.dumps(summarize(result).to_dict()))["confidence"]["0.9"]["coverage_high"] == \
        entry.coverage_high


# --- hand-built summaries ----------------------------------------------------------------------------------------

def figures(**changes) -> dict:
    """The figures of a healthy level: 200 test documents, coverage 91 % at 90 %, finite threshold, nothing flagged."""
    low, high = clopper_pearson(182, 200)
    base = {"confidence": 0.9, "n_test": 200, "n_labelled": 200, "coverage": 0.91,
            "coverage_low": low, "coverage_high": high, "coverage_conditional": 0.93,
            "coverage_conditional_low": 0.88, "coverage_conditional_high": 0.96, "candidate_miss_rate": 0.02,
            "open_world_bound": 0.882, "median_set_size": 40.0, "mean_set_size": 44.0, "min_set_size": 12,
            "max_set_size": 90, "p10_set_size": 20.0, "p90_set_size": 70.0, "mean_leakage": 0.03, "empty_rate": 0.0,
            "pool_size": 400, "q_hat": 0.42, "varies": None, "infinite_threshold_rate": 0.0, "top1": 0.3,
            "top5": 0.6, "top10": 0.7, "mrr": 0.45, "mean_rank": 12.0, "n_flagged": 0, "flagged_share": 0.0,
            "first_guess_rate": 0.03, "first_guess_low": clopper_pearson(6, 200)[0],
            "first_guess_high": clopper_pearson(6, 200)[1], "top_k": 11, "top_k_rate": 0.2, "top_k_low": 0.15,
            "top_k_high": 0.26, "n_flagged_by_set": 0, "n_flagged_by_linkage": 0, "n_uninformative": 0,
            "mean_linkage": 0.03, "remainder_documents": 200, "remainder_labelled": 200,
            "remainder_first_guess": 0.03, "remainder_first_guess_low": clopper_pearson(6, 200)[0],
            "remainder_first_guess_high": clopper_pearson(6, 200)[1], "remainder_bound": clopper_pearson(6, 200)[1]}
    base.update(changes)
    if "n_flagged" in changes and "n_flagged_by_set" not in changes:
        base["n_flagged_by_set"] = changes["n_flagged"]
        base["remainder_documents"] = base["remainder_labelled"] = 200 - changes["n_flagged"]
    return base


def entry(*, n_cal=300, n_cal_needed=9, whole_pool_rate=0.0, share_in_registry=0.98, warnings=(), groups=None,
          **changes) -> LevelSummary:
    return LevelSummary(**figures(**changes), alpha=0.1, n_cal=n_cal, n_cal_needed=n_cal_needed,
                        whole_pool_rate=whole_pool_rate, share_in_registry=share_in_registry, warnings=tuple(warnings),
                        groups=groups)


def group(n_cal: int, q_hat: float, **changes) -> GroupMetrics:
    return GroupMetrics(**figures(n_test=100, q_hat=q_hat, **changes), n_cal=n_cal)


def summary(level: LevelSummary | None = None, *, protocol="split", miss_policy="infinite",
            flag_below=11) -> AuditSummary:
    level = level or entry()
    return AuditSummary("cfg123", "aps", "K2", "tfidf", miss_policy, ReleasePolicy(flag_below),
                        {str(level.confidence): level}, protocol)


def check(verdict, name):
    return next(c for c in verdict.checks if c.name == name)


def test_nothing_flagged_and_every_check_passed_is_release():
    verdict = release_verdict(summary(), 0.9)
    assert verdict.status == "release" and verdict.status in STATUSES and not verdict.failed
    assert verdict.headline.startswith("No document flagged: none of the 200 held-out test documents")
    assert "has a certified set below 11 or a linkage probability above 9.1 % at 90 % confidence" in verdict.headline
    assert "first guess is the right person for 3.0 % of the 200 labelled documents (95 % CI 1.1–6.4 %)" in \
        verdict.headline
    assert verdict.remainder_bound == pytest.approx(clopper_pearson(6, 200)[1]) and verdict.acceptable_linkage == \
        pytest.approx(1 / 11)
    assert all(c.passed for c in verdict.checks)
    assert "91.0 % (95 % CI 86.1–94.6 %) against the target 90 %" in check(verdict, "coverage").reason
    # the split protocol certified the test documents only: the curator is told
    assert any("release protocol" in action for action in verdict.actions)
    assert any("cfg123" in action for action in verdict.actions)


def test_flagged_documents_with_every_check_passed_is_redact():
    verdict = release_verdict(summary(entry(n_flagged=12, empty_rate=0.02)), 0.9)
    assert verdict.status == "redact" and verdict.n_flagged == 12
    assert verdict.headline.startswith("12 of 200 held-out test documents flagged at 90 % confidence (|C| < 11 or "
                                       "linkage > 0.0909) (by set size): redact or withhold them before release. ")
    assert verdict.title == "Release after redacting or withholding the flagged documents"
    assert verdict.actions[0].startswith("Redact or withhold the 12 flagged documents")
    assert any(action.startswith("4 of them have an empty set (|C| = 0)") for action in verdict.actions)
    assert any("The other 188 held-out test documents" in action for action in verdict.actions)


VACUOUS = {
    "infinite threshold": (dict(q_hat=float("inf"), whole_pool_rate=1.0, coverage=1.0,
                                coverage_low=0.98, coverage_high=1.0), "finite threshold"),
    "calibration too small": (dict(n_cal=5, n_cal_needed=19, confidence=0.95), "calibration size"),
    "mostly whole-pool sets": (dict(whole_pool_rate=0.6), "whole-pool sets"),
    "k at least the pool size": (dict(pool_size=8), "k below the pool size"),
    "few subjects in the registry": (dict(share_in_registry=0.3), "subjects in the registry"),
    "coverage below its interval": (dict(coverage=0.8, coverage_low=0.74, coverage_high=0.85), "coverage"),
    "a diagnostic warning": (dict(warnings=["only 30.0 % of the documents' subjects are in the registry"]),
                             "no diagnostic warning"),
}


@pytest.mark.parametrize("case", list(VACUOUS))
@pytest.mark.parametrize("n_flagged", [0, 7])
def test_a_failed_check_is_inconclusive_never_release(case, n_flagged):
    changes, failing = VACUOUS[case]
    level = entry(n_flagged=n_flagged, **changes)
    verdict = release_verdict(summary(level), level.confidence)
    assert verdict.status == "inconclusive", case
    assert check(verdict, failing).passed is False
    assert verdict.headline.startswith(f"Inconclusive: {n_flagged} of 200 held-out test documents flagged")
    assert "no evidence of safety" in verdict.headline
    assert verdict.actions[0].startswith("Do not release on the strength of this certificate")
    assert check(verdict, failing).remedy in verdict.actions
    assert any("flagged documents" in action for action in verdict.actions) == bool(n_flagged)


def test_group_checks_name_the_group_without_calibration():
    groups = {"a": group(150, 0.4), "b": group(0, float("inf"))}
    verdict = release_verdict(summary(entry(q_hat=None, varies="per-group", groups=groups)), 0.9)
    assert verdict.status == "inconclusive"
    assert check(verdict, "a threshold per group").reason == "group 'b' has no calibration document, so no threshold"
    assert check(verdict, "finite threshold").reason.startswith("group 'b' has an infinite threshold")
    healthy = {"a": groups["a"], "b": group(150, 0.5)}
    assert release_verdict(summary(entry(q_hat=None, varies="per-group", groups=healthy)), 0.9).status == "release"


def test_release_protocol_coverage_is_a_property_not_a_validation():
    verdict = release_verdict(summary(entry(coverage=0.905), protocol="release"), 0.9)
    coverage = check(verdict, "coverage")
    assert coverage.passed is None and "by construction" in coverage.reason and "not a validation" in coverage.reason
    assert verdict.status == "release" and "held-out" not in verdict.headline
    assert not any("release protocol" in action for action in verdict.actions)


def test_exclude_policy_checks_the_conditional_coverage():
    level = entry(coverage=0.84, coverage_low=0.78, coverage_high=0.89)  # below target, but conditional is fine
    verdict = release_verdict(summary(level, miss_policy="exclude"), 0.9)
    coverage = check(verdict, "coverage")
    assert coverage.passed and "identity is in the pool" in coverage.reason and "93.0 %" in coverage.reason
    assert verdict.status == "release"
    assert release_verdict(summary(level, miss_policy="infinite"), 0.9).status == "inconclusive"


def test_coverage_lost_to_identities_outside_the_pool_says_so():
    level = entry(coverage=0.85, coverage_low=0.79, coverage_high=0.89, candidate_miss_rate=0.12)
    verdict = release_verdict(summary(level), 0.9)
    remedy = check(verdict, "coverage").remedy
    assert verdict.status == "inconclusive" and remedy in verdict.actions
    assert remedy.startswith("12.0 % of the test documents' identities are outside the candidate pool")
    assert "exchangeable" in check(release_verdict(summary(entry(coverage=0.85, coverage_low=0.79,
                                                                 coverage_high=0.89)), 0.9), "coverage").remedy


def test_verdict_is_frozen_and_serialisable():
    verdict = release_verdict(summary(entry(n_flagged=3)), 0.9)
    as_dict = json.loads(json.dumps(verdict.to_dict()))
    assert as_dict["status"] == "redact" and as_dict["config_id"] == "cfg123"
    assert as_dict["rule"] == "|C| < 11 or linkage > 0.0909" and as_dict["first_guess_rate"] == 0.03
    assert [c["name"] for c in as_dict["checks"]] == [c.name for c in verdict.checks]
    with pytest.raises(FrozenInstanceError):
        verdict.status = "release"
    with pytest.raises(KeyError):
        release_verdict(summary(), 0.95)


@pytest.mark.parametrize("failed", [False, True])
def test_a_remainder_linked_above_the_acceptable_rate_is_not_releasable(failed):
    """Half the documents named at first guess and few flagged: not releasable, whatever the set sizes and the checks;
    the headline says by how much."""
    low, high = clopper_pearson(100, 200)
    level = entry(first_guess_rate=0.5, first_guess_low=low, first_guess_high=high, n_flagged=20,
                  n_flagged_by_set=1, n_flagged_by_linkage=20, remainder_documents=180, remainder_labelled=180,
                  remainder_first_guess=0.45, remainder_bound=0.52, **(dict(whole_pool_rate=0.6) if failed else {}))
    verdict = release_verdict(summary(level), 0.9)
    assert verdict.status == "unsafe" and verdict.title == "Not releasable as it is"
    assert verdict.headline.startswith("Not releasable as it is: the attacker's first guess is the right person for "
                                       "50.0 % of the 200 labelled documents (95 % CI 42.9–57.1 %).")
    assert "(1 by set size, 20 by linkage probability)" in verdict.headline
    assert ("the 180 left would be linked at up to 52.0 % (97.5 % upper bound (the top of the two-sided 95 % "
            "interval)), 42.9 % above the acceptable linkage rate 9.1 %") in verdict.headline
    assert any(a.startswith("Withhold or redact the 20 flagged documents first") for a in verdict.actions)
    assert any("failed validity check" in a for a in verdict.actions) == failed
    # a declared acceptable rate above the remainder's bound: released after the flagged documents (or inconclusive)
    lenient = replace(summary(level), policy=ReleasePolicy(11, acceptable_linkage=0.6))
    assert release_verdict(lenient, 0.9).status == ("inconclusive" if failed else "redact")


def test_every_document_flagged_says_none_is_releasable_as_it_is():
    verdict = release_verdict(summary(entry(n_flagged=200, remainder_documents=0, remainder_labelled=0,
                                            remainder_bound=None)), 0.9)
    assert verdict.status == "redact" and verdict.headline.startswith(
        "Every one of the 200 held-out test documents is flagged at 90 % confidence")
    assert "none can be released as it is" in verdict.headline
    assert verdict.actions[0].startswith("Withhold the 200 documents")


def test_documents_the_attacker_cannot_tell_apart_are_a_per_document_action_never_a_failed_check():
    verdict = release_verdict(summary(entry(n_uninformative=3)), 0.9)
    assert verdict.status == "release" and not verdict.failed
    assert any(a.startswith("3 documents give the attacker nothing to go on") and "withhold" in a
               for a in verdict.actions)


def test_one_document_is_said_in_the_singular():
    one = release_verdict(summary(entry(n_flagged=1, n_uninformative=1)), 0.9)
    assert one.actions[0].startswith("Redact or withhold the 1 flagged document,")
    assert any(a.startswith("1 document gives the attacker nothing to go on") for a in one.actions)
    low, high = clopper_pearson(100, 200)
    unsafe = release_verdict(summary(entry(first_guess_rate=0.5, first_guess_low=low, first_guess_high=high,
                                           n_flagged=1, n_flagged_by_set=0, n_flagged_by_linkage=1,
                                           remainder_documents=199, remainder_labelled=199,
                                           remainder_first_guess=0.5, remainder_bound=0.56)), 0.9)
    assert "withholding or redacting the 1 flagged held-out test document (" in unsafe.headline
    assert any(a.startswith("Withhold or redact the 1 flagged document first") for a in unsafe.actions)


# --- the LLM attacker's answers ------------------------------------------------------------------------------------

def test_an_llm_attacker_without_valid_answers_fails_a_check():
    """Every request answered by a failed answer (empty, truncated, filtered): the attack was crippled, so however
    healthy the other figures, the certificate understates the risk."""
    crippled = replace(summary(), llm_answers=(LLMAnswers("attacker", 80, 80, 80),))
    verdict = release_verdict(crippled, 0.9)
    assert verdict.status == "inconclusive" and [c.name for c in verdict.failed] == ["LLM answers"]
    reason = check(verdict, "LLM answers").reason
    assert reason.startswith("the LLM attacker gave no valid answer for 80 of 80 requests (100 %, above the 5 % "
                             "allowed; 80 of them failed answers (empty, truncated, filtered or over-long, not cached))")
    assert reason.endswith(": the attack was crippled and the risk is understated")
    assert check(verdict, "LLM answers").remedy in verdict.actions
    assert "--refresh-llm-cache" in check(verdict, "LLM answers").remedy
    assert "1 validity check failed" in verdict.headline and "no evidence of safety" in verdict.headline


@pytest.mark.parametrize("invalid, passed", [(0, True), (4, True), (5, False), (80, False)])
def test_the_allowed_share_of_invalid_answers_is_five_percent(invalid, passed):
    assert LLM_INVALID_ALLOWED == 0.05
    verdict = release_verdict(replace(summary(), llm_answers=(LLMAnswers("attacker", 80, invalid, 0),)), 0.9)
    assert check(verdict, "LLM answers").passed is passed
    assert verdict.status == ("release" if passed else "inconclusive")
    where = "within" if passed else "above"
    assert f"for {invalid} of 80 requests" in check(verdict, "LLM answers").reason
    assert f"{where} the 5 % allowed" in check(verdict, "LLM answers").reason


def test_each_llm_component_is_checked_and_named():
    answers = (LLMAnswers("shortlister.clue_extractor", 40, 12, 12), LLMAnswers("attacker", 200, 3, 1))
    reason = check(release_verdict(replace(summary(), llm_answers=answers), 0.9), "LLM answers").reason
    assert reason.startswith("the shortlister's LLM clue extractor gave no valid answer for 12 of 40 requests (30 %, "
                             "above the 5 % allowed")
    assert "the LLM attacker gave no valid answer for 3 of 200 requests (1.5 %, within the 5 % allowed; 1 of them" \
           in reason


def test_no_llm_no_llm_check():
    assert "LLM answers" not in [c.name for c in release_verdict(summary(), 0.9).checks]
    asked_nothing = replace(summary(), llm_answers=(LLMAnswers("attacker", 0, 0, 0),))
    assert "LLM answers" not in [c.name for c in release_verdict(asked_nothing, 0.9).checks]


def test_the_attack_counters_give_each_component_its_answers():
    counters = {"attacker": {"documents": 40, "samples": 80, "invalid_picks": 9, "requests": 80,
                             "invalid_answers": 9, "failed_answers": 4},
                "shortlister.clue_extractor": {"documents": 40, "requests": 44, "invalid_answers": 2},
                "other": {"calls": 3}, "broken": "not counts"}
    assert llm_answers(counters) == (LLMAnswers("attacker", 80, 9, 4), LLMAnswers("shortlister.clue_extractor", 44, 2))
    assert llm_answers(None) == () and llm_answers({}) == ()


# --- real audits -------------------------------------------------------------------------------------------------

class CountingAttacker(AttackerBase):
    """An attacker that ranks by a given table and reports LLM counters, as the LLM attackers do."""

    name = "counting"

    def __init__(self, table, counts):
        self.table, self.counts = table, counts

    def params(self):
        return {"attacker": self.name}

    def attack(self, doc_ids, texts, registry, level, progress=None):
        assert list(doc_ids) == self.table.doc_ids.tolist()
        return self.table

    def counters(self):
        return self.counts


def test_the_attack_counters_reach_the_verdict_through_the_pipeline():
    """The audit pipeline (run by the command line and the dashboard alike) records the attacker's counters, and
    the verdict of the audit reads them."""
    rng = np.random.default_rng(3)
    probabilities = probability_matrix(120, 20, rng)
    truth = [f"p{t}" for t in sample_truth(probabilities, rng)]
    documents, registry = documents_and_registry(truth, m=20)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker("counting"), confidences=(0.8,))
    counts = {"attacker": {"documents": 120, "samples": 240, "invalid_picks": 240, "requests": 240,
                           "invalid_answers": 240, "failed_answers": 240}}
    result = run_audit(documents, registry, CountingAttacker(table_from_matrix(probabilities), counts), config)
    assert result.inputs["llm_counters"] == counts
    verdict = release_verdict(summarize(result), 0.8)
    assert check(verdict, "LLM answers").passed is False and verdict.status in ("inconclusive", "unsafe")
    assert "the LLM attacker gave no valid answer for 240 of 240 requests (100 %, above the 5 % allowed" in \
        check(verdict, "LLM answers").reason
    document = json.loads(json.dumps(summary_document(result)))
    assert document["llm_answers"] == [{"component": "attacker", "requests": 240, "invalid": 240, "failed": 240,
                                        "invalid_share": 1.0}]
    assert any(c["name"] == "LLM answers" and c["passed"] is False for c in document["verdict"]["checks"])
    # an attacker that calls no LLM records nothing, and its verdict has no such check
    quiet = run_audit(documents, registry, CountingAttacker(table_from_matrix(probabilities), {}), config)
    assert "llm_counters" not in quiet.inputs and "llm_answers" not in summary_document(quiet)



def test_an_attacker_that_knows_nothing_is_never_a_release():
    rng = np.random.default_rng(1)
    probabilities = probability_matrix(800, 10, rng, concentration=0.2)
    truth = [f"p{t}" for t in sample_truth(probabilities, rng)]
    documents, registry = documents_and_registry(truth, m=10)
    table = table_from_matrix(probabilities)
    flat = replace(table, weights=np.full_like(table.weights, 0.1))
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=400, n_test=400, confidences=(0.9,),
                         flag_below=3, protocol="split")
    result = run_audit(documents, registry, None, config, table=flat)
    verdict = release_verdict(summarize(result), 0.9)
    assert verdict.n_flagged == 0 and verdict.status == "inconclusive"
    assert check(verdict, "whole-pool sets").passed is False
    informative = release_verdict(summarize(run_audit(documents, registry, None, config, table=table)), 0.9)
    # ten people, an attacker that often names the right one: the certificate holds, the release is not safe
    assert informative.status == "unsafe" and not informative.failed and informative.first_guess_rate > 0.5


def test_a_check_about_many_groups_counts_them_and_names_a_few():
    groups = {f"g{i}": group(0, float("inf")) for i in range(1000)}
    verdict = release_verdict(summary(entry(q_hat=None, varies="per-group", groups=groups)), 0.9)
    reason = check(verdict, "a threshold per group").reason
    assert reason == "1,000 groups ('g0', 'g1', 'g2', …) have no calibration document, so no threshold"
    assert all(len(c.reason) < 300 and len(c.remedy or "") < 300 for c in verdict.checks)


# --- an attacker panel -------------------------------------------------------------------------------------------

def _panel_member(name: str, probabilities, truth, flag_below: int = 5):
    documents, registry = documents_and_registry([f"p{t}" for t in truth], m=probabilities.shape[1])
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(name), confidences=(0.8, 0.9), flag_below=flag_below)
    return run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))


def _sighted(truth, m: int, rng, lift: float = 4.0):
    """An attacker that sees each document's subject: its logit lifted by ``lift``."""
    logits = rng.normal(size=(len(truth), m))
    logits[np.arange(len(truth)), truth] += lift
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    return probabilities / probabilities.sum(axis=1, keepdims=True)


def test_a_panel_is_no_release_when_one_member_is_fooled_and_another_is_not():
    """What a redaction searched against one attacker leaves: that attacker is nearly fooled (a faint trace of the
    subject), another still names it. The fooled attacker alone passes the release after its few flags, yet the other
    names the right person in what it would release; the panel flags what either flags and passes nothing the other
    links above the acceptable rate."""
    from cpa_core.audit.panel import PanelResult
    from cpa_core.report.verdict import panel_verdict

    rng = np.random.default_rng(7)
    truth = rng.integers(0, 40, 300)
    fooled = _panel_member("fooled", _sighted(truth, 40, rng, lift=1.0), truth)
    sighted = _panel_member("sighted", _sighted(truth, 40, rng, lift=4.0), truth)
    alone = release_verdict(summarize(fooled), 0.9)
    assert alone.status == "redact" and alone.remainder_bound <= alone.acceptable_linkage
    policy = fooled.config.policy
    left_by_fooled = ~fooled.certificate(0.9).flags(policy)
    linked = sighted.first_guess_right[left_by_fooled].mean()
    assert linked > policy.linkage_rate, "the other attacker names the right person in what the fooled one releases"
    panel = PanelResult((fooled, sighted))
    verdict = panel_verdict(panel, 0.9)
    flagged = panel.certificate(0.9).flags(policy)
    assert verdict.status != "release" and verdict.n_flagged == int(flagged.sum()) > alone.n_flagged
    assert np.all(flagged >= sighted.certificate(0.9).flags(policy)) and np.all(flagged >= ~left_by_fooled)
    by_member = {member.attacker: member for member in verdict.members}
    assert by_member["sighted"].n_flagged > by_member["fooled"].n_flagged
    if verdict.status == "redact":
        assert all(member.remainder_bound is None or member.remainder_bound <= policy.linkage_rate
                   for member in verdict.members)
    else:
        assert verdict.status == "unsafe" and verdict.decided_by == "sighted"
    assert "sighted flags" in verdict.headline and verdict.to_dict()["correction"] == "Bonferroni over 2 attackers"


def test_a_panel_of_one_is_the_single_audit_s_verdict():
    from cpa_core.audit.panel import PanelResult
    from cpa_core.report.verdict import panel_verdict

    rng = np.random.default_rng(3)
    probabilities = probability_matrix(200, 20, rng)
    member = _panel_member("only", probabilities, sample_truth(probabilities, rng))
    single, panel = release_verdict(summarize(member), 0.9), panel_verdict(PanelResult((member,)), 0.9)
    assert panel.status == single.status and panel.n_flagged == single.n_flagged
    assert panel.remainder_bound == pytest.approx(single.remainder_bound) and panel.bound_level == 0.975
    assert panel.config_id == member.config.config_id


@pytest.mark.parametrize("members", [2, 4])
def test_the_members_corrected_bounds_hold_together_at_the_stated_rate(members):
    """Simulated remainders, every member's first guess right at its own true rate, independently (the case where
    the members' errors add up): how often any member's true rate is above its corrected bound is at most
    PANEL_ERROR (20,000 releases; 0.025 + 4.5 standard errors fails by chance less than once in 1e5), while
    uncorrected 97.5 % bounds miss together far more often (the correction is what holds)."""
    from scipy.stats import binom

    from cpa_core.report.metrics import remainder_linkage
    from cpa_core.report.verdict import PANEL_ERROR, panel_bound_level

    rng = np.random.default_rng(members)
    rates = np.linspace(0.05, 0.12, members)
    n, trials = 150, 20_000
    labelled, rest = np.ones(n, dtype=bool), np.ones(n, dtype=bool)
    misses = {True: 0, False: 0}
    successes = binom.rvs(n, rates[:, None], size=(members, trials), random_state=rng)
    for corrected in (True, False):
        level = panel_bound_level(members) if corrected else 0.95
        # the bound of each possible count of right first guesses (a release's bound depends on nothing else)
        bounds = [remainder_linkage(labelled, np.arange(n) < right, None, rest, level)["remainder_bound"]
                  for right in range(n + 1)]
        for trial in range(trials):
            for member in range(members):
                if rates[member] > bounds[successes[member, trial]]:
                    misses[corrected] += 1
                    break
    standard_error = np.sqrt(PANEL_ERROR * (1 - PANEL_ERROR) / trials)
    assert misses[True] / trials <= PANEL_ERROR + 4.5 * standard_error
    assert misses[False] / trials > misses[True] / trials
