"""A default audit (TF-IDF, temperature ``auto``, certainty strata, linkage probabilities) against the
single-threaded TF-IDF floor and against the same audit at a fixed temperature.

4,000 synthetic documents against 20,000 profiles, top-K 100, release protocol. Each measurement runs in a fresh
subprocess (``python bench/bench_default_run.py WORKER DIR``), interleaved and repeated, the best wall time kept:

- ``floor``: sklearn's ``TfidfVectorizer`` with the attacker's settings, fit on the profiles, transform of the
  documents, the sparse product and the top 100 of every row (``np.argpartition``), in one thread;
- ``default``: ``run_audit`` as a newcomer declares it (temperature ``auto``: the tuning fold's fit included);
- ``fixed``: the same audit at temperature 0.1.

    python bench/bench_default_run.py [--write]   # --write appends the table to bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEOPLE, DOCUMENTS, TOP_K, REPEATS = 20_000, 4_000, 100, 3
SINGLE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                        "NUMEXPR_NUM_THREADS")}


def _load(data: Path):
    import sklearn.feature_extraction.text  # noqa: F401  (imports are not the audit's cost)

    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(data / "documents.csv"), load_registry(data / "registry.csv")
    return documents, registry, KnowledgeLevel("full", tuple(registry.fields), "direct", "every registry field")


def worker_floor(data: str) -> dict:
    import numpy as np
    from sklearn.base import clone

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.attack.tfidf_index import TfidfIndex
    from cpa_core.io.knowledge import profile_texts

    documents, registry, level = _load(Path(data))
    profiles, texts = profile_texts(registry, level), documents.frame["text"].tolist()
    defaults = TfidfAttacker()
    settings = TfidfIndex(defaults.max_features, defaults.ngram_max, defaults.min_df).vectorizer
    start = time.perf_counter()
    vectorizer = clone(settings)
    P = vectorizer.fit_transform(profiles)
    Q = vectorizer.transform(texts)
    for begin in range(0, Q.shape[0], 512):
        block = (Q[begin:begin + 512] @ P.T).toarray()
        np.argpartition(-block, TOP_K, axis=1)[:, :TOP_K]
    return {"seconds": time.perf_counter() - start}


def worker_audit(data: str, temperature: str) -> dict:
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.report.metrics import summarize

    documents, registry, level = _load(Path(data))
    attacker = TfidfAttacker(top_k=TOP_K, temperature=temperature if temperature == "auto" else float(temperature))
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), top_k=TOP_K)
    start = time.perf_counter()
    result = run_audit(documents, registry, attacker, config)
    level_summary = summarize(result).level(0.9)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "temperature": result.inputs.get("learned", {}).get("temperature", temperature),
            "strata": len(result.strata), "first_guess": level_summary.first_guess_rate,
            "median_set": level_summary.median_set_size, "flagged": level_summary.n_flagged}


def run(worker: str, *args: str, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, __file__, worker, *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="append the table to bench/RESULTS.md")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from cpa_core.io.synthetic import generate_sample_data

    with tempfile.TemporaryDirectory() as folder:
        generate_sample_data(folder, seed=5, n_people=PEOPLE, n_documents=DOCUMENTS)
        best: dict[str, dict] = {}
        for _ in range(REPEATS):  # interleaved: a burst of load hits every pipeline alike
            for name, worker, extra, env in (("floor", "floor", (), SINGLE_THREAD), ("default", "audit", ("auto",), None),
                                             ("fixed", "audit", ("0.1",), None)):
                figures = run(worker, folder, *extra, env=env)
                if name not in best or figures["seconds"] < best[name]["seconds"]:
                    best[name] = figures
    floor = best["floor"]["seconds"]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [f"### A default run against the single-threaded TF-IDF floor ({date.today().isoformat()}, "
             f"{os.cpu_count()} cores, load average {load})", "",
             f"{DOCUMENTS:,} synthetic documents x {PEOPLE:,} profiles, top-K {TOP_K}, release protocol; best of "
             f"{REPEATS} interleaved runs, each in a fresh process.", "",
             "| run | wall | / floor | temperature | strata | first guess | median \\|C\\| (90 %) | flagged |",
             "|---|---|---|---|---|---|---|---|",
             f"| floor: TF-IDF fit, transform, product, top-{TOP_K} (one thread) | {floor:.1f} s | 1.00x | | | | | |"]
    for name, label in (("default", "default audit (temperature auto, strata, linkage)"),
                        ("fixed", "the same audit at temperature 0.1")):
        f = best[name]
        lines.append(f"| {label} | {f['seconds']:.1f} s | {f['seconds'] / floor:.2f}x | {float(f['temperature']):.3g} | "
                     f"{f['strata']} | {100 * f['first_guess']:.1f} % | {f['median_set']:g} | {f['flagged']:,} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.write:
        with (REPO / "bench" / "RESULTS.md").open("a", encoding="utf-8") as handle:
            handle.write("\n" + table)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("floor", "audit"):
        sys.path.insert(0, str(REPO))
        worker = {"floor": worker_floor, "audit": worker_audit}[sys.argv[1]]
        print(json.dumps(worker(*sys.argv[2:])))
    else:
        sys.exit(main())
