"""Release policy: which documents are flagged, and what linkage rate is acceptable.

A document is flagged when its certified set has fewer than ``k`` members (``flag_below``; equivalently its leakage
proxy exceeds ``1/k``), or its leakage proxy exceeds an explicit threshold, **or** its linkage probability (the
calibrated chance that the attacker's first guess is its subject) exceeds the acceptable linkage rate ``a``
(``acceptable_linkage``, default ``1/k``: about 0.09 at k = 11, the per-record threshold used by Ontario's privacy
commissioner and the EMA). An empty set counts as size 0: the attacker is more certain than the threshold needs.
The verdict reads ``a`` too: what is left after the flagged documents must not be linked at a higher rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpa_core.common.params import Param

POLICY_PARAMS = (
    Param("flag_below", "int", 11, "Release policy k", "Flag documents whose set has fewer than k members.", min=1,
          option="--flag-below"),
    Param("leakage_threshold", "float", None, "Leakage threshold", "Also flag documents whose leakage proxy exceeds "
          "it.", above=0, max=1, optional=True, option="--leakage-threshold"),
    Param("acceptable_linkage", "float", None, "Acceptable linkage rate", "The share of documents an attacker may "
          "name correctly at first guess: flag a document whose linkage probability exceeds it, and release only "
          "when the rest is within it (default 1/k).", above=0, below=1, optional=True,
          option="--acceptable-linkage"),
)
"""The release policy's keys of the ``[audit]`` table, with their defaults."""
_DEFAULTS = {param.name: param.default for param in POLICY_PARAMS}

BY_SET, BY_LINKAGE = "set", "linkage"
"""The rules that flag a document (:meth:`ReleasePolicy.reasons`)."""


@dataclass(frozen=True)
class ReleasePolicy:
    """Flag a document whose certified set has fewer than ``flag_below`` members, or (optionally) whose leakage
    proxy ``1 / max(1, |C|)`` exceeds ``leakage_threshold``, or whose linkage probability exceeds the acceptable
    linkage rate (``acceptable_linkage``; ``None``: ``1 / flag_below``)."""

    flag_below: int = _DEFAULTS["flag_below"]
    leakage_threshold: float | None = _DEFAULTS["leakage_threshold"]
    acceptable_linkage: float | None = _DEFAULTS["acceptable_linkage"]

    @property
    def linkage_rate(self) -> float:
        """The acceptable linkage rate ``a``: declared, else ``1/k``."""
        return float(self.acceptable_linkage) if self.acceptable_linkage is not None else 1.0 / self.flag_below

    def flags_by_set(self, set_sizes: np.ndarray) -> np.ndarray:
        flagged = set_sizes < self.flag_below
        if self.leakage_threshold is not None:
            flagged |= 1.0 / np.maximum(1, set_sizes) > self.leakage_threshold
        return flagged

    def flags_by_linkage(self, linkage: np.ndarray | None, n: int) -> np.ndarray:
        if linkage is None:
            return np.zeros(n, dtype=bool)
        return np.asarray(linkage) > self.linkage_rate

    def flags(self, set_sizes: np.ndarray, linkage: np.ndarray | None = None) -> np.ndarray:
        """The flagged documents among these set sizes (and linkage probabilities, when given)."""
        return self.flags_by_set(set_sizes) | self.flags_by_linkage(linkage, len(set_sizes))

    def reasons(self, set_sizes: np.ndarray, linkage: np.ndarray | None = None) -> np.ndarray:
        """Which rule flagged each document: ``"set"``, ``"linkage"``, ``"set+linkage"`` or ``""`` (not flagged)."""
        by_set, by_linkage = self.flags_by_set(set_sizes), self.flags_by_linkage(linkage, len(set_sizes))
        out = np.full(len(set_sizes), "", dtype=object)
        out[by_set] = BY_SET
        out[by_linkage] = BY_LINKAGE
        out[by_set & by_linkage] = f"{BY_SET}+{BY_LINKAGE}"
        return out

    @property
    def rule(self) -> str:
        """The rule in symbols: ``|C| < 11 or linkage > 0.0909``."""
        return (f"|C| < {self.flag_below}" + ("" if self.leakage_threshold is None
                                              else f" or leakage > {self.leakage_threshold:g}")
                + f" or linkage > {self.linkage_rate:.3g}")

    @property
    def sentence(self) -> str:
        """The rule in words, for the summary and the report."""
        return (f"documents whose certified set has fewer than {self.flag_below} people are flagged"
                + ("" if self.leakage_threshold is None
                   else f", and so are those whose leakage proxy exceeds {self.leakage_threshold:g}")
                + f", and those whose linkage probability exceeds the acceptable linkage rate {self.linkage_rate:.3g}")

    def to_dict(self) -> dict:
        return {"flag_below": self.flag_below, "leakage_threshold": self.leakage_threshold,
                "acceptable_linkage": self.linkage_rate}
