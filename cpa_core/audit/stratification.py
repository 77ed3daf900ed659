"""The strata an audit calibrates in: declared groups crossed with bins of the attacker's certainty.

The attacker's certainty on a document is its top-1 margin ``p(1) - p(2)`` (:func:`certainty`), read from its own
output, never from a label. :func:`stratify` bins it within each declared group, at the group's quantiles over all its
attacked documents (:mod:`cpa_core.conformal.strata`), merging bins until each is expected to hold enough calibration
documents for a finite threshold at the highest certified confidence, by counts that never depend on which documents
calibrate; the documents of one stratum are calibrated against each other (Mondrian), so a document the attacker is
sure about is certified against the documents it is sure about, whether it calibrates or not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpa_core.attack.candidates import CandidateTable
from cpa_core.conformal.calibration import alpha_from_confidence, minimum_calibration_size
from cpa_core.conformal.strata import certainty_bins

STRATUM_SEPARATOR = " · "


def certainty(table: CandidateTable) -> np.ndarray:
    """The attacker's top-1 margin on each document, ``p(1) - p(2)``: its first weight minus its second (``0`` when
    they tie, ``0`` for an empty pool). Weights given as minus ranks give margin 1 unless the top ties.

    When the table lists one candidate of a pool (a top-1 shortlist), ``p(2)`` is the largest weight outside the table
    (:func:`second_weight_outside`): exact when a cut candidate ties with the first (margin 0), when at most one
    candidate lies below it or when the mass below is 0 (a softmax that underflows), and otherwise the smallest value
    the table allows, so the margin is then the largest the table allows.
    """
    n, width = table.weights.shape
    if width == 0 or n == 0:
        return np.zeros(n)
    pools = np.minimum(table.pool_sizes, width)
    first = np.where(pools > 0, table.weights[:, 0], 0.0)
    listed = table.weights[:, 1] if width > 1 else np.zeros(n)
    second = np.where(pools > 1, listed, second_weight_outside(table, first))
    margin = np.where(pools > 0, first - second, 0.0)
    return np.where(np.isfinite(margin), margin, 0.0)


def second_weight_outside(table: CandidateTable, first: np.ndarray) -> np.ndarray:
    """``p(2)`` of each row read as a pool that lists one candidate (weight ``first``): the largest weight of the
    candidates outside the table.

    - a cut candidate ties with the first (``cut_ties``): ``first``;
    - probabilities: the ``cut_below`` candidates below share the mass ``tail_mass``, so their largest weight lies
      between ``tail_mass / cut_below`` (shared evenly) and ``tail_mass``. It is ``tail_mass / cut_below``: exact with
      one candidate below, or a mass of 0 (then ``0``); otherwise the smallest value the table allows. Without
      candidates counted below (none, or not recorded: mass below from invalid picks, say), ``0``;
    - minus ranks: the next rank, ``first - 1`` (margin 1, as for a listed second candidate);
    - an attacker's own scores say nothing about what was cut: ``0`` (the margin is the first weight).
    """
    n = first.shape[0]
    ties = np.zeros(n, dtype=bool) if table.cut_ties is None else np.asarray(table.cut_ties) > 0
    below = first - 1.0 if table.weight_kind == "rank" else np.zeros(n)
    if table.weight_kind == "probability" and table.tail_mass is not None and table.cut_below is not None:
        counts = np.asarray(table.cut_below)
        mass = np.asarray(table.tail_mass, dtype=float)
        below = np.divide(mass, counts, out=np.zeros(n), where=counts > 0)
    return np.where(ties, first, below)


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

    Within each group (the whole release without groups), the certainty bins of :func:`certainty_bins` over the group's
    documents (its own quantiles, its own share of calibration documents: a group's bins hold equal shares of it, and a
    stratum never mixes groups); a label is the group, the bin (``certainty 2 of 3``, a rank within the group) or both.
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
