"""Benchmark (r): the dense attacker reading whole texts (windows) against its first window, and at 1k-10k.

Real releases (TextWash study 1 from ``../shared/datasets``, built by ``tests/real_releases.py``; left out when
absent): 30 people, each profile 3 (then 10) held-out original descriptions, the release every person's other
anonymised descriptions. The dense attacker with the packaged all-MiniLM-L6-v2, temperature ``auto``, certainty
strata, release protocol, 90 % confidence, once per window pooling (``first``: one embedding per text, what the
model reads of its beginning; ``max``, the default: windows over the whole text, the best pair): first-guess rate,
median and mean certified set, texts sent to the model (windows), wall time of ``run_audit`` with a cold embedding
cache (encoding included), and how many documents change their first guess when the profiles hold 10 descriptions
instead of 3.

Scale: ``generate_sample_data`` with N profiles and N documents (1,000, 2,000, 5,000, 10,000; ``--quick``: 1,000),
every registry field known, top-K 100, temperature ``auto``, release protocol: wall and CPU time of ``run_audit``
(cold cache), texts encoded per second, peak RSS during it, and the TF-IDF attacker in the same run.

Every measurement runs in a fresh subprocess (``python bench/bench_dense_windows.py WORKER ...``, one JSON line on
stdout).

    .venv/bin/python bench/bench_dense_windows.py [--quick] [--write]   # --write puts the section into RESULTS.md
"""

from __future__ import annotations

import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_fusion import worker_generate  # noqa: E402
from bench_tfidf import StepMemory, run_script_worker  # noqa: E402
from results_sections import machine, percent, run_line, script_entry, size, standalone, uptime  # noqa: E402

POOLINGS = ("first", "max")
RELEASES = {"textwash3": "TextWash, 3 descriptions per profile", "textwash10": "TextWash, 10 descriptions per profile"}
CONFIDENCE = 0.9
TOP_K = 100
HEADING = "## (r) Dense attacker: windows over whole texts, and at scale (`bench/bench_dense_windows.py`)"


def _audit(documents, registry, level, attacker, top_k: int | None) -> tuple[dict, object]:
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.report.metrics import summarize

    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), confidences=(CONFIDENCE,), top_k=top_k)
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        result = run_audit(documents, registry, attacker, config)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    summary = summarize(result).level(CONFIDENCE)
    encoded = getattr(attacker, "encoded_texts_", None)
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), "n_documents": len(documents),
            "n_registry": len(registry), "temperature": (result.inputs.get("learned") or {}).get("temperature"),
            "first_guess": summary.first_guess_rate, "median_set": summary.median_set_size,
            "mean_set": summary.mean_set_size, "encoded_texts": encoded,
            "texts_per_second": None if not encoded else encoded / seconds}, result


def _dense(pooling: str, cache: str):
    from cpa_core.attack.attackers.dense import DenseAttacker

    dense = DenseAttacker(window_pooling=pooling, cache_dir=cache)
    if hasattr(dense.encoder, "loaded"):
        dense.encoder.loaded()  # loading the model is a one-off cost of the process, not the audit's
    return dense


def worker_real(release: str, pooling: str, guesses: str) -> dict:
    """One audit of a TextWash release; the first guess of every document is written to ``guesses`` (ids only)."""
    import json

    sys.path.insert(0, str(REPO / "tests"))
    from real_releases import PROFILE, textwash_release

    built = textwash_release(None, 3 if release == "textwash3" else 10)
    if built is None:
        return {"absent": True}
    if release == "textwash3":  # the documents of the 10-description release, so that the rankings compare
        documents, _ = textwash_release(None, 10)
        registry = built[1]
    else:
        documents, registry = built
    with tempfile.TemporaryDirectory(prefix="cpa-bench-embeddings-") as cache:
        dense = _dense(pooling, cache)
        figures, result = _audit(documents, registry, PROFILE, dense, None)
    table = result.test_split.table
    Path(guesses).write_text(json.dumps(dict(zip(table.doc_ids.tolist(), table.candidates[:, 0].tolist()))))
    return {**figures, "windows": dict(dense.windows_)}


def worker_synthetic(data: str, attacker_name: str) -> dict:
    import sklearn.feature_extraction.text  # noqa: F401  (imports are not the audit's cost)

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(Path(data) / "documents.csv"), load_registry(Path(data) / "registry.csv")
    level = KnowledgeLevel("full", tuple(registry.fields), "direct", "every registry field")
    with tempfile.TemporaryDirectory(prefix="cpa-bench-embeddings-") as cache:
        attacker = TfidfAttacker(top_k=TOP_K) if attacker_name == "tfidf" else _dense("max", cache)
        attacker.top_k = TOP_K
        figures, _ = _audit(documents, registry, level, attacker, TOP_K)
    return figures


WORKERS = {"real": worker_real, "generate": worker_generate, "synthetic": worker_synthetic}


def bench_dense_windows(workdir: str | Path, quick: bool = False, log=print) -> dict:
    import json

    workdir = Path(workdir)
    started, load_start = datetime.datetime.now().isoformat(timespec="minutes"), uptime()
    real, changed = {}, {}
    for release, label in RELEASES.items():
        for pooling in POOLINGS:
            log(f"  {label}: dense, window pooling {pooling} ...")
            guesses = workdir / f"guesses-{release}-{pooling}.json"
            figures = run_script_worker(__file__, "real", release, pooling, guesses)
            if figures.get("absent"):
                log(f"  {label}: not in ../shared/datasets, left out")
                break
            real.setdefault(release, {})[pooling] = figures
    for pooling in POOLINGS:
        files = [workdir / f"guesses-{release}-{pooling}.json" for release in RELEASES]
        if all(f.is_file() for f in files):
            three, ten = (json.loads(f.read_text()) for f in files)
            changed[pooling] = (sum(three[d] != ten[d] for d in ten), len(ten))
    scale = []
    for n in (1_000,) if quick else (1_000, 2_000, 5_000, 10_000):
        data = workdir / f"synthetic-{n}"
        log(f"  generating {n:,} profiles / {n:,} documents ...")
        run_script_worker(__file__, "generate", data, n)
        row = {"n": n}
        for name in ("tfidf", "dense"):
            log(f"  {n:,} x {n:,}: {name} ...")
            row[name] = run_script_worker(__file__, "synthetic", data, name)
        scale.append(row)
    return {"started": started, "load": (load_start, uptime()), "real": real, "changed": changed, "scale": scale,
            "quick": quick, "machine": machine()}


def markdown(results: dict) -> str:
    lines = [HEADING + (" (quick smoke run: NOT the reference sizes)" if results.get("quick") else ""), ""]
    add = lines.append
    add(run_line(results))
    add("")
    add(f"TextWash study 1, the dense attacker (packaged all-MiniLM-L6-v2) as a newcomer declares it but for the window "
        f"pooling, {CONFIDENCE * 100:.0f} % confidence, release protocol, cold embedding cache (encoding included). "
        "Both rows of a pooling audit the same 902 documents (those of the 10-description release); texts encoded: "
        "profiles and documents, or their windows.")
    add("")
    add("| profiles | window pooling | texts encoded | first guess | median \\|C\\| | mean \\|C\\| | wall | "
        "texts / s |")
    add("|---|---|---:|---:|---:|---:|---:|---:|")
    for release, by_pooling in results["real"].items():
        for pooling, f in by_pooling.items():
            add(f"| {RELEASES[release]} | `{pooling}` | {f['encoded_texts']:,} | {percent(f['first_guess'])} | "
                f"{size(f['median_set'])} | {f['mean_set']:.1f} | {f['seconds']:.1f} s | {f['texts_per_second']:.1f} |")
    if not results["real"]:
        add("| (no release: ../shared/datasets absent) | | | | | | | |")
    for pooling, (n_changed, n) in results["changed"].items():
        add("")
        add(f"- `{pooling}`: profiles of 10 descriptions instead of 3 change the first guess of {n_changed:,} of the "
            f"{n:,} documents.")
    add("")
    add(f"Synthetic releases (`generate_sample_data`, N profiles and N documents, every registry field known), top-K "
        f"{TOP_K}, temperature `auto`, release protocol, cold embedding cache; `run_audit` in a fresh process; peak RSS "
        "during the audit (reset before it).")
    add("")
    add("| N x N | attacker | wall | CPU | texts / s | peak RSS during the audit | audit's extra RSS | first guess | "
        "median \\|C\\| | wall / TF-IDF |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in results["scale"]:
        base = row["tfidf"]["seconds"]
        for name in ("tfidf", "dense"):
            f = row[name]
            rate = "" if f["texts_per_second"] is None else f"{f['texts_per_second']:.1f}"
            add(f"| {row['n']:,} x {row['n']:,} | `{name}` | {f['seconds']:.1f} s | {f['cpu_seconds']:.1f} s | {rate} | "
                f"{f['step_peak_mib']:,.0f} MiB | {f['step_extra_mib']:,.0f} MiB | {percent(f['first_guess'])} | "
                f"{size(f['median_set'])} | {f['seconds'] / base:.1f}x |")
    add("")
    return "\n".join(lines)


def main(argv=None) -> int:
    return standalone(argv, __doc__.splitlines()[0], "synthetic size 1,000 only", bench_dense_windows, markdown,
                      HEADING, "cpa-bench-dense-")


if __name__ == "__main__":
    sys.exit(script_entry(main, WORKERS))
