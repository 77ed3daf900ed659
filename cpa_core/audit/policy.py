"""Release policy: flag documents with too small a certified set.

A document is flagged when its set has fewer than ``k`` members (equivalently its leakage proxy
exceeds ``1/k``), or when its leakage proxy exceeds an explicit threshold. An empty set (the attacker
puts more mass on its top candidate than the threshold allows) counts as size 0: the highest risk.
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
)
"""The release policy's keys of the ``[audit]`` table, with their defaults."""
_DEFAULTS = {param.name: param.default for param in POLICY_PARAMS}


@dataclass(frozen=True)
class ReleasePolicy:
    """Flag a document whose certified set has fewer than ``flag_below`` members, or (optionally) whose
    leakage proxy ``1 / max(1, |C|)`` exceeds ``leakage_threshold``."""

    flag_below: int = _DEFAULTS["flag_below"]
    leakage_threshold: float | None = _DEFAULTS["leakage_threshold"]

    def flags(self, set_sizes: np.ndarray) -> np.ndarray:
        """The flagged documents among these set sizes."""
        flagged = set_sizes < self.flag_below
        if self.leakage_threshold is not None:
            flagged |= 1.0 / np.maximum(1, set_sizes) > self.leakage_threshold
        return flagged

    @property
    def rule(self) -> str:
        """The rule in symbols: ``|C| < 11 or leakage > 0.09``."""
        return f"|C| < {self.flag_below}" + ("" if self.leakage_threshold is None
                                             else f" or leakage > {self.leakage_threshold:g}")

    @property
    def sentence(self) -> str:
        """The rule in words, for the summary and the report."""
        return (f"documents whose certified set has fewer than {self.flag_below} people are flagged"
                + ("" if self.leakage_threshold is None
                   else f", and so are those whose leakage proxy exceeds {self.leakage_threshold:g}"))

    def to_dict(self) -> dict:
        return {"flag_below": self.flag_below, "leakage_threshold": self.leakage_threshold}
