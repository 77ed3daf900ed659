"""A toy attacker panel: toy attackers (probability matrices, no text) audit the same documents, each calibrated on
its own; the report, the records, the history and the dashboard's helpers read it as they read any panel."""

from __future__ import annotations

import numpy as np
from tables import LEVEL, documents_and_registry, probability_matrix, sample_truth, table_from_matrix, toy_attacker

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.panel import PanelResult, panel_config_id
from cpa_core.audit.pipeline import run_audit

REDACTION = {"held_out": "bm25", "source_config_id": "abc123def456", "from_audit": None,
             "source": {"file": "ward<b>7</b>.csv", "sha256": "f" * 64, "rows": 120},
             "counts": {"withheld": 7, "edited": 30, "untouched": 83, "edits": 52, "characters": 410},
             "decisions": {"sha256": "d" * 64},
             "attackers": [{"attacker": "tfidf", "held_out": False,
                            "before": {"first_guess": 0.31, "low": 0.27, "high": 0.35, "n": 500},
                            "after": {"first_guess": 0.06, "low": 0.04, "high": 0.09, "n": 480}},
                           {"attacker": "<img src=x onerror=alert(1)>", "held_out": False,
                            "before": {"first_guess": 0.25, "low": 0.21, "high": 0.29, "n": 500},
                            "after": {"first_guess": 0.05, "low": 0.03, "high": 0.08, "n": 480}},
                           {"attacker": "bm25", "held_out": True, "before": None,
                            "after": {"first_guess": 0.08, "low": 0.05, "high": 0.11, "n": 480}}]}
"""A redaction verified outside its search, of the schema ``summary.json`` holds
(:func:`~cpa_core.redaction.decisions.redaction_lineage`: an attacker's name and a file name that are markup, a
held-out attacker never audited before the redaction)."""


def toy_panel(names=("tfidf", "lexical_fusion"), n: int = 120, m: int = 20, seed: int = 1, flag_below: int = 2,
              acceptable_linkage: float | None = 0.9) -> PanelResult:
    """A panel of toy attackers named ``names`` (registered names, so that their own reports describe them) auditing the same ``n`` documents against ``m`` profiles (the first
    attacker's probabilities draw the truths; each other attacker ranks with probabilities of its own), every one
    calibrated on its own at 80 and 90 %, flagging sets smaller than ``flag_below`` or a linkage probability above
    ``acceptable_linkage``."""
    rng = np.random.default_rng(seed)
    first = probability_matrix(n, m, rng)
    truth = sample_truth(first, rng)
    members = []
    for i, name in enumerate(names):
        probabilities = first if i == 0 else probability_matrix(n, m, rng)
        documents, registry = documents_and_registry([f"p{t}" for t in truth], m=m)
        config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(name), confidences=(0.8, 0.9),
                             flag_below=flag_below, acceptable_linkage=acceptable_linkage)
        members.append(run_audit(documents, registry, None, config, table=table_from_matrix(probabilities)))
    marked = {"config_id": panel_config_id(members), "attackers": list(names)}
    return PanelResult(tuple(member.with_inputs(panel={**marked, "attacker": name})
                             for member, name in zip(members, names)))
