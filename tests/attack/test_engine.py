"""The attack's partitions put back together, and which attackers may travel to a cluster. The attack on a local
Dask cluster giving the results of the attack in one process: tests/integration/test_engine_cluster.py."""

from __future__ import annotations

import numpy as np
import pytest

from cpa_core.attack.candidates import CandidateTable
from cpa_core.common.errors import ConfigError


def table(doc_ids, candidates, weights, ids, tail=None, queries=None) -> CandidateTable:
    candidates = np.array(candidates, dtype=np.int64)
    return CandidateTable(np.array(doc_ids, dtype=object), candidates, np.array(weights, dtype=float),
                          (candidates >= 0).sum(axis=1), np.array(ids, dtype=object), queries,
                          tail_mass=None if tail is None else np.array(tail, dtype=float))


def test_partitions_put_back_together_keep_every_row_and_identity():
    from cpa_core.attack.engine import concat_tables

    a = table(["d1", "d2"], [[0, 1], [1, -1]], [[0.6, 0.4], [1.0, 0.0]], ["P1", "P2"], tail=[0.0, 0.1],
              queries=("q1", "q2"))
    b = table(["d3"], [[2, 0, 1]], [[0.5, 0.3, 0.2]], ["P1", "P3", "P9"], queries=("q3",))
    whole = concat_tables([a, b])
    assert whole.doc_ids.tolist() == ["d1", "d2", "d3"] and whole.queries == ("q1", "q2", "q3")
    assert whole.candidate_ids.tolist() == ["P1", "P2", "P3", "P9"]
    named = [[whole.candidate_ids[c] if c >= 0 else None for c in row] for row in whole.candidates.tolist()]
    assert named == [["P1", "P2", None], ["P2", None, None], ["P9", "P1", "P3"]]
    assert whole.pool_sizes.tolist() == [2, 1, 3] and whole.tail_mass.tolist() == [0.0, 0.1, 0.0]
    assert whole.weights[2].tolist() == [0.5, 0.3, 0.2] and whole.weights[0, 2] == 0.0
    same = concat_tables([a.rows([0]), a.rows([1])])
    assert np.array_equal(same.candidates, a.candidates) and same.candidate_ids is a.candidate_ids


def test_an_attacker_that_keeps_state_per_document_runs_in_this_process_only():
    from cpa_core.attack.attackers.forced_choice import ForcedChoiceAttacker
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.attack.engine import shipped_attacker

    with pytest.raises(ConfigError, match="runs in this process only"):
        shipped_attacker(ForcedChoiceAttacker.__new__(ForcedChoiceAttacker), {})
    local = TfidfAttacker()
    local.temperature_ = 0.5
    local.index_ = object()  # local state must not travel
    shipped = shipped_attacker(local, {"temperature": 0.25})
    assert shipped is not local and shipped.index_ is None and shipped.effective_temperature == 0.25
