"""Benchmark: the TF-IDF attack with the multithreaded similarity kernel against the dense reference path and
against a raw ``sparse_dot_topn.sp_matmul_topn`` of the same matrices with the same top-K.

Each measured step runs in a fresh subprocess (peak RSS of its own, as in ``bench_tfidf.py``); the three
variants are interleaved in one run (kernel, dense, raw, kernel, dense, raw, ...) so that a change of machine
load hits them alike.

    python bench/bench_topk.py [WORKDIR] [--profiles 10000,100000] [--documents 10000] [--repeats 1]

Workers: ``attack DIR REGISTRY_CSV TOP_K KERNEL`` and ``raw DIR REGISTRY_CSV TOP_K`` print one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tfidf import StepMemory, _load, run_script_worker, timed_attack  # noqa: E402
from bench_tfidf import run_worker as _run_tfidf_worker

TOP_K = 100


def worker_attack(data: str, registry_file: str, top_k: str, kernel: str) -> dict:
    figures, table = timed_attack(data, registry_file, top_k, kernel=kernel == "1")
    return {**figures,
            "checksum": [int(table.candidates.sum()), float(table.weights.sum()), float(table.tail_mass.sum())]}


def worker_raw(data: str, registry_file: str, top_k: str) -> dict:
    """The same TF-IDF fit and transform as the attack, then ``sp_matmul_topn`` (every core) in the attack's
    chunks: no softmax, no tail, no tie rule."""
    from sparse_dot_topn import sp_matmul_topn

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.attack.tfidf_index import kernel_threads

    documents, registry, level = _load(Path(data), registry_file)
    attacker = TfidfAttacker(top_k=int(top_k), temperature=1.0)
    texts = documents.frame["text"].tolist()
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        index = attacker.index(registry, level)
        queries = index.transform(texts)
        profiles_t = index.profiles_.T.tocsr()
        nnz = 0
        for first in range(0, queries.shape[0], attacker.chunk_size):
            block = sp_matmul_topn(queries[first:first + attacker.chunk_size], profiles_t, top_n=int(top_k),
                                   sort=True, n_threads=kernel_threads())
            nnz += block.nnz
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), "n_documents": len(documents),
            "n_registry": len(registry), "nnz": nnz}


WORKERS = {"attack": worker_attack, "raw": worker_raw}


def run_worker(*args) -> dict:
    return run_script_worker(__file__, *args)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_topk(workdir: Path, profiles: list[int], documents: int, repeats: int, log=print) -> list[dict]:
    biggest = max(profiles)
    data = workdir / f"data_{biggest}_{documents}"
    if not (data / "registry.csv").exists():
        log(f"generating {biggest} profiles / {documents} documents ...")
        _run_tfidf_worker("generate", data, biggest, documents, 20261122, *profiles)
    rows = []
    for n in profiles:
        registry = f"registry_{n}.csv"
        for repeat in range(repeats):
            for variant in ("kernel", "dense", "raw"):
                load = load_average()
                if variant == "raw":
                    result = run_worker("raw", data, registry, TOP_K)
                else:
                    result = run_worker("attack", data, registry, TOP_K, int(variant == "kernel"))
                row = {"profiles": n, "variant": variant, "repeat": repeat, "load_before": load, **result}
                rows.append(row)
                log(f"{n:>7} profiles  {variant:<6}  {result['seconds']:7.2f} s wall  {result['cpu_seconds']:7.2f} s cpu"
                    f"  peak step RSS {result['step_peak_mib']:7.0f} MiB  (load {load})")
        kernel = [r for r in rows if r["profiles"] == n and r["variant"] == "kernel"]
        dense = [r for r in rows if r["profiles"] == n and r["variant"] == "dense"]
        if any(k["checksum"] != d["checksum"] for k in kernel for d in dense):
            log("  note: checksums differ (tails agree to rounding; candidates and weights should be equal)")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", default="/tmp/cpa_bench_topk")
    parser.add_argument("--profiles", default="10000,100000")
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"cores: {os.cpu_count()}, load before: {load_average()}")
    rows = bench_topk(workdir, [int(p) for p in args.profiles.split(",")], args.documents, args.repeats)
    print(f"load after: {load_average()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in WORKERS:
        print(json.dumps(WORKERS[sys.argv[1]](*sys.argv[2:])))
    else:
        main()
