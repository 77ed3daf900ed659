"""Benchmark (c): the TF-IDF audit against the raw TF-IDF + cosine computation, and peak memory as
the registry grows.

Every measured step runs in a fresh subprocess (``python bench/bench_tfidf.py WORKER ...``) so that its
peak RSS (``VmHWM``) is its own. A worker prints one JSON line on stdout.

Workers
-------
generate  DIR PEOPLE DOCUMENTS SEED [PREFIX ...]
    ``generate_sample_data`` into DIR; also writes ``registry_<N>.csv``, the first N profiles, per PREFIX.
audit     DIR TOP_K N_CAL N_TEST
    ``run_audit`` of every document with the TF-IDF attacker (full knowledge: every registry field).
raw       DIR
    sklearn's ``TfidfVectorizer`` (the attacker's settings, cloned from ``TfidfIndex``) fit on the
    profile texts, transform of the documents, and the sparse product ``Q @ P.T``; no softmax, top-K or calibration.
attack    DIR REGISTRY_CSV TOP_K
    ``TfidfAttacker.attack`` of every document against the given registry file.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def _status_mib(key: str) -> float:
    """A ``/proc/self/status`` memory figure (``VmRSS``, ``VmHWM``) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


def _peak_rss_mib() -> float:
    """Peak RSS of this program: ``VmHWM`` (``ru_maxrss`` would also count the parent's RSS at fork,
    since Linux keeps it across ``execve``)."""
    try:
        return _status_mib("VmHWM")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class StepMemory:
    """RSS before a step and the peak RSS during it.

    The kernel's peak (``VmHWM``) is reset to the current RSS before the step (``echo 5 >
    /proc/self/clear_refs``, Linux >= 4.0), so the peak is the step's own, not loading's or import's.
    Where the reset is refused, the step's peak is the program's peak so far (an upper bound).
    """

    def __enter__(self):
        self.before = _status_mib("VmRSS")
        self.loading_peak = _peak_rss_mib()  # imports and loading
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.reset = True
        except OSError:
            self.reset = False
        return self

    def __exit__(self, *exc):
        self.peak = _peak_rss_mib()
        return False

    def figures(self) -> dict:
        return {"rss_before_mib": self.before, "step_peak_mib": self.peak, "step_extra_mib": self.peak - self.before,
                "peak_reset": self.reset, "process_peak_mib": max(self.loading_peak, self.peak)}


def _load(data: Path, registry_file: str = "registry.csv"):
    # imports are a one-off cost of the process, not of an audit: done here, outside every timed step
    import sklearn.feature_extraction.text  # noqa: F401  (cpa_core may import it lazily)

    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry

    documents = load_documents(data / "documents.csv")
    registry = load_registry(data / registry_file)
    level = KnowledgeLevel("full", tuple(registry.fields), "direct", "every registry field")
    return documents, registry, level


def worker_generate(out: str, people: str, documents: str, seed: str, *prefixes: str) -> dict:
    import pandas as pd

    from cpa_core.io.synthetic import generate_sample_data

    start = time.perf_counter()
    paths = generate_sample_data(out, seed=int(seed), n_people=int(people), n_documents=int(documents))
    seconds = time.perf_counter() - start
    if prefixes:
        frame = pd.read_csv(paths["registry"], dtype=str, keep_default_na=False)
        for n in prefixes:
            frame.head(int(n)).to_csv(Path(out) / f"registry_{int(n)}.csv", index=False, lineterminator="\n")
    return {"seconds": seconds}


def worker_audit(data: str, top_k: str, n_cal: str, n_test: str) -> dict:
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit

    documents, registry, level = _load(Path(data))
    attacker = TfidfAttacker(top_k=int(top_k), temperature=1.0)  # a fixed T: auto would add its own passes
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), n_cal=int(n_cal), n_test=int(n_test),
                         top_k=int(top_k), protocol="split")
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        result = run_audit(documents, registry, attacker, config)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    certificate = result.certificate(0.90)
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), "n_documents": len(documents),
            "n_registry": len(registry),
            "miss_rate": float(1 - result.test_split.in_pool.mean()),
            "coverage_090": float(certificate.covered.mean()),
            "median_size_090": float(sorted(certificate.set_sizes)[len(certificate.set_sizes) // 2])}


def worker_raw(data: str) -> dict:
    from sklearn.base import clone

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.attack.tfidf_index import TfidfIndex
    from cpa_core.io.knowledge import profile_texts

    documents, registry, level = _load(Path(data))
    profiles, texts = profile_texts(registry, level), documents.frame["text"].tolist()
    defaults = TfidfAttacker()  # the sklearn TfidfVectorizer with exactly the attacker's settings
    settings = TfidfIndex(defaults.max_features, defaults.ngram_max, defaults.min_df).vectorizer
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        vectorizer = clone(settings)
        P = vectorizer.fit_transform(profiles)
        fitted = time.perf_counter()
        Q = vectorizer.transform(texts)
        transformed = time.perf_counter()
        S = Q @ P.T
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, "fit_s": fitted - start,
            "transform_s": transformed - fitted,
            "product_s": start + seconds - transformed, **memory.figures(), "nnz": int(S.nnz),
            "shape": list(S.shape), "vocabulary": len(vectorizer.vocabulary_),
            "vectorizer": {k: str(v) for k, v in sorted(settings.get_params().items())
                           if k in ("max_features", "ngram_range", "min_df", "sublinear_tf", "strip_accents", "dtype")}}


def timed_attack(data: str, registry_file: str, top_k: str, **params) -> tuple[dict, object]:
    """``TfidfAttacker(top_k, temperature=1.0, **params).attack`` of every document of ``data`` against its
    ``registry_file``, timed and measured: the figures (a worker's answer) and the candidate table."""
    from cpa_core.attack.attackers.tfidf import TfidfAttacker

    documents, registry, level = _load(Path(data), registry_file)
    attacker = TfidfAttacker(top_k=int(top_k), temperature=1.0, **params)  # a fixed T: auto would add its own passes
    frame = documents.frame
    doc_ids, texts = frame["doc_id"].tolist(), frame["text"].tolist()
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        table = attacker.attack(doc_ids, texts, registry, level)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), "n_documents": len(documents),
            "n_registry": len(registry), "width": table.width}, table


def worker_attack(data: str, registry_file: str, top_k: str) -> dict:
    return timed_attack(data, registry_file, top_k)[0]


WORKERS = {"generate": worker_generate, "audit": worker_audit, "raw": worker_raw, "attack": worker_attack}


def log(message: str) -> None:
    """Progress of a benchmark, on stderr (stdout carries a worker's JSON answer or a benchmark's report)."""
    print(message, file=sys.stderr, flush=True)


def run_worker(*args) -> dict:
    """Run a worker of this file in a fresh interpreter and return its JSON answer."""
    return run_script_worker(__file__, *args)


def run_script_worker(script: str, *args) -> dict:
    """Run a worker of a benchmark ``script`` (``script WORKER ARGS...``) in a fresh interpreter; its JSON answer."""
    command = [sys.executable, str(Path(script).resolve()), *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark worker {args[0]} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def real_release_figures(script: str, releases: dict[str, str], attackers, log=print) -> dict:
    """Each attacker on each real release (``{release: label}``), every run in the ``real`` worker of ``script``:
    ``{release: {attacker: figures}}``; a release absent from ../shared/datasets is left out, and said."""
    real = {}
    for release, label in releases.items():
        for name in attackers:
            log(f"  {label}: {name} ...")
            figures = run_script_worker(script, "real", release, name)
            if figures.get("absent"):
                log(f"  {label}: not in ../shared/datasets, left out")
                break
            real.setdefault(release, {})[name] = figures
    return real


def bench_tfidf(workdir: str | Path, quick: bool = False, large: bool = False, log=print) -> dict:
    """(c): audit vs raw on n_people x n_documents, and a registry-size sweep of the attack.

    The sweep uses the first N profiles of the main data set (the documents stay the same); with
    ``large`` it uses a second data set with twice the profiles, up to that size.
    """
    workdir = Path(workdir)
    top_k = 100
    people, docs, repeats = (1_000, 1_000, 1) if quick else (10_000, 10_000, 2)
    sweep = [people // 4, people // 2, people] + ([2 * people] if large else [])
    n_cal = docs // 5
    main = workdir / "main"

    log(f"  generating {people} profiles / {docs} documents ...")
    gen_main = run_worker("generate", main, people, docs, 20261122, *([] if large else sweep))
    grow, sweep_people, gen_sweep = main, people, None
    if large:
        grow, sweep_people = workdir / "sweep", 2 * people
        log(f"  generating {sweep_people} profiles / {docs} documents for the registry sweep ...")
        gen_sweep = run_worker("generate", grow, sweep_people, docs, 20261123, *sweep)

    audits, raws = [], []
    for i in range(repeats):
        log(f"  audit run {i + 1}/{repeats} ...")
        audits.append(run_worker("audit", main, top_k, n_cal, docs - n_cal))
        log(f"  raw TF-IDF + cosine run {i + 1}/{repeats} ...")
        raws.append(run_worker("raw", main))
    audit = min(audits, key=lambda r: r["seconds"])
    raw = min(raws, key=lambda r: r["seconds"])
    for best, runs in ((audit, audits), (raw, raws)):  # memory: the largest of the runs
        for key in ("step_peak_mib", "step_extra_mib", "process_peak_mib"):
            best[key] = max(r[key] for r in runs)

    growth = []
    for n in sweep:
        log(f"  attack against {n} profiles ...")
        growth.append(run_worker("attack", grow, f"registry_{n}.csv", top_k))
    return {
        "people": people, "documents": docs, "top_k": top_k, "n_cal": n_cal, "n_test": docs - n_cal,
        "repeats": repeats, "generate_s": gen_main["seconds"],
        "generate_sweep_s": None if gen_sweep is None else gen_sweep["seconds"], "sweep_people": sweep_people,
        "audit": audit, "raw": raw, "audit_times": [r["seconds"] for r in audits],
        "raw_times": [r["seconds"] for r in raws], "ratio": audit["seconds"] / raw["seconds"],
        "cpu_ratio": min(r["cpu_seconds"] for r in audits) / min(r["cpu_seconds"] for r in raws),
        "audit_cpu": min(r["cpu_seconds"] for r in audits), "raw_cpu": min(r["cpu_seconds"] for r in raws),
        "sweep": growth, "sweep_documents": docs,
    }


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in WORKERS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(WORKERS)}}} ARGS...  (see the module docstring)")
    print(json.dumps(WORKERS[sys.argv[1]](*sys.argv[2:])))
