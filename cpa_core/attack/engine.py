"""Where the attack runs: in this process (the default), or on a Dask cluster (``distributed``).

The attack is the audit's ``documents x registry`` stage. Once the attacker has learned what it learns from all
the labelled documents (a temperature ``auto``), each document is attacked independently of the others, so the
documents can be cut into partitions, each attacked on a worker against the whole registry, and the partitions'
candidate tables put back together in document order. The results are those of the attack in one process: the
same candidates, ranked the same way, bitwise the same weights.

- The registry and the attacker are sent to every worker once (``scatter(..., broadcast=True)``); a worker keeps
  them between partitions (the TF-IDF index is fitted once per worker).
- The attacker sent is a fresh copy of the declared one (:func:`dataclasses.replace`), given what was learned
  (:meth:`~cpa_core.attack.base.Attacker.adopt`): no state of the local attack travels.
- Learning stays in the client process: it is a symmetric function of all the labelled documents.

``DaskEngine("local")`` starts a :class:`distributed.LocalCluster` on this machine (two worker processes, bound
to 127.0.0.1, no dashboard); ``DaskEngine("tcp://host:8786")`` connects to a running scheduler.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from cpa_core.attack.base import Attacker
from cpa_core.attack.candidates import PADDING, CandidateTable
from cpa_core.attack.registry import get_spec
from cpa_core.common.errors import ConfigError
from cpa_core.common.progress import Progress
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry

LOCAL = "local"
LOCAL_WORKERS = 2
CONNECT_TIMEOUT = "10s"
PARTITIONS_PER_WORKER = 4


def concat_tables(tables: Sequence[CandidateTable]) -> CandidateTable:
    """The candidate tables of consecutive partitions of documents, as one table (rows in the given order).

    Candidate indices are mapped into one list of identity ids (the first table's, then any id another table
    names that it lacks); rows narrower than the widest are padded (``-1``, weight 0, outside their pool).
    """
    if not tables:
        raise ValueError("no candidate table to put together")
    first = tables[0]
    ids = list(first.candidate_ids.tolist())
    position = {ident: i for i, ident in enumerate(ids)}
    width = max(table.width for table in tables)
    candidates, weights = [], []
    for table in tables:
        if table.candidate_ids is first.candidate_ids or np.array_equal(table.candidate_ids, first.candidate_ids):
            index = table.candidates
        else:  # another universe of ids (an attacker naming identities outside the registry): one list
            for ident in table.candidate_ids.tolist():
                if ident not in position:
                    position[ident] = len(ids)
                    ids.append(ident)
            mapping = np.array([position[ident] for ident in table.candidate_ids.tolist()], dtype=np.int64)
            index = np.where(table.candidates >= 0, mapping[np.maximum(table.candidates, 0)], PADDING)
        pad = width - table.width
        candidates.append(np.pad(index, ((0, 0), (0, pad)), constant_values=PADDING))
        weights.append(np.pad(table.weights, ((0, 0), (0, pad)), constant_values=0.0))
    kinds = {table.weight_kind for table in tables}
    if len(kinds) > 1:
        raise ValueError(f"partitions with different weight kinds: {sorted(kinds)}")
    dtype = np.result_type(*(table.candidates.dtype for table in tables))
    queries = None if any(t.queries is None for t in tables) else tuple(q for t in tables for q in t.queries)
    tails = None if all(t.tail_mass is None for t in tables) else np.concatenate(
        [np.zeros(len(t)) if t.tail_mass is None else t.tail_mass for t in tables])
    ties = None if all(t.cut_ties is None for t in tables) else np.concatenate(
        [np.zeros(len(t), dtype=np.int64) if t.cut_ties is None else t.cut_ties for t in tables])
    below = None if all(t.cut_below is None for t in tables) else np.concatenate(
        [np.zeros(len(t), dtype=np.int64) if t.cut_below is None else t.cut_below for t in tables])
    clues = None if all(t.clues is None for t in tables) else tuple(
        c for t in tables for c in (t.clues if t.clues is not None else ((),) * len(t)))
    return CandidateTable(np.concatenate([t.doc_ids for t in tables]), np.concatenate(candidates).astype(dtype),
                          np.concatenate(weights), np.concatenate([t.pool_sizes for t in tables]),
                          np.asarray(ids, dtype=object) if len(ids) > len(first.candidate_ids) else first.candidate_ids,
                          queries, first.weight_kind, tails, clues, ties, below)


def _attack_partition(attacker: Attacker, doc_ids: list, texts: list, registry: Registry,
                      level: KnowledgeLevel) -> CandidateTable:
    """Run on a worker: one partition's attack."""
    return attacker.attack(doc_ids, texts, registry, level)


def shipped_attacker(attacker: Attacker, learned: dict) -> Attacker:
    """The attacker a worker runs: a fresh copy of the declared one that uses what the audit learned."""
    name = getattr(attacker, "name", type(attacker).__name__)
    if not get_spec(name).runs_on_cluster:
        raise ConfigError(f"the {name} attacker runs in this process "
                          "only (its state follows every document); run the audit without a scheduler")
    fresh = dataclasses.replace(attacker)
    fresh.adopt(learned)
    return fresh


class DaskEngine:
    """The attack on a Dask cluster: ``address`` is a scheduler's (``tcp://host:port``) or ``"local"`` (a cluster of
    :data:`LOCAL_WORKERS` worker processes on this machine). ``partition_size``: documents per task (default: about
    :data:`PARTITIONS_PER_WORKER` tasks per worker). Close it (or use it as a context manager) when done."""

    def __init__(self, address: str, partition_size: int | None = None):
        try:
            from distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - installed with the project
            raise ConfigError("the Dask engine needs the 'distributed' package: pip install distributed") from None
        if partition_size is not None and partition_size < 1:
            raise ConfigError(f"partition size must be at least 1, found {partition_size}")
        self.address, self.partition_size = address, partition_size
        self.cluster = None
        try:
            if address == LOCAL:
                self.cluster = LocalCluster(n_workers=LOCAL_WORKERS, threads_per_worker=1, processes=True,
                                            host="127.0.0.1", dashboard_address=None)
                self.client = Client(self.cluster)
            else:
                self.client = Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as error:
            self.close()
            raise ConfigError(f"scheduler {address}: cannot be reached ({error}); expected the address of a running "
                              "Dask scheduler, such as tcp://10.0.0.5:8786, or 'local'") from None

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def describe(self) -> dict:
        """What the manifest records of how the attack ran (results do not depend on it)."""
        return {"engine": "dask", "scheduler": self.address, "workers": self.workers}

    def partitions(self, n: int) -> list[slice]:
        size = self.partition_size or max(1, math.ceil(n / (self.workers * PARTITIONS_PER_WORKER)))
        return [slice(start, min(n, start + size)) for start in range(0, n, size)]

    def attack(self, attacker: Attacker, learned: dict, doc_ids: Sequence, texts: Sequence[str], registry: Registry,
               level: KnowledgeLevel, progress: Progress | None = None) -> CandidateTable:
        """The candidate table of the documents, attacked partition by partition on the workers."""
        from distributed import as_completed

        n = len(doc_ids)
        if n == 0:
            return attacker.attack([], [], registry, level)
        shipped = self.client.scatter(shipped_attacker(attacker, learned), broadcast=True)
        people = self.client.scatter(registry, broadcast=True)
        parts = self.partitions(n)
        futures = [self.client.submit(_attack_partition, shipped, list(doc_ids[part]), list(texts[part]), people,
                                      level, pure=False) for part in parts]
        done = 0
        for future in as_completed(futures):
            if future.status == "error":
                future.result()  # raises the worker's error here
            if progress:
                done += 1
                progress(done, len(parts), "ranking the registry on the cluster")
        return concat_tables(self.client.gather(futures))

    def close(self) -> None:
        for resource in (getattr(self, "client", None), self.cluster):
            if resource is not None:
                resource.close()
        self.client, self.cluster = None, None

    def __enter__(self) -> DaskEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
