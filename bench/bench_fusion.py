"""Benchmark (p): the lexical fusion attacker against the TF-IDF attacker, on the real releases and at scale.

Real releases (from ``../shared/datasets``, built by ``tests/real_releases.py``; a release whose data is absent is
left out), each audited by both attackers as a newcomer declares them (temperature ``auto``, certainty strata,
release protocol) at 90 % confidence: first-guess rate, median certified set, flagged documents, wall time of
``run_audit``:

- TextWash study 1, 30 people, each profile 3 (then 10) held-out original descriptions, the release every person's
  other anonymised descriptions;
- the Blog Authorship slice, 1,000 authors (``blog_release``);
- the TAB test split, 127 cases, each profile the public judgment, the release the case text with the manual
  annotations suppressed (``tab_release``).

``--quick``: TextWash with 3 descriptions per profile and TAB only.

Scale: ``generate_sample_data`` with N profiles and N documents (1,000, 5,000, 10,000; ``--quick``: 1,000 and 2,000),
every registry field known, top-K 100, temperature ``auto``, release protocol: wall and CPU time of ``run_audit`` and
the peak RSS during it (reset before it), both attackers in the same run.

Every measurement runs in a fresh subprocess (``python bench/bench_fusion.py WORKER ...``, one JSON line on stdout).

    .venv/bin/python bench/bench_fusion.py [--quick] [--write]   # --write puts the section into bench/RESULTS.md
"""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_tfidf import StepMemory, real_release_figures, run_script_worker  # noqa: E402
from results_sections import machine, percent, run_line, script_entry, size, standalone, uptime  # noqa: E402

ATTACKERS = ("tfidf", "lexical_fusion")
RELEASES = {
    "textwash3": "TextWash, 3 descriptions per profile",
    "textwash10": "TextWash, 10 descriptions per profile",
    "blog": "Blog Authorship slice",
    "tab": "TAB test cases (public judgment as profile)",
}
QUICK_RELEASES = ("textwash3", "tab")
CONFIDENCE = 0.9
TOP_K = 100
HEADING = "## (p) Lexical fusion attacker against TF-IDF (`bench/bench_fusion.py`)"


def _attacker(name: str):
    """The attacker as a newcomer declares it: every parameter at its default (temperature ``auto``)."""
    from cpa_core.attack.attackers.lexical_fusion import LexicalFusionAttacker
    from cpa_core.attack.attackers.tfidf import TfidfAttacker

    return {"tfidf": TfidfAttacker, "lexical_fusion": LexicalFusionAttacker}[name]()


def _audit(documents, registry, level, attacker_name: str, top_k: int | None) -> dict:
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.report.metrics import summarize

    attacker = _attacker(attacker_name)
    attacker.top_k = top_k
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), confidences=(CONFIDENCE,), top_k=top_k)
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        result = run_audit(documents, registry, attacker, config)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    level_summary = summarize(result).level(CONFIDENCE)
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), "n_documents": len(documents),
            "n_registry": len(registry), "n_labelled": level_summary.n_test,
            "temperature": (result.inputs.get("learned") or {}).get("temperature"),
            "first_guess": level_summary.first_guess_rate, "median_set": level_summary.median_set_size,
            "mean_set": level_summary.mean_set_size, "flagged": level_summary.n_flagged}


def worker_real(release: str, attacker_name: str) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    import sklearn.feature_extraction.text  # noqa: F401  (imports are not the audit's cost)
    from real_releases import PROFILE, blog_release, tab_release, textwash_release

    builders = {"textwash3": lambda: textwash_release(None, 3), "textwash10": lambda: textwash_release(None, 10),
                "blog": blog_release, "tab": tab_release}
    built = builders[release]()
    if built is None:
        return {"absent": True}
    documents, registry = built
    return _audit(documents, registry, PROFILE, attacker_name, None)


def worker_generate(out: str, people: str) -> dict:
    from cpa_core.io.synthetic import generate_sample_data

    start = time.perf_counter()
    generate_sample_data(out, seed=20261127, n_people=int(people), n_documents=int(people))
    return {"seconds": time.perf_counter() - start}


def worker_synthetic(data: str, attacker_name: str) -> dict:
    import sklearn.feature_extraction.text  # noqa: F401

    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(Path(data) / "documents.csv"), load_registry(Path(data) / "registry.csv")
    level = KnowledgeLevel("full", tuple(registry.fields), "direct", "every registry field")
    return _audit(documents, registry, level, attacker_name, TOP_K)


WORKERS = {"real": worker_real, "generate": worker_generate, "synthetic": worker_synthetic}


def bench_fusion(workdir: str | Path, quick: bool = False, log=print) -> dict:
    """Both attackers on every available real release and on synthetic releases of growing size."""
    workdir = Path(workdir)
    started = datetime.datetime.now().isoformat(timespec="minutes")
    load_start = uptime()
    real = real_release_figures(__file__, {release: label for release, label in RELEASES.items()
                                            if not quick or release in QUICK_RELEASES}, ATTACKERS, log)
    sizes = (1_000, 2_000) if quick else (1_000, 5_000, 10_000)
    scale = []
    for n in sizes:
        data = workdir / f"synthetic-{n}"
        log(f"  generating {n:,} profiles / {n:,} documents ...")
        run_script_worker(__file__, "generate", data, n)
        row = {"n": n}
        for name in ATTACKERS:
            log(f"  {n:,} x {n:,}: {name} ...")
            row[name] = run_script_worker(__file__, "synthetic", data, name)
        scale.append(row)
    return {"started": started, "load": (load_start, uptime()), "real": real, "scale": scale, "quick": quick,
            "machine": machine()}






def markdown(results: dict) -> str:
    lines = [_heading(results), ""]
    add = lines.append
    add(run_line(results))
    add("")
    add(f"Real releases, each attacker as a newcomer declares it (temperature `auto`, certainty strata, release "
        f"protocol), {CONFIDENCE * 100:.0f} % confidence; wall time of `run_audit` in a fresh process (index fits included). "
        "First guess: share of labelled documents whose subject is the attacker's top candidate; flagged: documents "
        "whose set is smaller than 11 or whose linkage probability exceeds 1/11.")
    add("")
    add("| release | documents x profiles | attacker | temperature | first guess | median \\|C\\| | mean \\|C\\| | "
        "flagged | wall |")
    add("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for release, by_attacker in results["real"].items():
        for name, f in by_attacker.items():
            add(f"| {RELEASES[release]} | {f['n_documents']:,} x {f['n_registry']:,} | `{name}` | "
                f"{'' if f['temperature'] is None else format(f['temperature'], '.3g')} | {percent(f['first_guess'])} | "
                f"{size(f['median_set'])} | {f['mean_set']:.1f} | {f['flagged']:,} | {f['seconds']:.1f} s |")
    if not results["real"]:
        add("| (no release: ../shared/datasets absent) | | | | | | | | |")
    add("")
    add(f"Synthetic releases (`generate_sample_data`, N profiles and N documents, every registry field known), top-K "
        f"{TOP_K}, temperature `auto`, release protocol; `run_audit` in a fresh process; peak RSS during the audit "
        "(reset before it).")
    add("")
    add("| N x N | attacker | wall | CPU | peak RSS during the audit | audit's extra RSS | first guess | "
        "median \\|C\\| | wall / TF-IDF |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in results["scale"]:
        base = row["tfidf"]["seconds"]
        for name in ATTACKERS:
            f = row[name]
            add(f"| {row['n']:,} x {row['n']:,} | `{name}` | {f['seconds']:.1f} s | {f['cpu_seconds']:.1f} s | "
                f"{f['step_peak_mib']:,.0f} MiB | {f['step_extra_mib']:,.0f} MiB | {percent(f['first_guess'])} | "
                f"{size(f['median_set'])} | {f['seconds'] / base:.2f}x |")
    add("")
    return "\n".join(lines)


def _heading(results: dict) -> str:
    return HEADING + (" (quick smoke run: NOT the reference sizes)" if results.get("quick") else "")


def main(argv=None) -> int:
    return standalone(argv, __doc__.splitlines()[0], "synthetic sizes 1,000 and 2,000 only", bench_fusion, markdown, HEADING, "cpa-bench-fusion-")


if __name__ == "__main__":
    sys.exit(script_entry(main, WORKERS))
