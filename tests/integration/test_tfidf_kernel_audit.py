"""A whole audit certifies the same sets with and without the multithreaded similarity kernel of the TF-IDF
attacker (the kernel's attack tables: tests/attack/test_tfidf_index.py)."""

import numpy as np
from sample_release import sample_k2_fixture  # noqa: F401 (the fixture sample_k2)

from cpa_core.attack.attackers.tfidf import TfidfAttacker


def test_a_whole_audit_certifies_the_same_sets_with_and_without_the_kernel(sample_k2):
    from tables import toy_attacker

    from cpa_core.audit.configuration import AuditConfig
    from cpa_core.audit.pipeline import run_audit

    documents, registry, level = sample_k2
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.8, 0.9), top_k=20)
    results = [run_audit(documents, registry, TfidfAttacker(top_k=20, kernel=kernel), config)
               for kernel in (True, False)]
    fast, reference = results
    assert fast.inputs["learned"]["temperature"] == reference.inputs["learned"]["temperature"]  # auto: same blocks
    for confidence in (0.8, 0.9):
        np.testing.assert_array_equal(fast.certificate(confidence).set_sizes,
                                      reference.certificate(confidence).set_sizes)
        np.testing.assert_array_equal(fast.certificate(confidence).covered, reference.certificate(confidence).covered)
