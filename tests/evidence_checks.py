"""Evidence spans checked against the released text, and a hand-made attack table certified so that its
documents can be explained (shared by the explainer tests and their run on the packaged model)."""

from __future__ import annotations

import numpy as np

from cpa_core.audit.results import ScoredSplit, certify_release, release_ranking


def fits(text: str, span) -> bool:
    """The span is the text at its offsets."""
    return 0 <= span.start < span.end <= len(text) and text[span.start:span.end] == span.text


def flagged(table, truth):
    """The release certificate of ``table`` at confidence 0.5 (every labelled document audited)."""
    split = ScoredSplit.build(table, truth, None, "aps")
    return certify_release(split, release_ranking(split, np.array([t is not None for t in truth])), 0.5)
