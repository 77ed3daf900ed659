"""The lexical fusion attacker on a real release (TextWash study 1 from ``../shared/datasets``: 30 people, each
profile three held-out original descriptions, the release every person's other anonymised descriptions): it names
more subjects at first guess than the TF-IDF attacker and its median certified set at 90 % is not larger; on a local
Dask cluster it gives the audit of one process."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from real_releases import PROFILE, TEXTWASH, textwash_release

from cpa_core.attack.attackers.lexical_fusion import LexicalFusionAttacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.report.metrics import summarize

CONFIDENCE = 0.9


@pytest.fixture(scope="module")
def release():
    built = textwash_release(category=None, profile_descriptions=3)
    if built is None:
        pytest.skip(f"TextWash study 1 is not available: ../shared/datasets not found (looked in {TEXTWASH})")
    return built


def audit(release, attacker, engine=None):
    documents, registry = release
    config = AuditConfig(knowledge=PROFILE, attacker=AttackerConfig.of(attacker), confidences=(CONFIDENCE,))
    return run_audit(documents, registry, attacker, config, engine=engine)


def test_the_fused_attacker_names_more_subjects_with_sets_no_larger_than_tfidf(release):
    tfidf, fused = (summarize(audit(release, attacker)).level(CONFIDENCE)
                    for attacker in (TfidfAttacker(), LexicalFusionAttacker()))
    assert tfidf.n_test == fused.n_test > 1000
    assert fused.first_guess_rate > tfidf.first_guess_rate
    assert fused.median_set_size <= tfidf.median_set_size


def test_the_fused_attack_on_a_local_cluster_equals_the_attack_in_this_process(release):
    from cpa_core.attack.engine import DaskEngine

    documents, registry = release
    documents = replace(documents, frame=documents.frame.iloc[:300].reset_index(drop=True))
    here = audit((documents, registry), LexicalFusionAttacker(top_k=10))
    with DaskEngine("local", partition_size=70) as engine:
        there = audit((documents, registry), LexicalFusionAttacker(top_k=10), engine)
    assert there.inputs["engine"]["engine"] == "dask" and here.inputs.get("learned") == there.inputs.get("learned")
    for a, b in ((here.test_split, there.test_split), (here.calibration_split, there.calibration_split)):
        assert a.table.doc_ids.tolist() == b.table.doc_ids.tolist()
        assert np.array_equal(a.table.candidates, b.table.candidates)
        assert np.array_equal(a.table.weights, b.table.weights)  # bitwise
        assert np.array_equal(a.table.tail_mass, b.table.tail_mass)
    assert np.array_equal(here.certificate(CONFIDENCE).set_sizes, there.certificate(CONFIDENCE).set_sizes)
