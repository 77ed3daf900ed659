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

A cause is one warning however many strata it holds in: each stratum is named, with its figures, up to
:data:`~cpa_core.conformal.calibration.NOTES_NAMED` of them; beyond, the warning gives their count, a few of them
and their figures in all (a release of 1,000 one-document groups gives a few lines, not one per group).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.conformal.calibration import (
    ALL,
    NOTES_NAMED,
    TOO_SMALL,
    alpha_from_confidence,
    confidence_label,
    minimum_calibration_size,
    sizes_said,
    strata_counted,
    strata_noun,
    threshold_rank,
)
from cpa_core.report.formatting import counted, ordinal

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


def _kind(stratum) -> str:
    return "stratum" if "certainty " in str(stratum) else "group"


def _named(strata) -> str:
    """``group 'a'``, ``groups 'a' and 'b'`` or ``strata 'a · certainty 1 of 2', 'b'`` (strata when any is one)."""
    kinds = {_kind(s) for s in strata}
    noun = "stratum" if "stratum" in kinds else "group"
    quoted = [f"'{s}'" for s in strata]
    names = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    return f"{noun if len(quoted) == 1 else 'strata' if noun == 'stratum' else 'groups'} {names}"


def _too_small(level: str, alpha, small: list[tuple[object, int]]) -> str:
    """The strata whose calibration set is too small for a finite threshold at this level, in one warning."""
    needed = minimum_calibration_size(alpha)
    if [stratum for stratum, _ in small] == [ALL]:
        return (f"confidence {level}: the calibration set is too small: {counted(small[0][1], 'calibration document')}"
                f", and a finite threshold needs at least {needed:,}; the threshold is infinite and every set is the "
                "whole pool. Add labelled documents or lower the confidence level")
    fewer = any(_kind(stratum) == "stratum" for stratum, _ in small)
    advice = (" Add labelled documents" + (", lower the confidence level or calibrate in fewer certainty strata"
                                           if fewer else " or lower the confidence level"))
    if len(small) > NOTES_NAMED:
        return (f"confidence {level}: {strata_counted([s for s, _ in small])} have fewer than {needed:,} calibration "
                f"documents ({sizes_said([n for _, n in small])}), the least that gives a finite threshold: their "
                f"thresholds are infinite and every set in them is the whole pool.{advice}")
    sizes = (f"n = {small[0][1]:,}" if len(small) == 1 else
             "; ".join(f"'{stratum}': n = {n:,}" for stratum, n in small))
    return (f"confidence {level}: the calibration set of {_named([s for s, _ in small])} is too small ({sizes}), and a "
            f"finite threshold needs at least {needed:,}; {'its' if len(small) == 1 else 'their'} threshold is infinite "
            "and every set in " + ("it" if len(small) == 1 else "them") + f" is the whole pool.{advice}")


MISS_ADVICE = ("Certify with miss_policy = 'exclude' (a guarantee conditional on the identity being in the pool, "
               "unconditional coverage at least (1 - rho)(1 - alpha)), a larger top-K shortlist, or a registry that "
               "holds more of the documents' subjects")


def _missing(level: str, alpha, missed: list[tuple[object, int, int]]) -> str:
    """The strata whose threshold is infinite because too many calibration identities are outside the pool (the
    conservative miss policy scores them ``+inf``), in one warning: ``missed`` holds ``(stratum, outside, n)``."""
    if len(missed) == 1:
        stratum, outside, n = missed[0]
        k = threshold_rank(n, alpha)
        where = "" if stratum == ALL else f" in {_kind(stratum)} '{stratum}'"
        return (f"confidence {level}{where}: {outside:,} of the {counted(n, 'calibration document')} "
                f"({_percent(outside / n)}) {'has its' if outside == 1 else 'have their'} identity outside the "
                f"candidate pool, and {'its score is' if outside == 1 else 'their scores are'} infinite under the "
                f"conservative miss policy; at this level the threshold is the {ordinal(k)} smallest of the "
                f"{counted(n, 'score')}, so at most {n - k:,} of them may be infinite: the threshold is infinite and "
                f"every set is the whole pool. {MISS_ADVICE}")
    if len(missed) > NOTES_NAMED:
        outside, n = sum(o for _, o, _ in missed), sum(n for _, _, n in missed)
        return (f"confidence {level}: in {strata_counted([s for s, _, _ in missed])}, more calibration documents have "
                f"their identity outside the candidate pool than this level allows ({outside:,} of their "
                f"{counted(n, 'calibration document')}): their scores are infinite under the conservative miss policy, "
                f"so the thresholds are infinite and every set in them is the whole pool. {MISS_ADVICE}")
    each = "; ".join(f"'{stratum}': {outside:,} of {n:,}, at most {n - threshold_rank(n, alpha):,} allowed"
                     for stratum, outside, n in missed)
    return (f"confidence {level}: in {_named([s for s, _, _ in missed])}, more calibration documents have their "
            f"identity outside the candidate pool than this level allows ({each}): their scores are infinite under "
            "the conservative miss policy, so the thresholds are infinite and every set in them is the whole pool. "
            f"{MISS_ADVICE}")


def _uncalibrated(counts: list[tuple[object, int]]) -> str:
    """Strata with audited documents but no calibration document (at every level: said without one)."""
    if len(counts) == 1:
        stratum, n = counts[0]
        what = _kind(stratum)
        return (f"{what} '{stratum}' has {counted(n, 'audited document')} but no calibration document, so no "
                f"threshold: every set of the {what} is the whole pool. Add calibration documents of {what} "
                f"'{stratum}' or calibrate without groups")
    if len(counts) > NOTES_NAMED:
        strata, audited = [s for s, _ in counts], counted(sum(n for _, n in counts), "audited document")
        return (f"{strata_counted(strata)} have audited documents ({audited} in all) but no calibration document, so "
                "no threshold: every set in them is the whole pool. Add calibration documents of these "
                f"{strata_noun(strata)} or calibrate without groups")
    sizes = "; ".join(f"'{stratum}': {counted(n, 'audited document')}" for stratum, n in counts)
    return (f"{_named([s for s, _ in counts])} have audited documents but no calibration document ({sizes}), so no "
            "threshold: every set in them is the whole pool. Add calibration documents of these strata or calibrate "
            "without groups")


def certificate_warnings(result: AuditResult, cert: Certificate, policy: ReleasePolicy) -> list[str]:
    """Every reason the result's certificate ``cert`` certifies nothing (or little), with what to change: one warning
    per cause, naming every stratum it holds in; a cause that does not depend on the level is said without one, so
    it reads the same at every level (and is said once where several levels are shown)."""
    config = result.config
    confidence = cert.confidence
    alpha = alpha_from_confidence(confidence)
    level = confidence_label(confidence)
    calibration = result.calibration_for(confidence)
    small = [(note.stratum, calibration.n_.get(note.stratum, 0)) for note in calibration.notes_
             if note.confidence == level and note.kind == TOO_SMALL]
    out = [_too_small(level, alpha, small)] if small else []
    cal = result.calibration_split
    too_small = {stratum for stratum, _ in small}
    labels = cal.stratum_labels
    if labels is not None:
        keys, codes = cal.stratum_codes  # computed once per split: a stratum's mask is one comparison of codes
        index = {str(key): i for i, key in enumerate(keys.tolist())}

    missed = []
    for stratum in ([ALL] if labels is None else list(calibration.n_)):
        if stratum in too_small or not math.isinf(calibration.q_hat(confidence, stratum)):
            continue
        mask = np.ones(len(cal), dtype=bool) if labels is None else codes == index.get(str(stratum), -1)
        if not mask.any():
            continue
        outside = int((~cal.in_pool[mask]).sum())
        if config.miss_policy == "infinite" and outside:
            missed.append((stratum, outside, int(mask.sum())))
    if missed:
        out.append(_missing(level, alpha, missed))
    test = result.test_split
    if cert.left_out is not None:  # release protocol: each labelled document calibrated by the others
        alone = int((cert.left_out & np.isinf(cert.q_hat) & ~np.isinf(test.thresholds(calibration, confidence))).sum())
        if alone:
            out.append(
                f"confidence {level}: the threshold{'s' if alone > 1 else ''} of "
                f"{counted(alone, 'labelled document')} {'are' if alone > 1 else 'is'} infinite "
                f"({'their sets are' if alone > 1 else 'its set is'} the whole pool): each labelled document is "
                "calibrated by the other labelled documents of its stratum, one fewer than those that give the other "
                "documents a finite threshold. Add labelled documents or lower the confidence level")
    if test.stratum_labels is not None:
        calibrated = {str(key) for key in calibration.n_}
        keys, codes = test.stratum_codes
        uncalibrated = [(key, int((codes == code).sum())) for code, key in enumerate(keys.tolist())
                        if str(key) not in calibrated]
        if uncalibrated:
            out.append(_uncalibrated(uncalibrated))
    n = len(test)
    if n:
        whole = whole_pool(cert)
        if whole.mean() >= MOSTLY and not out:  # not already explained by an infinite threshold
            held = int(whole.sum())
            out.append(f"confidence {level}: {held:,} of {counted(n, 'set')} ({_percent(whole.mean())}) "
                       f"{'holds' if held == 1 else 'hold'} at least {NEARLY_WHOLE:.0%} of "
                       f"{'its' if held == 1 else 'their'} candidate pool: they certify nothing about these documents, "
                       "and few flagged documents is no evidence of safety. Lower the confidence level, calibrate on "
                       "more documents, or declare a stronger attacker")
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
