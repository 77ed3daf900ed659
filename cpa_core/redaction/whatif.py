"""What another release policy would release, read from what was already computed: no attack runs again.

For each policy of a grid (the acceptable linkage rate from 0.05 to 0.20 at the declared ``k``, and ``k`` around the
declared one at the declared rate), every document of the release is:

- **released as it is** when the policy does not flag it (its stored certified set and linkage probability);
- **edited** when it is flagged and a stored redaction search of it (:class:`~cpa_core.redaction.suggestions.Suggestion`)
  reached a step whose risk the policy accepts: the edits up to the first such step (under a laxer policy, fewer
  edits than the declared policy needed);
- **withheld** otherwise: no step of its stored search is acceptable, or it was never searched (the declared policy
  did not flag it, or no search ran yet: ``not_searched``).

A stricter policy may need steps the stored search never tried: the figures are what the stored search can show, and
only a new search (and a new calibration) decides. The declared policy stays what the verdict uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.audit.panel import PanelCertificate, PanelResult
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.redaction.suggestions import Suggestion

if TYPE_CHECKING:
    from cpa_core.audit.results import AuditResult

RATES = tuple(round(0.05 + 0.01 * i, 2) for i in range(16))
"""The acceptable linkage rates of the what-if: 0.05 to 0.20."""
KS = (2, 3, 5, 8, 11, 15, 20, 30)
"""The set sizes ``k`` of the what-if (with the declared one)."""
WHAT_IF_COLUMNS = ("flag_below", "acceptable_linkage", "declared", "released_as_is", "edited", "withheld",
                   "not_searched", "documents_kept", "characters_removed")


def policy_grid(declared: ReleasePolicy) -> list[ReleasePolicy]:
    """The policies of the what-if: each rate of :data:`RATES` (and the declared one) at the declared ``k``, then each
    ``k`` of :data:`KS` (and the declared one) at the declared rate (``1/k`` when none is declared); each once."""
    rates = sorted({*RATES, declared.linkage_rate})
    grid = [replace(declared, acceptable_linkage=rate) for rate in rates]
    grid += [replace(declared, flag_below=k) for k in sorted({*KS, declared.flag_below})]
    seen, out = set(), []
    for policy in grid:
        key = (policy.flag_below, round(policy.linkage_rate, 9))
        if key not in seen:
            seen.add(key)
            out.append(policy)
    return out


def outcome(policy: ReleasePolicy, doc_ids: Sequence[str], flagged: np.ndarray,
            suggestions: Mapping[str, Suggestion]) -> dict:
    """What ``policy`` releases: documents released as they are, edited (and the characters the edits remove) and
    withheld (and of those, never searched)."""
    edited = withheld = not_searched = characters = 0
    for doc_id in (str(d) for d, flag in zip(doc_ids, flagged) if flag):
        found = suggestions.get(doc_id)
        if found is None:
            withheld += 1
            not_searched += 1
            continue
        terms = _terms_to_acceptable(found, policy)
        if terms is None:
            withheld += 1
        else:
            edited += 1
            characters += sum(edit.length for edit in found.edits if edit.term in terms)
    released = int(len(doc_ids) - np.count_nonzero(flagged))
    return {"flag_below": policy.flag_below, "acceptable_linkage": round(policy.linkage_rate, 6),
            "released_as_is": released, "edited": edited, "withheld": withheld, "not_searched": not_searched,
            "documents_kept": released + edited, "characters_removed": characters}


def _terms_to_acceptable(suggestion: Suggestion, policy: ReleasePolicy) -> set[str] | None:
    """The terms redacted up to the first step the policy accepts (none when the document as it is is acceptable),
    or ``None`` when no stored step is."""
    if suggestion.before.acceptable(policy):
        return set()
    terms = set()
    for step in suggestion.steps:
        terms.add(step.term)
        if step.risk.acceptable(policy):
            return terms
    return None


def what_if(declared: ReleasePolicy, doc_ids: Sequence[str], flags: Callable[[ReleasePolicy], np.ndarray],
            suggestions: Sequence[Suggestion] = ()) -> pd.DataFrame:
    """The what-if table over :func:`policy_grid`: one row per policy (:data:`WHAT_IF_COLUMNS`), ``declared`` marking
    the declared one. ``flags(policy)`` gives which of ``doc_ids`` the policy flags (the stored certificates);
    ``suggestions``: a stored search (none: every flagged document counts as withheld, not searched)."""
    by_id = {s.doc_id: s for s in suggestions}
    rows = []
    for policy in policy_grid(declared):
        row = outcome(policy, doc_ids, np.asarray(flags(policy), dtype=bool), by_id)
        row["declared"] = (policy.flag_below == declared.flag_below
                           and abs(policy.linkage_rate - declared.linkage_rate) < 1e-9)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(WHAT_IF_COLUMNS))


def release_what_if(result: AuditResult | PanelResult, suggestions: Sequence[Suggestion] = (),
                    policy: ReleasePolicy | None = None, confidence=None) -> pd.DataFrame:
    """The what-if of an audited release (one attacker or a panel) around ``policy`` at ``confidence`` (default: the
    declared ones): every document of the release, the audited ones and under the split protocol the calibration
    documents (a search covers both)."""
    panel = result if isinstance(result, PanelResult) else PanelResult((result,))
    level = panel.config.policy_confidence if confidence is None else confidence
    parts = [panel.certificate(level)]
    if panel.config.protocol == "split":
        parts.append(PanelCertificate(panel.names, tuple(m.calibration_certificate(level) for m in panel.members)))
    doc_ids = [str(d) for cert in parts for d in cert.members[0].split.table.doc_ids]
    return what_if(policy or panel.config.policy, doc_ids,
                   lambda rule: np.concatenate([cert.flags(rule) for cert in parts]), suggestions)
