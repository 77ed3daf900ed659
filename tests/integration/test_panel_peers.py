"""A panel member's linkage probability reads its peers' attacks, on the sample release: the panel records the peers,
and an edited text's risk is read with its peers' attacks of it, so that the unedited text reads the stored
probability again, whichever members are asked."""

from __future__ import annotations

import numpy as np
import pytest
from sample_release import sample_project_fixture  # noqa: F401 (the fixture sample_project)

from cpa_core.audit.panel import audit_panel
from cpa_core.audit.project import declare_audit
from cpa_core.audit.rescoring import PanelStoredRisk
from cpa_core.report.formatting import linkage_method


@pytest.fixture(scope="module")
def panel_and_attackers(sample_project):
    project, documents, registry = sample_project
    declared = [declare_audit(project, registry, attacker=name, documents=documents) for name in ("tfidf", "bm25")]
    return audit_panel(documents, registry, declared), [attacker for _, attacker in declared], documents, registry


def test_each_member_reads_the_other_s_attack(panel_and_attackers):
    panel, _, _, _ = panel_and_attackers
    tfidf, bm25 = panel.members
    assert tfidf.inputs["panel"]["peers"] == ["bm25"] and bm25.inputs["panel"]["peers"] == ["tfidf"]
    assert tfidf.linkage_model.peers == ("bm25",) and bm25.linkage_model.peers == ("tfidf",)
    assert tfidf.linkage_model.describe()["method"] == "cross Venn-Abers"
    assert "peers' attacks of the same document (bm25:" in linkage_method(tfidf.linkage_model.describe())
    alone = tfidf.with_peers(())
    assert alone.linkage_model.peers == () and not np.allclose(alone.linkage, tfidf.linkage)


def test_the_unedited_text_reads_its_stored_probability_under_any_part_of_the_panel(panel_and_attackers):
    panel, attackers, documents, registry = panel_and_attackers
    stored = PanelStoredRisk(list(zip(panel.members, attackers)), registry)
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    ids = panel.members[0].test_split.table.doc_ids
    rows = np.flatnonzero(~panel.members[0].calibrating)[:8]  # the stored fit places them where the audit did
    names = [(0, int(row)) for row in rows]
    chosen = [texts[str(ids[row])] for row in rows]
    whole = stored.of(names, chosen)
    alone = stored.of(names, chosen, members=[1])  # bm25 asked alone: tfidf still attacks, as its peer
    for m, member in enumerate(panel.members):
        certified = member.certificate(stored.confidence).linkage[rows]
        assert [r.risk.members[m].linkage for r in whole] == pytest.approx(certified.tolist())
    assert [r.risk.members[0].linkage for r in alone] == pytest.approx([r.risk.members[1].linkage for r in whole])
