"""Benchmark (s): the learned re-identifier against TF-IDF (and lexical fusion on the real releases): how well it names
the subjects, and its training time and memory.

Real releases (from ``../shared/datasets``, built by ``tests/real_releases.py``; a release whose data is absent is left
out), each audited by every attacker as a newcomer declares it (temperature ``auto``, ridge ``auto``, certainty strata,
release protocol) at 90 % confidence: first guess, median rank of the subject, median and mean certified set, flagged
documents, wall time of ``run_audit``; for the learned attacker, what it trained on (chunks, their length, the penalty
its leave-one-out chose) and the training's time:

- the Blog Authorship slice, 1,000 authors (``blog_release``);
- the TAB test split, 127 cases, each profile the public judgment (``tab_release``);
- TextWash study 1, 30 people, each profile 3 held-out original descriptions.

Scale: ``generate_sample_data`` with N profiles and N documents (1,000 and 10,000; ``--quick``: 1,000 and 2,000),
every registry field known, top-K 100, temperature ``auto``, release protocol, TF-IDF and the learned attacker in the
same run: wall and CPU time and the peak RSS (reset before the step) of the audit; for the learned attacker the
training alone (its model fitted first, inside the measured step) and the audit after it.

Refusal: a registry of 100,000 synthetic profiles (``--quick``: left out): building the learned attacker as the
command line does (``SPEC.build``, this machine's available memory) must raise the one-line ``ConfigError`` before any
training; its time and message.

Every measurement runs in a fresh subprocess (``python bench/bench_learned.py WORKER ...``, one JSON line on stdout).

    .venv/bin/python bench/bench_learned.py [--quick] [--write]   # --write puts the section into bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_tfidf import StepMemory, real_release_figures, run_script_worker  # noqa: E402
from results_sections import (  # noqa: E402
    RESULTS,
    log,
    machine,
    percent,
    run_line,
    script_entry,
    size,
    uptime,
    write_section,
)

REAL_ATTACKERS = ("tfidf", "lexical_fusion", "learned")
SCALE_ATTACKERS = ("tfidf", "learned")
RELEASES = {
    "blog": "Blog Authorship slice",
    "tab": "TAB test cases (public judgment as profile)",
    "textwash3": "TextWash, 3 descriptions per profile",
}
QUICK_RELEASES = ("tab", "textwash3")
CONFIDENCE = 0.9
TOP_K = 100
REFUSED_PEOPLE = 100_000
SEED = 20261127
HEADING = "## (s) Learned re-identifier against TF-IDF and lexical fusion (`bench/bench_learned.py`)"


def _attacker(name: str):
    """The attacker as a newcomer declares it: every parameter at its default (temperature and ridge ``auto``)."""
    from cpa_core.attack.attackers.learned import LearnedAttacker
    from cpa_core.attack.attackers.lexical_fusion import LexicalFusionAttacker
    from cpa_core.attack.attackers.tfidf import TfidfAttacker

    return {"tfidf": TfidfAttacker, "lexical_fusion": LexicalFusionAttacker, "learned": LearnedAttacker}[name]()


def _audit(documents, registry, level, attacker_name: str, top_k: int | None) -> dict:
    import numpy as np

    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.report.metrics import summarize

    attacker = _attacker(attacker_name)
    attacker.top_k = top_k
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), confidences=(CONFIDENCE,), top_k=top_k)
    training = {}
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        if attacker_name == "learned":  # the training alone, then the audit with the trained model
            model = attacker.model(registry, level)
            training = {"train_seconds": time.perf_counter() - start, "train_cpu_seconds": time.process_time() - cpu,
                        "chunks": int(model.owners_.size), "chunk_length": int(model.chunk_length_),
                        "ridge": model.ridge_, "dense_features": int(model.dense_.size)}
        result = run_audit(documents, registry, attacker, config)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    level_summary = summarize(result).level(CONFIDENCE)
    ranks = result.test_split.truth_ranks[result.test_split.truth_ranks > 0]
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), **training, "n_documents": len(documents),
            "n_registry": len(registry), "n_labelled": level_summary.n_test,
            "temperature": (result.inputs.get("learned") or {}).get("temperature"),
            "first_guess": level_summary.first_guess_rate,
            "median_rank": float(np.median(ranks)) if ranks.size else None,
            "median_set": level_summary.median_set_size, "mean_set": level_summary.mean_set_size,
            "flagged": level_summary.n_flagged}


def worker_real(release: str, attacker_name: str) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    import sklearn.feature_extraction.text  # noqa: F401  (imports are not the audit's cost)
    from real_releases import PROFILE, blog_release, tab_release, textwash_release

    builders = {"blog": blog_release, "tab": tab_release, "textwash3": lambda: textwash_release(None, 3)}
    built = builders[release]()
    if built is None:
        return {"absent": True}
    documents, registry = built
    return _audit(documents, registry, PROFILE, attacker_name, None)


def worker_generate(out: str, people: str, documents: str) -> dict:
    from cpa_core.io.synthetic import generate_sample_data

    start = time.perf_counter()
    generate_sample_data(out, seed=SEED, n_people=int(people), n_documents=int(documents))
    return {"seconds": time.perf_counter() - start}


def _synthetic(data: str):
    import sklearn.feature_extraction.text  # noqa: F401

    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(Path(data) / "documents.csv"), load_registry(Path(data) / "registry.csv")
    return documents, registry, KnowledgeLevel("full", tuple(registry.fields), "direct", "every registry field")


def worker_synthetic(data: str, attacker_name: str) -> dict:
    documents, registry, level = _synthetic(data)
    return _audit(documents, registry, level, attacker_name, TOP_K)


def worker_refusal(data: str) -> dict:
    """Build the learned attacker on a registry too large for this machine, as the command line does."""
    from cpa_core.attack.attackers.learned import SPEC
    from cpa_core.attack.budget import available_memory
    from cpa_core.attack.spec import BuildContext
    from cpa_core.common.errors import ConfigError

    _, registry, level = _synthetic(data)
    start = time.perf_counter()
    try:
        SPEC.build(SPEC.resolve({}), BuildContext(registry, level, top_k=TOP_K))
        message = None
    except ConfigError as error:
        message = str(error)
    return {"seconds": time.perf_counter() - start, "message": message, "n_registry": len(registry),
            "available_gib": (available_memory() or 0) / 2**30}


WORKERS = {"real": worker_real, "generate": worker_generate, "synthetic": worker_synthetic,
           "refusal": worker_refusal}


def bench_learned(workdir: str | Path, quick: bool = False, log=print) -> dict:
    """Every attacker on every available real release, TF-IDF and the learned attacker at scale, and the refusal."""
    workdir = Path(workdir)
    started = datetime.datetime.now().isoformat(timespec="minutes")
    load_start = uptime()
    real = real_release_figures(__file__, {release: label for release, label in RELEASES.items()
                                            if not quick or release in QUICK_RELEASES}, REAL_ATTACKERS, log)
    scale = []
    for n in (1_000, 2_000) if quick else (1_000, 10_000):
        data = workdir / f"synthetic-{n}"
        log(f"  generating {n:,} profiles / {n:,} documents ...")
        run_script_worker(__file__, "generate", data, n, n)
        row = {"n": n}
        for name in SCALE_ATTACKERS:
            log(f"  {n:,} x {n:,}: {name} ...")
            row[name] = run_script_worker(__file__, "synthetic", data, name)
        scale.append(row)
    refusal = None
    if not quick:
        data = workdir / f"synthetic-{REFUSED_PEOPLE}"
        log(f"  generating {REFUSED_PEOPLE:,} profiles ...")
        run_script_worker(__file__, "generate", data, REFUSED_PEOPLE, 100)
        log(f"  building the learned attacker on {REFUSED_PEOPLE:,} profiles ...")
        refusal = run_script_worker(__file__, "refusal", data)
    return {"started": started, "load": (load_start, uptime()), "real": real, "scale": scale, "refusal": refusal,
            "quick": quick, "machine": machine()}


def _seconds(value) -> str:
    return "" if value is None else f"{value:.1f} s"


def markdown(results: dict) -> str:
    lines = [HEADING + (" (quick smoke run: NOT the reference sizes)" if results.get("quick") else ""), ""]
    add = lines.append
    add(run_line(results))
    add("")
    add(f"Real releases, each attacker as a newcomer declares it (temperature `auto`; `learned`: ridge `auto`; "
        f"certainty strata, release protocol), {CONFIDENCE * 100:.0f} % confidence, the whole registry as the pool; "
        "wall time of `run_audit` in a fresh process (index fits and training included). First guess: share of "
        "labelled documents "
        "whose subject is the attacker's top candidate; median rank: of the subject among the candidates (1 = first); "
        "flagged: documents whose set is smaller than 11 or whose linkage probability exceeds 1/11.")
    add("")
    add("| release | documents x profiles | attacker | first guess | median rank | median \\|C\\| | mean \\|C\\| | "
        "flagged | temperature | wall | of which training |")
    add("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for release, by_attacker in results["real"].items():
        for name, f in by_attacker.items():
            add(f"| {RELEASES[release]} | {f['n_documents']:,} x {f['n_registry']:,} | `{name}` | "
                f"{percent(f['first_guess'])} | {size(f['median_rank'])} | {size(f['median_set'])} | "
                f"{f['mean_set']:.1f} | {f['flagged']:,} | "
                f"{'' if f['temperature'] is None else format(f['temperature'], '.3g')} | {f['seconds']:.1f} s | "
                f"{_seconds(f.get('train_seconds'))} |")
    if not results["real"]:
        add("| (no release: ../shared/datasets absent) | | | | | | | | | | |")
    trained = [(RELEASES[r], by["learned"]) for r, by in results["real"].items() if "learned" in by]
    if trained:
        add("")
        add("What the learned attacker trained on: " + "; ".join(
            f"{label}, {f['chunks']:,} chunks of {f['chunk_length']} words, ridge {f['ridge']:.3g}"
            for label, f in trained) + ".")
    add("")
    add(f"Synthetic releases (`generate_sample_data`, N profiles and N documents, every registry field known), top-K "
        f"{TOP_K}, temperature `auto`, release protocol; `run_audit` in a fresh process, for `learned` its training "
        "first (inside the measured step); peak RSS during the step (reset before it).")
    add("")
    add("| N x N | attacker | wall | CPU | training | training CPU | peak RSS during the step | step's extra RSS | "
        "first guess | median \\|C\\| | wall / TF-IDF |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in results["scale"]:
        base = row["tfidf"]["seconds"]
        for name in SCALE_ATTACKERS:
            f = row[name]
            add(f"| {row['n']:,} x {row['n']:,} | `{name}` | {f['seconds']:.1f} s | {f['cpu_seconds']:.1f} s | "
                f"{_seconds(f.get('train_seconds'))} | {_seconds(f.get('train_cpu_seconds'))} | "
                f"{f['step_peak_mib']:,.0f} MiB | {f['step_extra_mib']:,.0f} MiB | {percent(f['first_guess'])} | "
                f"{size(f['median_set'])} | {f['seconds'] / base:.2f}x |")
    refusal = results.get("refusal")
    if refusal:
        add("")
        add(f"Refusal: building `learned` on {refusal['n_registry']:,} synthetic profiles with "
            f"{refusal['available_gib']:.1f} GiB available took {refusal['seconds']:.2f} s and "
            + (f"raised, before any training: `{refusal['message']}`" if refusal["message"] else "**did not refuse**"))
    add("")
    return "\n".join(lines)


def record(text: str, results_file: Path = RESULTS) -> None:
    """This benchmark's section of RESULTS.md: replaced where it is, else appended at the end."""
    if any(line.startswith(HEADING) for line in results_file.read_text(encoding="utf-8").splitlines()):
        write_section(text, HEADING, results_file)
    else:
        with results_file.open("a", encoding="utf-8") as out:
            out.write("\n" + text.rstrip() + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="real releases TAB and TextWash, synthetic sizes 1,000 "
                                                             "and 2,000, no refusal")
    parser.add_argument("--write", action="store_true", help="put the section into bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cpa-bench-learned-") as workdir:
        text = markdown(bench_learned(workdir, quick=args.quick, log=log))
    print(text)
    if args.write:
        record(text)
        log(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(script_entry(main, WORKERS))
