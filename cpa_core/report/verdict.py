"""The release decision of one audit at one confidence level: what a privacy officer signs.

:func:`release_verdict` reads only the figures of an :class:`~cpa_core.report.metrics.AuditSummary` (it recomputes
nothing) and returns one of four statuses. The attack's success comes first: the declared attacker's first-guess
rate ``r`` with its exact interval, and, after the flagged documents are withheld or redacted, the remainder's
upper bound ``u`` (:data:`~cpa_core.report.help.UPPER_BOUND`: the top of the exact two-sided 95 % interval, a one-sided
97.5 % bound) against the acceptable linkage rate ``a`` (METHOD, "First-guess rate and the verdict"):

- ``unsafe``: the remainder is linked above ``a`` (``u > a``): not releasable as it is, by ``u - a``, whatever the
  set sizes and the checks;
- ``inconclusive``: a validity check failed (or a diagnostic warning was raised), so the certificate may certify
  nothing and "0 flagged" is no evidence of safety;
- ``redact``: some documents are flagged, every check passed and ``u <= a``: release after redacting or withholding
  them;
- ``release``: nothing is flagged, every check passed and ``u <= a``.

Problems of single documents (a pool that ties throughout) are per-document statuses, never a release-wide one.

The validity checks: coverage against its target (a test under the split protocol; a property of the
method under the release protocol, never a validation), the calibration size, a finite threshold, the
share of whole-pool sets, the release policy's ``k`` below the pool size, the share of subjects in the
registry, a threshold for every group, with an LLM attacker its valid answers, and no diagnostic warning
(:mod:`cpa_core.report.diagnostics`).

The LLM answers check (:func:`llm_answers_check`) fails when an LLM component of the attack gave no valid answer
(an invalid pick or sample, or a failed answer: empty, truncated, filtered, over-long) for more than
:data:`LLM_INVALID_ALLOWED` (5 %) of its requests: such an attack is crippled, it links fewer documents than the
declared attacker would, and the certificate understates the risk.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from cpa_core.conformal.calibration import NOTES_NAMED, strata_counted
from cpa_core.report.diagnostics import FEW_IN_REGISTRY, MOSTLY, NEARLY_WHOLE
from cpa_core.report.formatting import counted
from cpa_core.report.help import UPPER_BOUND
from cpa_core.report.metrics import (
    AuditSummary,
    GroupMetrics,
    LevelSummary,
    LLMAnswers,
    remainder_linkage,
    summarize,
)

if TYPE_CHECKING:
    from cpa_core.audit.panel import PanelResult
    from cpa_core.audit.results import AuditResult

STATUSES = ("release", "redact", "inconclusive", "unsafe")
LLM_INVALID_ALLOWED = 0.05
"""The largest share of an LLM component's requests that may give no valid answer (invalid picks or samples and
failed answers together) before the verdict fails its "LLM answers" check."""
COMPONENTS = {"attacker": "the LLM attacker", "clue_extractor": "the LLM clue extractor",
              "shortlister.clue_extractor": "the shortlister's LLM clue extractor"}
"""How the verdict names each LLM component of an attack (its key in the attack's counters)."""
TITLES = {"release": "Release", "redact": "Release after redacting or withholding the flagged documents",
          "inconclusive": "Inconclusive: do not release on this certificate",
          "unsafe": "Not releasable as it is"}


@dataclass(frozen=True)
class Check:
    """One validity check: ``passed`` is ``None`` when the figure is shown but tests nothing."""

    name: str
    passed: bool | None
    reason: str
    remedy: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """The release decision at one confidence level under one release policy."""

    status: str
    title: str
    headline: str
    checks: tuple[Check, ...]
    actions: tuple[str, ...]
    warnings: tuple[str, ...]
    config_id: str
    confidence: float
    rule: str
    n_flagged: int
    n_documents: int
    first_guess_rate: float | None = None
    first_guess_low: float | None = None
    first_guess_high: float | None = None
    acceptable_linkage: float | None = None
    remainder_bound: float | None = None
    n_flagged_by_set: int | None = None
    n_flagged_by_linkage: int | None = None
    n_uninformative: int | None = None

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.passed is False)

    def to_dict(self) -> dict:
        return {"status": self.status, "title": self.title, "headline": self.headline,
                "checks": [check.to_dict() for check in self.checks], "actions": list(self.actions),
                "warnings": list(self.warnings), "config_id": self.config_id, "confidence": self.confidence,
                "rule": self.rule, "n_flagged": self.n_flagged, "n_documents": self.n_documents,
                "first_guess_rate": self.first_guess_rate, "first_guess_low": self.first_guess_low,
                "first_guess_high": self.first_guess_high, "acceptable_linkage": self.acceptable_linkage,
                "remainder_bound": self.remainder_bound, "n_flagged_by_set": self.n_flagged_by_set,
                "n_flagged_by_linkage": self.n_flagged_by_linkage, "n_uninformative": self.n_uninformative}


def _percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def _level(confidence: float) -> str:
    return f"{100 * float(confidence):g} %"


def _names(groups, singular: str = "has", plural: str = "have") -> str:
    """``group 'a' has`` or ``groups 'a', 'b' have``; beyond a few, their count and the first of them (``1,000 groups
    ('g1', 'g2', 'g3', …) have``)."""
    if len(groups) > NOTES_NAMED:
        return f"{strata_counted(list(groups))} {plural}"
    quoted = ", ".join(f"'{g}'" for g in groups)
    return f"group {quoted} {singular}" if len(groups) == 1 else f"groups {quoted} {plural}"


def _coverage(entry: LevelSummary, protocol: str, miss_policy: str) -> Check:
    target = _level(entry.confidence)
    if protocol == "release":
        if entry.coverage is None:
            return Check("coverage", None, "release protocol: no labelled document, so no coverage to show")
        return Check("coverage", None,
                     f"release protocol: {_percent(entry.coverage)} of the labelled documents are covered by "
                     "their leave-one-out set, about ⌈n(1 − α)⌉/n by construction: a property of the method, not a "
                     "validation of it")
    key = "coverage_conditional" if miss_policy == "exclude" else "coverage"
    what = ("coverage of the test documents whose identity is in the pool (the guarantee under 'exclude')"
            if miss_policy == "exclude" else "coverage of the held-out test documents")
    value, low, high = (getattr(entry, key), getattr(entry, f"{key}_low"), getattr(entry, f"{key}_high"))
    if value is None:
        return Check("coverage", False, f"no labelled test document to measure the {what}",
                     "Test on labelled documents (with their true identity) drawn from the release.")
    passed = high >= float(entry.confidence)
    miss = entry.candidate_miss_rate or 0.0
    if key == "coverage" and miss > 1 - float(entry.confidence):  # no set can hold an identity outside the pool
        remedy = (f"{_percent(miss)} of the test documents' identities are outside the candidate pool, more than "
                  "α: use a registry that covers the release or a larger top-K, or certify under "
                  "miss_policy = 'exclude'.")
    else:
        remedy = ("Calibration and audited documents are probably not exchangeable (another release mechanism, "
                  "period, population or attacker): recalibrate on documents drawn from this release.")
    return Check("coverage", passed,
                 f"{what}: {_percent(value)} (95 % CI {100 * low:.1f}–{100 * high:.1f} %) against the target "
                 f"{target}: " + ("consistent with the guarantee" if passed else "below the target beyond sampling "
                                                                               "error"), remedy)


def _calibration_size(entry: LevelSummary, groups: dict[str, GroupMetrics], protocol: str) -> Check:
    needed = entry.n_cal_needed
    small = [g for g, m in groups.items() if 0 < m.n_cal < needed]
    passed = entry.n_cal >= needed and not small
    reason = (f"{entry.n_cal:,} calibration documents; a finite threshold at {_level(entry.confidence)} needs "
              f"at least {needed:,}" + (f" per group, and {_names(small)} fewer" if small else "") +
              (" (each labelled document is calibrated by the others)" if protocol == "release" else ""))
    return Check("calibration size", passed, reason,
                 f"Calibrate on at least {needed:,} labelled documents (per group under per-group calibration) or "
                 "lower the confidence level.")


def _threshold(entry: LevelSummary, groups: dict[str, GroupMetrics]) -> Check:
    infinite = [g for g, m in groups.items() if m.infinite]
    some = entry.infinite_threshold_rate or 0.0
    if entry.infinite:
        reason = "the threshold q̂ is infinite: every set is the whole pool"
    elif infinite:
        reason = f"{_names(infinite)} an infinite threshold q̂: every set of their documents is the whole pool"
    elif some:
        reason = f"the threshold q̂ is infinite for {_percent(some)} of the documents: their sets are the whole pool"
    elif entry.q_hat is not None:
        reason = f"the threshold q̂ = {entry.threshold} is finite"
    else:
        reason = f"the thresholds are finite (one per {'group' if groups else 'left-out document'})"
    return Check("finite threshold", not entry.infinite and not infinite and not some, reason,
                 "Lower the confidence level or calibrate on more documents; when many identities are outside the "
                 "pool, certify with miss_policy = 'exclude', a larger top-K or a registry that covers the release.")


def _whole_pool(entry: LevelSummary) -> Check:
    rate = entry.whole_pool_rate
    if rate is None:
        return Check("whole-pool sets", False, "no audited document", "Audit the documents of the release.")
    return Check("whole-pool sets", rate < MOSTLY,
                 f"{_percent(rate)} of the sets hold at least {_percent(NEARLY_WHOLE)} of their candidate pool (they "
                 f"certify nothing); the limit is {_percent(MOSTLY)}",
                 "Lower the confidence level, calibrate on more documents, or declare a stronger attacker.")


def _pool_size(entry: LevelSummary, flag_below: int) -> Check:
    pool = entry.pool_size
    if pool is None:
        return Check("k below the pool size", False, "no document has a candidate pool",
                     "Check that the attacker ranks the registry's profiles.")
    return Check("k below the pool size", flag_below < pool,
                 f"release policy k = {flag_below} against a candidate pool of {pool:,} for most documents"
                 + ("" if flag_below < pool else ": every set is smaller than k, so the flags say nothing"),
                 "Lower k or widen the pool (a larger top-K).")


def _registry(entry: LevelSummary) -> Check:
    share, miss = entry.share_in_registry, entry.candidate_miss_rate
    rho = "" if miss is None else f"; candidate-miss rate ρ = {_percent(miss)}"
    if share is None:
        return Check("subjects in the registry", None, f"the share of subjects in the registry is not recorded{rho}")
    return Check("subjects in the registry", share >= FEW_IN_REGISTRY,
                 f"{_percent(share)} of the documents' subjects are in the registry (at least "
                 f"{_percent(FEW_IN_REGISTRY)} needed){rho}",
                 "Check that the documents and the registry use the same identity ids, or use a registry that "
                 "covers the release.")


def _group_thresholds(groups: dict[str, GroupMetrics]) -> Check:
    missing = [g for g, m in groups.items() if m.n_cal == 0]
    if not missing:
        return Check("a threshold per group", True,
                     f"each of the {len(groups)} groups is calibrated on its own documents")
    return Check("a threshold per group", False, f"{_names(missing)} no calibration document, so no threshold",
                 f"Add calibration documents of {_names(missing, '', '').strip()} or calibrate without groups.")


def _share(share: float) -> str:
    """A share as a percentage without trailing zeros: ``100 %``, ``5 %``, ``2.5 %``."""
    return f"{100 * share:.1f}".rstrip("0").rstrip(".") + " %"


def llm_answers_check(answers: tuple[LLMAnswers, ...]) -> Check | None:
    """Whether every LLM component gave a valid answer for all but at most :data:`LLM_INVALID_ALLOWED` of its
    requests (``None`` without an LLM component, or when none asked anything)."""
    asked = [a for a in answers if a.requests]
    if not asked:
        return None
    allowed = _share(LLM_INVALID_ALLOWED)
    over = [a for a in asked if a.invalid_share > LLM_INVALID_ALLOWED]
    parts = []
    for a in asked:
        who = COMPONENTS.get(a.component, f"the LLM component '{a.component}'")
        failed = (f"; {a.failed:,} of them failed answers (empty, truncated, filtered or over-long, not cached)"
                  if a.failed else "")
        where = "above" if a in over else "within"
        parts.append(f"{who} gave no valid answer for {a.invalid:,} of {a.requests:,} requests "
                     f"({_share(a.invalid_share)}, {where} the {allowed} allowed{failed})")
    reason = "; ".join(parts)
    if over:
        reason += ": the attack was crippled and the risk is understated"
    return Check("LLM answers", not over, reason,
                 "Check the LLM endpoint and model: the run's log says why answers failed (empty, truncated at "
                 "max_tokens, filtered, over-long). Raise max_tokens when answers are cut, or use a model that "
                 "answers as the prompt asks; then audit again: failed answers are not cached, so they are asked "
                 "again (--refresh-llm-cache asks every request again).")


def _diagnostics(warnings: list[str]) -> Check:
    n = len(warnings)
    return Check("no diagnostic warning", not warnings,
                 "no warning at this confidence level" if not n else
                 f"{n} warning{'s' if n > 1 else ''} at this confidence level (listed with the verdict)",
                 "Follow each warning's advice.")


def release_verdict(summary: AuditSummary, confidence) -> Verdict:
    """The release decision at ``confidence`` (a level of ``summary``) under the summary's release policy.

    Raises ``KeyError`` when the summary has no entry at ``confidence``.
    """
    entry = summary.level(confidence)
    groups = entry.groups or {}
    warnings = list(entry.warnings)
    policy = summary.policy
    checks = [_coverage(entry, summary.protocol, summary.miss_policy), _calibration_size(entry, groups, summary.protocol),
              _threshold(entry, groups), _whole_pool(entry), _pool_size(entry, policy.flag_below), _registry(entry)]
    if groups:
        checks.append(_group_thresholds(groups))
    llm = llm_answers_check(summary.llm_answers)
    if llm is not None:
        checks.append(llm)
    checks.append(_diagnostics(warnings))
    failed = [check for check in checks if check.passed is False]

    n, n_flagged = entry.n_test, entry.n_flagged
    n_empty = round((entry.empty_rate or 0) * n)
    split = summary.protocol == "split"
    documents = "held-out test documents" if split else "documents"
    level, rule = _level(entry.confidence), policy.rule
    rate, bound = policy.linkage_rate, entry.remainder_bound
    attack = attack_sentence(entry)
    first = attack[0].upper() + attack[1:]  # the attack as a sentence of its own
    by_rule = flag_counts(entry)
    if bound is not None and bound > rate:
        status = "unsafe"
        kept = entry.remainder_documents or 0
        headline = (f"Not releasable as it is: {attack}. Even after withholding or redacting the {n_flagged:,} "
                    f"flagged {documents if n_flagged != 1 else documents[:-1]}{by_rule}, the {kept:,} left would be linked at up to {_percent(bound)} "
                    f"({UPPER_BOUND}), {_percent(bound - rate)} above the acceptable linkage rate "
                    f"{_percent(rate)}.")
        actions = ["Do not release this collection as it is: the declared attacker names the right person too "
                   "often, whatever the certified set sizes."]
        if n_flagged:
            actions.append(f"Withhold or redact the {counted(n_flagged, 'flagged document')} first (the redaction worklist, "
                           "highest linkage probability and smallest set first).")
        actions.append("Then reduce what links the rest: generalise or remove the attributes the attacker matches "
                       "(the driving terms of the worklist), release fewer documents, or release to a controlled "
                       "environment; audit the changed release again.")
        if failed:
            actions.append(f"Also resolve the {len(failed)} failed validity check{'s' if len(failed) > 1 else ''} "
                           "before relying on the set sizes.")
            actions += list(dict.fromkeys(check.remedy for check in failed if check.remedy))
    elif failed:
        status = "inconclusive"
        headline = (f"Inconclusive: {n_flagged:,} of {n:,} {documents} flagged at {level} confidence ({rule}), but "
                    f"{len(failed)} validity check{'s' if len(failed) > 1 else ''} failed, so this count is no "
                    f"evidence of safety. {first}.")
        actions = ["Do not release on the strength of this certificate: treat every document as unaudited until "
                   "the failed checks are resolved."]
        actions += list(dict.fromkeys(check.remedy for check in failed if check.remedy))
        if n_flagged:
            actions.append(f"Meanwhile, do not release the {counted(n_flagged, 'flagged document')}.")
        actions.append("Re-run the audit and sign off on a report whose checks all pass.")
    elif n_flagged and n_flagged == n:
        status = "redact"
        headline = (f"Every one of the {n:,} {documents} is flagged at {level} confidence ({rule}){by_rule}: none can be "
                    f"released as it is. {first}.")
        actions = [f"Withhold the {counted(n, 'document')}, or redact every one of them and audit the redacted release again."]
    elif n_flagged:
        status = "redact"
        headline = (f"{n_flagged:,} of {n:,} {documents} flagged at {level} confidence ({rule}){by_rule}: redact or "
                    f"withhold them before release. {first}; "
                    + ("nothing is left to release." if bound is None else
                       f"the rest is linked at up to {_percent(bound)}, within the acceptable {_percent(rate)}."))
        actions = [f"Redact or withhold the {counted(n_flagged, 'flagged document')}, highest linkage probability and smallest "
                   "set first (the redaction worklist; its driving terms are where to start)."]
        if n_empty:
            actions.append(f"{n_empty:,} of them have an empty set (|C| = 0): the attacker is more certain about "
                           "them than the threshold needs. Withhold them or redact them first.")
        actions.append("Audit the redacted documents again before releasing them: a new redaction is a new release "
                       "mechanism and needs its own calibration.")
        actions.append(f"The other {n - n_flagged:,} {documents} are not flagged under this configuration.")
    else:
        status = "release"
        headline = (f"No document flagged: none of the {n:,} {documents} has a certified set below {policy.flag_below} "
                    f"or a linkage probability above {_percent(rate)} at {level} confidence. {first}"
                    + (f"; at most {_percent(bound)} ({UPPER_BOUND})" if bound is not None else "") + ".")
        actions = [f"The {n:,} {documents} may be released under this configuration."]
    if entry.n_uninformative:
        actions.append(f"{counted(entry.n_uninformative, 'document')} give"
                       f"{'s' if entry.n_uninformative == 1 else ''} the attacker nothing to go on (every candidate "
                       "ties): nothing links them under this attacker. Check them by hand (an image, code, another "
                       "language the attacker cannot read) or withhold them.")
    if status in ("release", "redact"):
        if split:
            actions.append("Only the held-out test documents were certified (split protocol): certify every "
                           "document with the release protocol before releasing the whole collection.")
        actions.append("Keep this report, the manifest and the data checksums with the release.")
        actions.append("Audit again when the attacker's knowledge, the registry, the release mechanism or the "
                       f"documents change: this certificate holds only for configuration {summary.config_id}.")
    return Verdict(status, TITLES[status], headline, tuple(checks), tuple(actions), tuple(warnings),
                   summary.config_id, float(entry.confidence), rule, n_flagged, n, entry.first_guess_rate,
                   entry.first_guess_low, entry.first_guess_high, rate, bound, entry.n_flagged_by_set,
                   entry.n_flagged_by_linkage, entry.n_uninformative)


def attack_sentence(entry: LevelSummary) -> str:
    """The declared attacker's success in words: its first-guess rate with the exact interval."""
    if entry.first_guess_rate is None:
        return "the attacker's first-guess rate is unknown (no labelled document)"
    return (f"the attacker's first guess is the right person for {_percent(entry.first_guess_rate)} of the "
            f"{entry.n_labelled:,} labelled documents (95 % CI {100 * entry.first_guess_low:.1f}–"
            f"{100 * entry.first_guess_high:.1f} %)")


def flag_counts(entry: LevelSummary) -> str:
    """`` (a by set size, b by linkage probability)`` when both rules flag, else what flagged them."""
    by_set, by_linkage = entry.n_flagged_by_set or 0, entry.n_flagged_by_linkage or 0
    if not entry.n_flagged:
        return ""
    if by_set and by_linkage:
        return f" ({by_set:,} by set size, {by_linkage:,} by linkage probability)"
    return " (by set size)" if by_set else " (by linkage probability)"


def summary_document(result: AuditResult) -> dict:
    """``summary.json``: every figure of the audit, and the release verdict at the level that flags; an audit of a
    redacted release says what it was redacted from (``redaction``: the audit and configuration, the decisions), a
    member of an attacker panel which panel (``panel``: its id, its attackers, this member's)."""
    summary = summarize(result)
    out = {**summary.to_dict(), "verdict": release_verdict(summary, result.config.policy_confidence).to_dict()}
    for part in ("redaction", "panel"):  # what it was redacted from; the attacker panel it is a member of
        if result.inputs.get(part):
            out[part] = result.inputs[part]
    return out


PANEL_ERROR = 0.025
"""The chance that any member of a panel links what the panel leaves above its reported bound: each member's bound is
one-sided at ``1 - PANEL_ERROR / members`` (Bonferroni over the members, :func:`panel_bound_level`), so that the
members' bounds hold together, and with one member it is the single audit's 97.5 % bound. The verdict releases only
when every member's bound is within the acceptable rate, so it releases a remainder some member links above that
rate with a chance of at most ``PANEL_ERROR / members`` (``docs/guarantee.md``)."""


def panel_bound_level(members: int) -> float:
    """The two-sided level of each member's Clopper-Pearson interval in a panel of ``members``: its top is the
    one-sided ``1 - PANEL_ERROR / members`` bound (0.95 for one member: the single audit's)."""
    return 1 - 2 * PANEL_ERROR / members


@dataclass(frozen=True)
class MemberVerdict:
    """One member of an attacker panel: its own verdict (its flags and validity checks), the documents it flags, and
    its first-guess rate on what the whole panel leaves, with the corrected bound the panel's verdict reads."""

    attacker: str
    own: Verdict
    n_flagged: int
    remainder_first_guess: float | None
    remainder_first_guess_low: float | None
    remainder_first_guess_high: float | None
    remainder_bound: float | None

    def to_dict(self) -> dict:
        return {"attacker": self.attacker, "n_flagged": self.n_flagged,
                "remainder_first_guess": self.remainder_first_guess,
                "remainder_first_guess_low": self.remainder_first_guess_low,
                "remainder_first_guess_high": self.remainder_first_guess_high,
                "remainder_bound": self.remainder_bound, "verdict": self.own.to_dict()}


@dataclass(frozen=True)
class PanelVerdict:
    """The release decision over an attacker panel at one confidence level: a document is flagged when any member
    flags it, and the rest is released only when every member's corrected bound (``bound_level``, one-sided) is within
    the acceptable rate and every member's checks pass. ``decided_by`` names the member that decided: the one whose
    bound is highest (or, inconclusive, the first whose checks failed)."""

    status: str
    title: str
    headline: str
    members: tuple[MemberVerdict, ...]
    decided_by: str
    bound_level: float
    config_id: str
    confidence: float
    rule: str
    n_flagged: int
    n_documents: int
    acceptable_linkage: float
    remainder_documents: int
    remainder_bound: float | None
    actions: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"status": self.status, "title": self.title, "headline": self.headline,
                "members": [member.to_dict() for member in self.members], "decided_by": self.decided_by,
                "bound_level": self.bound_level, "correction": f"Bonferroni over {len(self.members)} attackers",
                "config_id": self.config_id, "confidence": self.confidence, "rule": self.rule,
                "n_flagged": self.n_flagged, "n_documents": self.n_documents,
                "acceptable_linkage": self.acceptable_linkage, "remainder_documents": self.remainder_documents,
                "remainder_bound": self.remainder_bound, "actions": list(self.actions)}


def panel_verdict(panel: PanelResult, confidence) -> PanelVerdict:
    """The release decision over ``panel`` at ``confidence`` under the members' declared release policy."""
    config = panel.config
    policy = config.policy
    certificate = panel.certificate(confidence)
    flagged = certificate.flags(policy)
    rest = ~flagged
    count = len(panel.members)
    level = panel_bound_level(count)
    members = []
    for name, result, cert in zip(panel.names, panel.members, certificate.members):
        own = release_verdict(summarize(result, [confidence]), confidence)
        split = cert.split
        remainder = remainder_linkage(split.labelled, split.labelled & (split.truth_ranks == 1), cert.linkage, rest,
                                      level)
        members.append(MemberVerdict(name, own, int(cert.flags(policy).sum()), remainder["remainder_first_guess"],
                                     remainder["remainder_first_guess_low"], remainder["remainder_first_guess_high"],
                                     remainder["remainder_bound"]))
    rate, n, n_flagged = policy.linkage_rate, len(flagged), int(flagged.sum())
    kept = n - n_flagged
    bounds = [member.remainder_bound for member in members]
    known = [i for i, bound in enumerate(bounds) if bound is not None]
    highest = max(known, key=lambda i: bounds[i]) if known else 0
    bound = bounds[highest] if known else None
    failing = [member for member in members if member.own.failed]
    bound_text = f"{100 * (1 - PANEL_ERROR / count):.4g} % upper bound, corrected for {count} attackers"
    who = f"{count} attacker{'s' if count > 1 else ''} ({', '.join(panel.names)})"
    by_member = "; ".join(f"{member.attacker} flags {member.n_flagged:,}" for member in members)
    decided_by = members[highest].attacker
    level_text = _level(float(certificate.members[0].confidence))
    if bound is not None and bound > rate:
        status = "unsafe"
        headline = (f"Not releasable as it is: even after withholding or redacting the {n_flagged:,} documents any of "
                    f"the {who} flags ({by_member}), the {kept:,} left would be linked at up to {_percent(bound)} by "
                    f"{decided_by} ({bound_text}), {_percent(bound - rate)} above the acceptable linkage rate "
                    f"{_percent(rate)}.")
        actions = [f"Do not release this collection as it is: {decided_by} names the right person too often in what "
                   "the panel would release.", "Reduce what links the rest (the driving terms of each attacker), "
                   "release fewer documents, or release to a controlled environment; audit the changed release again."]
    elif failing:
        status = "inconclusive"
        decided_by = failing[0].attacker
        headline = (f"Inconclusive: {len(failing)} of the {who} failed a validity check ({decided_by} first: "
                    f"{failing[0].own.failed[0].name}), so no release can rest on the panel. {n_flagged:,} of {n:,} "
                    f"documents are flagged at {level_text} confidence ({policy.rule}) by at least one attacker.")
        actions = ["Resolve the failed checks of each attacker (its own report) and audit again."]
    elif n_flagged:
        status = "redact"
        headline = (f"{n_flagged:,} of {n:,} documents flagged at {level_text} confidence ({policy.rule}) by at least "
                    f"one of the {who} ({by_member}): redact or withhold them before release; "
                    + ("nothing is left to release." if bound is None else
                       f"the rest is linked at up to {_percent(bound)} ({decided_by}, {bound_text}), within the "
                       f"acceptable {_percent(rate)} for every attacker."))
        actions = [f"Redact or withhold the {counted(n_flagged, 'flagged document')}, then audit the redacted release "
                   "again with the whole panel."]
    else:
        status = "release"
        headline = (f"No document flagged by any of the {who} at {level_text} confidence; the release is linked at up "
                    f"to {_percent(bound) if bound is not None else 'an unknown rate'} ({decided_by}, {bound_text}).")
        actions = [f"The {n:,} documents may be released under this panel's configuration."]
    return PanelVerdict(status, TITLES[status], headline, tuple(members), decided_by, 1 - PANEL_ERROR / count,
                        panel.config_id, float(certificate.members[0].confidence), policy.rule, n_flagged, n, rate,
                        kept, bound, tuple(actions))
