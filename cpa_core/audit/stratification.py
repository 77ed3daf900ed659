"""The strata an audit calibrates in: declared groups crossed with bins of the attacker's certainty.

The attacker's certainty on a document is its top-1 margin ``p(1) - p(2)`` (:func:`certainty`), read from its own
output, never from a label. :func:`stratify` bins it over every attacked document (:mod:`cpa_core.conformal.strata`),
within each declared group, merging bins until each holds enough calibration documents for a finite threshold at
the highest certified confidence; the documents of one stratum are calibrated against each other (Mondrian), so a
document the attacker is sure about is certified against the documents it is sure about.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpa_core.attack.candidates import CandidateTable
from cpa_core.conformal.calibration import alpha_from_confidence, minimum_calibration_size
from cpa_core.conformal.strata import certainty_bins

STRATUM_SEPARATOR = " · "


def certainty(table: CandidateTable) -> np.ndarray:
    """The attacker's top-1 margin on each document: its first weight minus its second (``0`` when they tie, the
    first weight when the pool has one candidate and nothing ties with it; ``0`` for an empty pool). Weights given
    as minus ranks give margin 1 unless the top ties."""
    n, width = table.weights.shape
    if width == 0 or n == 0:
        return np.zeros(n)
    pools = np.minimum(table.pool_sizes, width)
    first = np.where(pools > 0, table.weights[:, 0], 0.0)
    second = table.weights[:, 1] if width > 1 else np.zeros(n)
    ties = np.zeros(n, dtype=bool) if table.cut_ties is None else np.asarray(table.cut_ties) > 0
    second = np.where(pools > 1, second, np.where(ties, first, 0.0))
    margin = np.where(pools > 0, first - second, 0.0)
    return np.where(np.isfinite(margin), margin, 0.0)


def minimum_members(confidences, protocol: str) -> int:
    """Calibration documents a stratum needs for a finite threshold at every certified level (one more under the
    release protocol, where each is calibrated by the others)."""
    needed = max(minimum_calibration_size(alpha_from_confidence(c)) for c in confidences)
    return needed + (protocol == "release")


@dataclass(frozen=True)
class Stratum:
    """One stratum: its label, group (``None`` without groups), the margin range of its certainty bin, its
    documents and its calibration documents."""

    label: str
    group: str | None
    margin_low: float
    margin_high: float
    documents: int
    calibrating: int

    def to_dict(self) -> dict:
        return {"label": self.label, "group": self.group, "margin_low": self.margin_low,
                "margin_high": self.margin_high, "documents": self.documents, "calibrating": self.calibrating}


def stratify(margin: np.ndarray, groups: np.ndarray | None, members: np.ndarray, n_bins: int,
             min_members: int) -> tuple[np.ndarray | None, tuple[Stratum, ...]]:
    """Each document's stratum label and the strata; ``None`` and no strata when no group is cut into certainty bins
    (the groups, if any, are then the strata).

    Within each group (the whole release without groups), the certainty bins of :func:`certainty_bins`; a label is
    the group, the bin (``certainty 2 of 3``) or both.
    """
    n = margin.shape[0]
    keys = [None] if groups is None else sorted({str(g) for g in groups})
    where = {None: np.ones(n, dtype=bool)} if groups is None else \
        {key: np.asarray(groups, dtype=object).astype(str) == key for key in keys}
    labels = np.empty(n, dtype=object)
    strata = []
    for key in keys:
        rows = np.flatnonzero(where[key])
        bins = certainty_bins(margin[rows], members[rows], n_bins, min_members)
        for code in range(bins.count):
            parts = ([] if key is None else [key]) + ([] if bins.count == 1 else [f"certainty {code + 1} of {bins.count}"])
            label = STRATUM_SEPARATOR.join(parts) if parts else "all"
            labels[rows[bins.codes == code]] = label
            low, high = bins.edges[code]
            strata.append(Stratum(label, key, low, high, bins.sizes[code], bins.members[code]))
    if len(strata) == len(keys):  # one bin per group (or one in all): the groups alone are the strata
        return None, ()
    return labels, tuple(strata)
