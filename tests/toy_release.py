"""A toy TF-IDF audit with its explainer, as the module-scoped fixture ``toy_release``: import
``toy_release_fixture`` into a test module (``# noqa: F401``) and ask for it by name. It unpacks as
``(result, explainer, documents)`` and names its ``attacker`` and ``registry`` too."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", name="toy_release")
def toy_release_fixture():
    """A toy TF-IDF audit, its explainer and its documents (and its attacker and registry by name)."""
    from conftest import toy_frames

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry
    from cpa_core.report.evidence import audit_explainer

    frame, people = toy_frames(n_people=12, docs_per_person=6, seed=3)
    # non-ASCII evidence: a person-specific word written with accents in the released text
    frame["text"] = [f"{text} Zoë went to Gdańsk with Müller." if identity in ("P001", "P004") else text
                     for text, identity in zip(frame["text"], frame["identity_id"])]
    people.loc[people["identity_id"].isin(["P001", "P004"]), "keywords"] += " zoe gdansk muller"
    documents = load_documents(frame.to_csv(index=False).encode("utf-8"), name="toy-documents.csv")
    registry = load_registry(people.to_csv(index=False).encode("utf-8"), name="toy-registry.csv")
    attacker = TfidfAttacker(temperature=0.1)
    config = AuditConfig(knowledge=KnowledgeLevel("K3", ("city", "occupation", "keywords")),
                         attacker=AttackerConfig.of(attacker), confidences=(0.8, 0.9), protocol="split", n_cal=36,
                         n_test=36, seed=1, flag_below=4, acceptable_linkage=0.999, certainty_bins=1)  # sets decide
    result = run_audit(documents, registry, attacker, config)
    explainer = audit_explainer(attacker, registry, config)
    assert explainer is not None
    return ToyRelease(result, explainer, documents, attacker, registry)


class ToyRelease(tuple):
    """``(result, explainer, documents)``, with the ``attacker`` and ``registry`` of the audit by name."""

    def __new__(cls, result, explainer, documents, attacker, registry):
        toy = super().__new__(cls, (result, explainer, documents))
        toy.attacker, toy.registry = attacker, registry
        return toy
