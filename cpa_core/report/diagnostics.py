"""When a certificate certifies nothing, say so: which case it is, why, and what to change.

A set that is the whole candidate pool is not "safe": the method could not narrow anything down, and a
count of "0 documents at risk" built on such sets is no evidence. :func:`certificate_warnings` finds
every such case for one confidence level under one release policy; the summary carries its messages
(``warnings``), so the command line, ``summary.json``, the dashboard and the report all say them.

The cases:

- the calibration set is too small for the level (``k > n``: an infinite threshold), or, under the release
  protocol, one document short for the labelled documents, each calibrated by the other ``n - 1``;
- under the conservative miss policy, more calibration documents have their identity outside the pool than the
  level allows (``n - k`` of ``n``): the ``k``-th smallest calibration score is ``+inf``;
- a group of audited documents has no calibration document (per-group calibration): no threshold;
- most sets are (nearly) the whole pool, whatever the cause;
- the release policy's ``k`` is at least the pool size: every set is smaller than ``k``;
- few of the documents' subjects are in the registry.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.conformal.calibration import ALL, alpha_from_confidence, confidence_label, threshold_rank

if TYPE_CHECKING:
    from cpa_core.audit.results import AuditResult, Certificate

NEARLY_WHOLE = 0.9
"""A set holding at least this share of its pool is (nearly) the whole pool."""
MOSTLY = 0.5
"""Warn when at least this share of the sets is (nearly) the whole pool."""
FEW_IN_REGISTRY = 0.5
"""Warn when fewer than this share of the documents' subjects are in the registry."""


def whole_pool(cert: Certificate) -> np.ndarray:
    """Documents whose set holds (nearly) every candidate of a non-empty pool."""
    pools = cert.split.table.pool_sizes
    return (pools > 0) & (cert.set_sizes >= np.maximum(1, np.ceil(NEARLY_WHOLE * pools)))


def _percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def certificate_warnings(result: AuditResult, cert: Certificate, policy: ReleasePolicy) -> list[str]:
    """Every reason the result's certificate ``cert`` certifies nothing (or little), with what to change."""
    config = result.config
    confidence = cert.confidence
    alpha = alpha_from_confidence(confidence)
    level = confidence_label(confidence)
    calibration = result.calibration_for(confidence)
    out = list(calibration.notes_for(confidence))  # too small for the level
    cal = result.calibration_split
    too_small = {note.stratum for note in calibration.notes_ if note.confidence == level}
    labels = cal.stratum_labels
    strata = {ALL: np.ones(len(cal), dtype=bool)} if labels is None else \
        {key: labels.astype(str) == str(key) for key in calibration.n_}

    for stratum, mask in strata.items():
        if stratum in too_small or not math.isinf(calibration.q_hat(confidence, stratum)) or not mask.any():
            continue
        missed = float(np.mean(~cal.in_pool[mask]))
        where = "" if stratum == ALL else f" in {'stratum' if 'certainty ' in str(stratum) else 'group'} '{stratum}'"
        if config.miss_policy == "infinite" and missed > 0:
            n = int(mask.sum())
            k = threshold_rank(n, alpha)
            out.append(
                f"confidence {level}{where}: {int(round(missed * n)):,} of the {n:,} calibration documents "
                f"({_percent(missed)}) have their identity outside the candidate pool, and their scores are infinite "
                f"under the conservative miss policy; at this level the threshold is the {k:,}-th smallest of the "
                f"{n:,} scores, so at most {n - k:,} of them may be infinite: the threshold "
                "is infinite and every set is the whole pool. Certify with miss_policy = 'exclude' (a guarantee "
                "conditional on the identity being in the pool, unconditional coverage at least (1 - rho)(1 - alpha)), "
                "a larger top-K shortlist, or a registry that holds more of the documents' subjects")
    test = result.test_split
    if cert.left_out is not None:  # release protocol: each labelled document calibrated by the others
        alone = cert.left_out & np.isinf(cert.q_hat) & ~np.isinf(test.thresholds(calibration, confidence))
        if alone.any():
            out.append(
                f"confidence {level}: the thresholds of {int(alone.sum())} labelled documents are infinite (their sets "
                "are the whole pool): each labelled document is calibrated by the other labelled documents of its "
                "stratum, one fewer than those that give the other documents a finite threshold. Add labelled "
                "documents or lower the confidence level")
    if test.stratum_labels is not None:
        calibrated = {str(key) for key in calibration.n_}
        keys, codes = test.stratum_codes
        for code, key in enumerate(keys.tolist()):
            if str(key) not in calibrated:
                what = "stratum" if "certainty " in str(key) else "group"
                out.append(f"confidence {level}: {what} '{key}' has {int((codes == code).sum())} audited documents "
                           "but no calibration document, so no threshold: every set of the "
                           f"{what} is the whole pool. Add calibration documents of {what} '{key}' or calibrate "
                           "without groups")
    n = len(test)
    if n:
        whole = whole_pool(cert)
        if whole.mean() >= MOSTLY and not out:  # not already explained by an infinite threshold
            out.append(f"confidence {level}: {int(whole.sum())} of {n} sets ({_percent(whole.mean())}) hold at least "
                       f"{NEARLY_WHOLE:.0%} of their candidate pool: they certify nothing about these documents, and "
                       "few flagged documents is no evidence of safety. Lower the confidence level, calibrate on more "
                       "documents, or declare a stronger attacker")
        pools = test.table.pool_sizes
        if (pools > 0).any() and policy.flag_below >= int(np.median(pools[pools > 0])):
            out.append(f"release policy k = {policy.flag_below} is at least the candidate pool size "
                       f"({int(np.median(pools[pools > 0]))} for most documents): every set is smaller than k, so the "
                       "flags say nothing. Lower k or widen the pool (a larger top-K)")
        in_registry = result.inputs.get("documents", {}).get("share_in_registry")
        if in_registry is not None and in_registry < FEW_IN_REGISTRY:
            out.append(f"only {_percent(in_registry)} of the documents' subjects are in the registry: most "
                       "identities cannot be in any set. Check that both files use the same identity ids, or use "
                       "a registry that covers the release")
    return out
