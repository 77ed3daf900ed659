"""Metrics of an audit, per confidence level and per group, and the one summary every surface renders.

Ranking metrics (no guarantee) use the tie-pessimistic rank of the truth; a truth outside the pool
has reciprocal rank 0 and is left out of the mean rank. Conformal metrics are computed on the test
split only. :func:`summarize` computes every figure the CLI (``summary.json``), the dashboard's tables
and the HTML report show, so a figure can never differ between them.

The LLM attacker's answers (:class:`LLMAnswers`) come from the counters the attack recorded in the result's inputs
(``llm_counters``, :data:`~cpa_core.attack.base.LLM_COUNTS`): per LLM component, the requests of the attack and
those that gave it no valid answer; the verdict fails its "LLM answers" check when too many did.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.conformal.calibration import alpha_from_confidence, confidence_label, minimum_calibration_size
from cpa_core.report.diagnostics import certificate_warnings, whole_pool

if TYPE_CHECKING:
    from cpa_core.audit.results import AuditResult, Certificate

TOP_KS = (1, 5, 10)
COVERAGE_MEANING = {
    "release": "share of the labelled documents whose leave-one-out set holds their identity: about "
               "ceil(n(1 - alpha))/n by construction, a property of the method, not a validation",
    "split": "share of the held-out test documents whose set holds their identity: an empirical check of the "
             "guarantee",
}
OVERALL = "all"  # the group key of the whole test split in tables


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def threshold_text(q_hat: float) -> str:
    """A threshold as the surfaces show it: the number, or ``infinite`` (every set is the whole pool)."""
    return f"{q_hat:.6g}" if math.isfinite(q_hat) else "infinite"


def clopper_pearson(successes: int, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """The exact (Clopper–Pearson) two-sided ``level`` confidence interval of a binomial proportion
    ``successes / n``; ``None`` when ``n = 0``. Each end is a one-sided bound at ``(1 + level) / 2``: at 95 % the upper
    end is ``beta.ppf(0.975, successes + 1, n - successes)``, a 97.5 % upper bound (what the verdict reads)."""
    if n == 0:
        return None
    from scipy.special import betaincinv  # the beta quantile (scipy.stats.beta.ppf), without scipy.stats' import

    tail = (1 - level) / 2
    low = 0.0 if successes == 0 else float(betaincinv(successes, n - successes + 1, tail))
    high = 1.0 if successes == n else float(betaincinv(successes + 1, n - successes, 1 - tail))
    return low, high


def ranking_metrics(truth_ranks: np.ndarray) -> dict:
    """Top-k accuracy, MRR and mean rank of the truth (ranks: 1 = top, 0 = outside the pool)."""
    n = truth_ranks.shape[0]
    hit = truth_ranks > 0
    out = {f"top{k}": float(np.mean(hit & (truth_ranks <= k))) if n else None for k in TOP_KS}
    out["mrr"] = float(np.mean(np.where(hit, 1.0 / np.maximum(truth_ranks, 1), 0.0))) if n else None
    out["mean_rank"] = float(np.mean(truth_ranks[hit])) if hit.any() else None
    return out


@dataclass(frozen=True)
class Metrics:
    """The figures of some documents at one confidence level (:func:`certificate_metrics`).

    ``coverage_low``/``coverage_high`` bound the coverage with a 95 % Clopper–Pearson interval over the labelled
    documents, ``coverage_conditional_low``/``_high`` the conditional coverage over those whose identity is in the
    pool; ``pool_size`` is the median size of the non-empty candidate pools. ``q_hat`` is the threshold on the
    METHOD's scale when one threshold serves every document (``inf``: infinite, every set is the whole pool), and
    ``None`` when it varies (``varies`` then says how: per group, or per document under the release protocol).
    ``n_flagged`` and ``flagged_share`` are ``None`` without a release policy. Field order is ``summary.json``'s.

    The attack's success: ``first_guess_rate`` is the share of labelled documents whose subject is the attacker's
    unique top candidate, with its exact 95 % interval ``first_guess_low``/``_high``; ``top_k_rate`` (and interval)
    the share whose subject is among its top ``k`` (the policy's ``k``). ``n_flagged_by_set`` and
    ``n_flagged_by_linkage`` count the flags of each rule (a document may carry both); ``n_uninformative`` the
    documents whose pool ties throughout; ``mean_linkage`` the mean linkage probability. The **remainder** is what
    is left after the flagged documents: ``remainder_documents`` of them, ``remainder_labelled`` labelled, whose
    first-guess rate is ``remainder_first_guess`` (interval ``_low``/``_high``); ``remainder_bound`` is the upper
    bound the verdict reads: the labelled remainder's exact 97.5 % upper bound (the top of its two-sided 95 % interval,
    ``remainder_first_guess_high``), weighted with the mean linkage probability of the unlabelled remainder.
    """

    confidence: float
    n_test: int
    n_labelled: int
    coverage: float | None
    coverage_conditional: float | None
    coverage_low: float | None
    coverage_high: float | None
    coverage_conditional_low: float | None
    coverage_conditional_high: float | None
    candidate_miss_rate: float | None
    open_world_bound: float | None
    median_set_size: float | None
    mean_set_size: float | None
    min_set_size: int | None
    max_set_size: int | None
    p10_set_size: float | None
    p90_set_size: float | None
    mean_leakage: float | None
    empty_rate: float | None
    pool_size: int | None
    q_hat: float | None
    varies: str | None
    infinite_threshold_rate: float | None
    top1: float | None
    top5: float | None
    top10: float | None
    mrr: float | None
    mean_rank: float | None
    n_flagged: int | None = None
    flagged_share: float | None = None
    first_guess_rate: float | None = None
    first_guess_low: float | None = None
    first_guess_high: float | None = None
    top_k: int | None = None
    top_k_rate: float | None = None
    top_k_low: float | None = None
    top_k_high: float | None = None
    n_flagged_by_set: int | None = None
    n_flagged_by_linkage: int | None = None
    n_uninformative: int | None = None
    mean_linkage: float | None = None
    remainder_documents: int | None = None
    remainder_labelled: int | None = None
    remainder_first_guess: float | None = None
    remainder_first_guess_low: float | None = None
    remainder_first_guess_high: float | None = None
    remainder_bound: float | None = None

    @property
    def infinite(self) -> bool:
        """One threshold serves every document and it is infinite: every set is the whole pool."""
        return self.q_hat is not None and math.isinf(self.q_hat)

    @property
    def threshold(self) -> str:
        """The threshold as the surfaces show it: the number, ``infinite``, or how it varies."""
        return threshold_text(self.q_hat) if self.q_hat is not None else self.varies

    def to_dict(self) -> dict:
        """The entry of ``summary.json`` (a threshold that is not finite is ``null`` beside its text)."""
        out = {}
        for name in _METRIC_FIELDS:
            if name == "q_hat":
                out["q_hat"], out["threshold"] = _finite(self.q_hat), self.threshold
            elif name in POLICY_FIELDS and self.n_flagged is None:
                continue
            elif name != "varies":
                out[name] = getattr(self, name)
        return out


_METRIC_FIELDS = tuple(f.name for f in fields(Metrics))
POLICY_FIELDS = _METRIC_FIELDS[_METRIC_FIELDS.index("n_flagged"):]
"""The figures that need a release policy (absent from a certificate's figures without one)."""


def rate_with_interval(successes: int, n: int) -> tuple[float | None, float | None, float | None]:
    """``successes / n`` with its exact 95 % interval (``None`` throughout when ``n = 0``)."""
    interval = clopper_pearson(successes, n)
    if interval is None:
        return None, None, None
    return successes / n, interval[0], interval[1]


def first_guess_figures(result) -> dict:
    """An audit's first-guess rate over its labelled audited documents (the subject is the attacker's unique first
    guess), with its exact 95 % interval and the number of documents it is over (``first_guess``, ``low``, ``high``,
    ``n``)."""
    labelled = result.test_split.labelled
    rate, low, high = rate_with_interval(int(result.first_guess_right.sum()), int(labelled.sum()))
    return {"first_guess": rate, "low": low, "high": high, "n": int(labelled.sum())}


def remainder_linkage(labelled: np.ndarray, first_right: np.ndarray, linkage: np.ndarray | None, rest: np.ndarray,
                      level: float = 0.95) -> dict:
    """What is left after the flagged documents (``rest``), as the verdict reads it: its documents, its labelled ones
    and their first-guess rate with its exact two-sided ``level`` interval, and ``remainder_bound``: the interval's top
    (a one-sided ``(1 + level) / 2`` upper bound) weighted with the mean linkage probability of the unlabelled rest.

    ``labelled``, ``first_right`` (the subject is the attacker's unique first guess), ``linkage`` and ``rest`` are
    per document (``linkage`` may be ``None``: no unlabelled document then contributes)."""
    rest_labelled = rest & labelled
    successes, n = int((first_right & rest_labelled).sum()), int(rest_labelled.sum())
    interval = clopper_pearson(successes, n, level)
    rate, low, high = (None, None, None) if interval is None else (successes / n, *interval)
    unlabelled_rest = rest & ~labelled
    n_l, n_u = int(rest_labelled.sum()), int(unlabelled_rest.sum())
    if n_l + n_u == 0:
        bound = None
    elif linkage is None or n_u == 0:
        bound = high
    else:  # the unlabelled remainder contributes its mean linkage probability
        bound = ((high or 0.0) * n_l + float(linkage[unlabelled_rest].sum())) / (n_l + n_u)
    return {"remainder_documents": int(rest.sum()), "remainder_labelled": n_l, "remainder_first_guess": rate,
            "remainder_first_guess_low": low, "remainder_first_guess_high": high, "remainder_bound": bound}


def attack_metrics(cert: Certificate, mask: np.ndarray, policy: ReleasePolicy) -> dict:
    """The attack's success and what is left after the flagged documents, for the documents of ``mask``."""
    split = cert.split
    labelled = split.labelled[mask]
    ranks = split.truth_ranks[mask][labelled]
    first = (ranks == 1)
    k = policy.flag_below
    in_top = (ranks >= 1) & (ranks <= k)
    linkage = None if cert.linkage is None else cert.linkage[mask]
    by_set = policy.flags_by_set(cert.set_sizes[mask])  # the rules on the selected documents only
    by_linkage = policy.flags_by_linkage(linkage, by_set.shape[0])
    rest = ~(by_set | by_linkage)
    remainder = remainder_linkage(split.labelled[mask], split.truth_ranks[mask] == 1, linkage, rest)
    first_rate, first_low, first_high = rate_with_interval(int(first.sum()), int(labelled.sum()))
    k_rate, k_low, k_high = rate_with_interval(int(in_top.sum()), int(labelled.sum()))
    return {
        "first_guess_rate": first_rate, "first_guess_low": first_low, "first_guess_high": first_high,
        "top_k": k, "top_k_rate": k_rate, "top_k_low": k_low, "top_k_high": k_high,
        "n_flagged_by_set": int(by_set.sum()),
        "n_flagged_by_linkage": int(by_linkage.sum()),
        "n_uninformative": int(split.uninformative[mask].sum()),
        "mean_linkage": float(linkage.mean()) if linkage is not None and linkage.size else None,
        **remainder,
    }


@dataclass(frozen=True)
class GroupMetrics(Metrics):
    """A group's figures at one level, with its calibration size ``n_cal`` and, as ``q_hat``, the group's threshold
    (its own under per-group calibration, else the pooled one)."""

    n_cal: int = 0

    def to_dict(self) -> dict:
        return {**super().to_dict(), "n_cal": self.n_cal}


@dataclass(frozen=True)
class LevelSummary(Metrics):
    """The figures of one confidence level: the audited documents' :class:`Metrics`, with ``alpha``, the
    calibration size ``n_cal``, the size that level needs for a finite threshold ``n_cal_needed``, the share of
    (nearly) whole-pool sets ``whole_pool_rate``, the share of the documents' subjects found in the registry
    ``share_in_registry`` (``None`` when unknown), every reason the certificate certifies nothing as ``warnings``
    (:mod:`cpa_core.report.diagnostics`), with groups, each group's :class:`GroupMetrics`, and with certainty strata
    each stratum's threshold over all its calibration documents (``strata_thresholds``, the METHOD's scale)."""

    alpha: float = 0.0
    n_cal: int = 0
    n_cal_needed: int = 0
    whole_pool_rate: float | None = None
    share_in_registry: float | None = None
    warnings: tuple[str, ...] = ()
    groups: dict[str, GroupMetrics] | None = None
    strata_thresholds: dict[str, float] | None = None

    def to_dict(self) -> dict:
        out = {**super().to_dict(), "alpha": self.alpha, "n_cal": self.n_cal, "n_cal_needed": self.n_cal_needed,
               "whole_pool_rate": self.whole_pool_rate, "share_in_registry": self.share_in_registry,
               "warnings": list(self.warnings)}
        if self.strata_thresholds is not None:
            out["strata_thresholds"] = {label: _finite(q) for label, q in self.strata_thresholds.items()}
        if self.groups is not None:
            out["groups"] = {group: metrics.to_dict() for group, metrics in self.groups.items()}
        return out


def _metrics_of(cert: Certificate, mask: np.ndarray | None, policy: ReleasePolicy | None) -> dict:
    """The fields of :class:`Metrics` for the documents selected by ``mask``."""
    split = cert.split
    mask = np.ones(len(split), dtype=bool) if mask is None else mask
    sizes = cert.set_sizes[mask]
    labelled = split.labelled[mask]  # coverage, misses and ranks need the true identity
    covered, in_pool = cert.covered[mask][labelled], split.in_pool[mask][labelled]
    n, n_labelled = int(mask.sum()), int(labelled.sum())
    alpha = 1 - float(cert.confidence)
    miss = float(np.mean(~in_pool)) if n_labelled else None
    q = cert.q_hat[mask]
    one_threshold = q.shape[0] > 0 and bool(np.all(q == q[0]))
    interval = clopper_pearson(int(covered.sum()), n_labelled) or (None, None)
    interval_in_pool = clopper_pearson(int(covered[in_pool].sum()), int(in_pool.sum())) or (None, None)
    pools = split.table.pool_sizes[mask]
    pools = pools[pools > 0]
    out = {
        "confidence": float(cert.confidence),
        "n_test": n,
        "n_labelled": n_labelled,
        "coverage": float(np.mean(covered)) if n_labelled else None,
        "coverage_conditional": float(np.mean(covered[in_pool])) if in_pool.any() else None,
        "coverage_low": interval[0],
        "coverage_high": interval[1],
        "coverage_conditional_low": interval_in_pool[0],
        "coverage_conditional_high": interval_in_pool[1],
        "candidate_miss_rate": miss,
        "open_world_bound": (1 - miss) * (1 - alpha) if n_labelled else None,
        "median_set_size": float(np.median(sizes)) if n else None,
        "mean_set_size": float(np.mean(sizes)) if n else None,
        "min_set_size": int(sizes.min()) if n else None,
        "max_set_size": int(sizes.max()) if n else None,
        "p10_set_size": float(np.percentile(sizes, 10)) if n else None,
        "p90_set_size": float(np.percentile(sizes, 90)) if n else None,
        "mean_leakage": float(np.mean(1.0 / np.maximum(1, sizes))) if n else None,
        "empty_rate": float(np.mean(sizes == 0)) if n else None,
        "pool_size": int(np.median(pools)) if pools.size else None,
        "q_hat": float(split.score.to_method(q[0])) if one_threshold else None,
        "varies": None if one_threshold else "per-stratum" if cert.left_out is None else "per document (leave-one-out)",
        "infinite_threshold_rate": float(np.mean(np.isinf(q))) if n else None,
        **ranking_metrics(split.truth_ranks[mask][labelled]),
    }
    if policy is not None:
        flagged = policy.flags(sizes, None if cert.linkage is None else cert.linkage[mask])
        out["n_flagged"] = int(flagged.sum())
        out["flagged_share"] = float(flagged.mean()) if n else 0.0
        out.update(attack_metrics(cert, mask, policy))
    return out


def certificate_metrics(cert: Certificate, mask: np.ndarray | None = None,
                        policy: ReleasePolicy | None = None) -> Metrics:
    """Coverage, set sizes, leakage and miss rate of the documents selected by ``mask`` (default: all); with a
    release ``policy``, also the flags (:class:`Metrics`)."""
    return Metrics(**_metrics_of(cert, mask, policy))


@dataclass(frozen=True)
class LLMAnswers:
    """One LLM component of the attack (``attacker``, ``clue_extractor``, ``shortlister.clue_extractor``): the
    ``requests`` it asked in the audit's attack, the ``invalid`` ones that gave it no valid answer (a pick naming no
    option, a value naming none, a failed answer), and of those the ``failed`` ones (empty, truncated, filtered or
    over-long: never cached; ``None`` when not counted)."""

    component: str
    requests: int
    invalid: int
    failed: int | None = None

    @property
    def invalid_share(self) -> float | None:
        return self.invalid / self.requests if self.requests else None

    def to_dict(self) -> dict:
        return {"component": self.component, "requests": self.requests, "invalid": self.invalid,
                "failed": self.failed, "invalid_share": self.invalid_share}


def _count(value) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def llm_answers(counters: Mapping | None) -> tuple[LLMAnswers, ...]:
    """The :class:`LLMAnswers` of every LLM component in an attack's counters (``inputs["llm_counters"]``): those
    reporting ``requests`` and ``invalid_answers``; none for an attacker that calls no LLM."""
    out = []
    for component, counts in (counters or {}).items():
        if not isinstance(counts, Mapping):
            continue
        requests, invalid = _count(counts.get("requests")), _count(counts.get("invalid_answers"))
        if requests is None or invalid is None:
            continue
        out.append(LLMAnswers(str(component), requests, min(invalid, requests), _count(counts.get("failed_answers"))))
    return tuple(out)


@dataclass(frozen=True)
class AuditSummary:
    """The figures of one audit at some confidence levels under one release policy: ``levels`` maps a confidence
    label to its :class:`LevelSummary`. Thresholds are on the METHOD's scale (an APS mass, a rank, ...).
    ``llm_answers``: the LLM components' requests and invalid answers (none without an LLM attacker)."""

    config_id: str
    score: str
    knowledge: str
    attacker: str
    miss_policy: str
    policy: ReleasePolicy
    levels: dict[str, LevelSummary]
    protocol: str = "release"
    strata: tuple[dict, ...] = ()
    llm_answers: tuple[LLMAnswers, ...] = ()

    @property
    def stratification(self) -> str:
        """How the documents were stratified for calibration, in words."""
        if not self.strata:
            return "one stratum: every document calibrated against every other"
        certainty = [s for s in self.strata if "certainty" in s["label"]]
        grouped = any(s["group"] is not None for s in self.strata)
        what = ("groups crossed with bins of the attacker's certainty (its top-1 margin)" if grouped and certainty
                else "bins of the attacker's certainty (its top-1 margin)" if certainty else "the declared groups")
        return (f"{len(self.strata)} strata, {what}; each calibrated on its own labelled documents: "
                + "; ".join(f"{s['label']}: margin {s['margin_low']:.3g}–{s['margin_high']:.3g}, {s['documents']:,} "
                            f"documents, {s['calibrating']:,} calibrating" for s in self.strata))

    def level(self, confidence) -> LevelSummary:
        return self.levels[confidence_label(confidence)]

    def to_dict(self) -> dict:
        """``summary.json`` (``llm_answers`` only with an LLM attacker)."""
        out = {"config_id": self.config_id, "protocol": self.protocol,
               "coverage_meaning": COVERAGE_MEANING[self.protocol], "score": self.score, "knowledge": self.knowledge, "attacker": self.attacker,
               "miss_policy": self.miss_policy, "policy": self.policy.to_dict(),
               "stratification": self.stratification, "strata": [dict(s) for s in self.strata],
               "confidence": {label: entry.to_dict() for label, entry in self.levels.items()}}
        if self.llm_answers:
            out["llm_answers"] = [answers.to_dict() for answers in self.llm_answers]
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per (confidence, group); group ``all`` for the whole test split."""
        rows = []
        for entry in self.levels.values():
            figures = entry.to_dict()
            rows.append({"confidence": entry.confidence, "group": OVERALL,
                         **{k: v for k, v in figures.items() if k not in ("groups", "warnings", "confidence")},
                         "warnings": "; ".join(entry.warnings)})
            for group, metrics in figures.get("groups", {}).items():
                rows.append({"confidence": entry.confidence, "group": group,
                             **{k: v for k, v in metrics.items() if k != "confidence"}})
        return pd.DataFrame(rows)

    def groups_frame(self, confidence) -> pd.DataFrame:
        """The per-group rows at one confidence level (empty without groups)."""
        frame = self.to_frame()
        return frame[(frame["confidence"] == float(confidence)) & (frame["group"] != OVERALL)].reset_index(drop=True)

    def overall_frame(self) -> pd.DataFrame:
        """The whole test split's rows, one per confidence level."""
        frame = self.to_frame()
        return frame[frame["group"] == OVERALL].reset_index(drop=True)


def summarize(result: AuditResult, confidences: Iterable | None = None,
              policy: ReleasePolicy | None = None) -> AuditSummary:
    """The summary at ``confidences`` (default: the audited levels) under ``policy`` (default: the declared one)."""
    config = result.config
    levels = list(confidences) if confidences is not None else list(config.confidences)
    policy = policy or config.policy
    split = result.test_split
    per_level = {}
    for level in levels:
        cert = result.certificate(level)
        calibration = result.calibration_for(level)
        groups = None
        if split.groups is not None:
            keys, codes = split.group_codes
            groups = {}
            for code, group in enumerate(keys.tolist()):
                figures = _metrics_of(cert, codes == code, policy)
                if split.strata is None:  # the group is the stratum: its own threshold
                    figures.update(q_hat=float(split.score.to_method(calibration.q_hat(level, group))), varies=None)
                    n_cal = calibration.n_.get(group, 0)
                else:  # certainty strata within the group
                    n_cal = sum(calibration.n_.get(stratum["label"], 0) for stratum in result.strata
                                if stratum["group"] == str(group))
                groups[str(group)] = GroupMetrics(**figures, n_cal=n_cal)
        per_level[confidence_label(level)] = LevelSummary(
            **_metrics_of(cert, None, policy),
            alpha=float(alpha_from_confidence(level)),
            n_cal=sum(calibration.n_.values()),
            # under the release protocol each labelled document is calibrated by the n - 1 others
            n_cal_needed=minimum_calibration_size(alpha_from_confidence(level)) + (config.protocol == "release"),
            whole_pool_rate=float(whole_pool(cert).mean()) if len(split) else None,
            share_in_registry=result.inputs.get("documents", {}).get("share_in_registry"),
            warnings=tuple(certificate_warnings(result, cert, policy)),
            groups=groups,
            strata_thresholds=None if split.strata is None else
            {str(label): float(split.score.to_method(q)) for label, q in calibration.q_hat_[confidence_label(level)].items()})
    return AuditSummary(config.config_id, config.score, config.knowledge.name, config.attacker.name,
                        config.miss_policy, policy, per_level, config.protocol, result.strata,
                        llm_answers(result.inputs.get("llm_counters")))


CURVE_CONFIDENCES = tuple(round(0.50 + 0.01 * i, 2) for i in range(50)) + (0.995,)


def confidence_curve(result: AuditResult, confidences=CURVE_CONFIDENCES) -> pd.DataFrame:
    """Coverage and set sizes of the test split as the confidence level varies (no re-attack).

    One row per confidence level with ``confidence``, ``alpha``, ``coverage``,
    ``coverage_conditional``, ``median_set_size``, ``mean_set_size``, ``mean_leakage``, ``empty_rate``
    and ``q_hat`` (``None`` when infinite or when it differs between groups).
    """
    columns = ["coverage", "coverage_conditional", "median_set_size", "mean_set_size", "mean_leakage",
               "empty_rate", "q_hat"]
    rows = []
    for level, cert in zip(confidences, result.certificates(confidences)):  # every level in one pass
        metrics = certificate_metrics(cert).to_dict()
        rows.append({"confidence": float(level), "alpha": round(1 - float(level), 10),
                     **{k: metrics[k] for k in columns}})
    return pd.DataFrame(rows, columns=["confidence", "alpha", *columns])
