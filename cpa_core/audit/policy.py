"""Release policy: flag documents with too small a certified set.

A document is flagged when its set has fewer than ``k`` members (equivalently its leakage proxy
exceeds ``1/k``), or when its leakage proxy exceeds an explicit threshold. An empty set (the attacker
puts more mass on its top candidate than the threshold allows) counts as size 0: the highest risk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class ReleasePolicy:
    """Flag a document whose certified set has fewer than ``flag_below`` members, or (optionally) whose
    leakage proxy ``1 / max(1, |C|)`` exceeds ``leakage_threshold``."""

    flag_below: int = 11
    leakage_threshold: float | None = None

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
