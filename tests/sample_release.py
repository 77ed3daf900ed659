"""The sample release loaded in this process, as module-scoped fixtures shared by a unit test module and its
integration twin: import the function (``# noqa: F401``) and ask for the fixture by its name."""

from __future__ import annotations

import pytest
from conftest import SAMPLE_DIR


@pytest.fixture(scope="module", name="sample_project")
def sample_project_fixture():
    """``(project, documents, registry)`` of the sample data, the files named as a bundle declares them
    (``sample_data/...``)."""
    from cpa_core.audit.project import load_config

    project = load_config(SAMPLE_DIR / "audit.toml")
    documents = project.load_documents(SAMPLE_DIR / "documents.csv", name="sample_data/documents.csv")
    registry = project.load_registry(SAMPLE_DIR / "registry.csv", name="sample_data/registry.csv")
    return project, documents, registry


@pytest.fixture(scope="module", name="sample_k2")
def sample_k2_fixture(sample_paths):
    """``(documents, registry, level)``: the sample documents and registry, and the knowledge level K2."""
    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    return documents, registry, KnowledgeLevel("K2", ("age_band", "gender", "occupation", "city", "keywords",
                                                      "events"))
