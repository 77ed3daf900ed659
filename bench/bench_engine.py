"""Benchmark: the TF-IDF attack in this process against the same attack on a Dask LocalCluster (2 workers).

The data are the synthetic corpus of ``bench_scale.py`` (1,000 people by default). Each variant runs in a fresh
subprocess (its own peak RSS, ``VmHWM``; the cluster's workers are separate processes, their memory is not
counted there); the tables are written to ``.npz`` files and compared bitwise.

    python bench/bench_engine.py [WORKDIR] [--documents 10000] [--people 1000] [--top-k 100]

Worker: ``attack DIR TOP_K ENGINE OUT`` prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import _top_k, dataset  # noqa: E402
from bench_tfidf import StepMemory, _load, run_script_worker  # noqa: E402


def worker_attack(data: str, top_k: str, engine: str, out: str) -> dict:
    import numpy as np

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.pipeline import attack_documents

    documents, registry, level = _load(Path(data))
    attacker = TfidfAttacker(top_k=_top_k(top_k), temperature=0.05)
    started = None
    cluster = None
    if engine != "process":
        from cpa_core.attack.engine import DaskEngine

        started = time.perf_counter()
        cluster = DaskEngine(engine)
        started = time.perf_counter() - started
    with StepMemory() as memory:
        start = time.perf_counter()
        table, _ = attack_documents(documents, registry, attacker, level, engine=cluster)
        seconds = time.perf_counter() - start
    if cluster is not None:
        cluster.close()
    np.savez(out, candidates=table.candidates, weights=table.weights, tail=table.tail_mass)
    return {"seconds": seconds, "cluster_start_s": started, **memory.figures()}


def run_worker(*args) -> dict:
    return run_script_worker(__file__, *args)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "attack":
        print(json.dumps(worker_attack(*sys.argv[2:])))
        return
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", default="/tmp/cpa_bench_scale")
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--top-k", default="100")
    args = parser.parse_args()
    data = dataset(Path(args.workdir), args.people, args.documents)
    print(f"cores: {os.cpu_count()}, load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    rows = {}
    for engine in ("process", "local"):
        out = Path(args.workdir) / f"engine-{engine}.npz"
        rows[engine] = run_worker("attack", data, args.top_k, engine, out)
        rows[engine]["file"] = out
    tables = {engine: np.load(row["file"]) for engine, row in rows.items()}
    same = all(np.array_equal(tables["process"][name], tables["local"][name]) for name in ("candidates", "weights",
                                                                                         "tail"))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for engine, row in rows.items():
        extra = "" if row["cluster_start_s"] is None else f" (+ {row['cluster_start_s']:.1f} s to start the cluster)"
        print(f"| {args.documents:,} documents x {args.people:,} profiles, top-K {args.top_k}, temperature 0.05 | "
              f"{'this process (kernel on both cores)' if engine == 'process' else 'Dask LocalCluster, 2 workers'} | "
              f"{row['seconds']:.2f} s{extra} | client peak {row['process_peak_mib']:.0f} MiB |")
    print(f"identical tables: {same}; load after: {load}")


if __name__ == "__main__":
    main()
