"""Run every benchmark and print one report (markdown); ``--write`` also saves it to bench/RESULTS.md.

    .venv/bin/python bench/run.py            # full run (25-45 minutes on 2 cores, most of it (t))
    .venv/bin/python bench/run.py --quick    # small smoke run (2-3 minutes)
    .venv/bin/python bench/run.py --write    # full run, rewrite bench/RESULTS.md
    .venv/bin/python bench/run.py --large    # also sweep the registry up to 20,000 profiles (+1-2 min)

(a) calibrate + certified sets at 0.90/0.95/0.99: cpa_core vs MAPIE vs a plain np.argsort (floor);
(b) re-thresholding 100,000 audited documents (K = 100) at a confidence level not computed yet;
(c) TF-IDF audit of 10,000 documents against 10,000 profiles vs the raw TF-IDF + cosine computation,
    and peak RSS of the attack as the registry grows (each measurement in its own subprocess);
(p) the lexical fusion attacker against TF-IDF on the real releases of ../shared/datasets and at 1k-10k synthetic
    documents x profiles (bench_fusion.py);
(q) importing an outside attacker's scores (`cpa audit --scores`): 1 and 10 million rows, CSV and Parquet, against the
    row-by-row import, and 10,000 x 10,000 end to end (bench_scores_import.py);
(t) the default attacker panel at 10,000 documents x 10,000 profiles, with and without dense retrieval, against one
    TF-IDF audit (cold caches), and the redaction search over the panel against TF-IDF alone (bench_panel.py).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_conformal  # noqa: E402
import bench_fusion  # noqa: E402
import bench_panel  # noqa: E402
import bench_scores_import  # noqa: E402
import bench_tfidf  # noqa: E402
from bench_tfidf import log  # noqa: E402

STANDALONE_MARKER = "<!-- standalone benchmarks below"
"""The start of the comment after which ``--write`` keeps RESULTS.md as it is (the standalone benchmarks' sections)."""
TARGET_MAPIE_SPEEDUP = 20.0
TARGET_FLOOR_RATIO = 1.5
TARGET_RETHRESHOLD_MS = 50.0
TARGET_RAW_RATIO = 1.3


def machine() -> dict:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    memory = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                    break
    except OSError:
        pass
    versions = {}
    for package in ("numpy", "scipy", "pandas", "scikit-learn", "mapie", "cpa-core"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": model, "memory": memory,
            "python": platform.python_version(), "platform": platform.platform(), "versions": versions}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def sec(seconds: float) -> str:
    return f"{seconds:,.2f} s"


def mib(value: float) -> str:
    return f"{value:,.0f} MiB"


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**MISSED**"


def report(info: dict, a: dict, b: dict, c: dict, quick: bool, write: bool, started: float,
           load: tuple, large: bool = False) -> tuple[str, list]:
    lines: list[str] = []
    add = lines.append
    n_rows, n_classes = a["shape"]
    date = datetime.date.today().isoformat()
    add("# Benchmark results" + (" (quick smoke run: NOT the reference sizes)" if quick else ""))
    add("")
    add(f"Date: {date}. Produced by `.venv/bin/python bench/run.py{' --quick' if quick else ''}"
        f"{' --large' if large else ''}{' --write' if write else ''}` "
        f"(total wall time of the run: {time.perf_counter() - started:,.0f} s).")
    add("")
    add("## Machine")
    add("")
    add(f"- CPU: {info['cpu']}, nproc = {info['nproc']}; RAM {info['memory']}")
    add(f"- Python {info['python']} ({info['platform']})")
    add("- " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    add(f"- load average (1 min) at start / end of the run: {load[0]:.2f} / {load[1]:.2f} "
        "(other processes share this machine; timings are best-of or median of repeats)")
    add("")

    targets = []
    # ---------------------------------------------------------------- (a)
    best = a["best"]
    add(f"## (a) Calibrate + certified sets at 0.90 / 0.95 / 0.99 on a {n_rows:,} x {n_classes:,} matrix")
    add("")
    add(f"Rows ~ Dirichlet({a['concentration']}) (seeded), true label of each row drawn from the row; "
        f"{a['n_cal']:,} calibration / {a['n_test']:,} test rows. Wall time is the best of {a['repeats']} runs "
        f"(MAPIE: best of {a['mapie_repeats']}).")
    add("")
    cpu = a["best_cpu"]
    add("| pipeline | wall (best) | CPU (best) | MAPIE / this (wall; CPU) | this / floor (wall; CPU) |")
    add("|---|---:|---:|---:|---:|")

    def row_a(label: str, key: str) -> None:
        add(f"| {label} | {ms(best[key])} | {ms(cpu[key])} | {best['mapie'] / best[key]:.1f}x; "
            f"{cpu['mapie'] / cpu[key]:.1f}x | {best[key] / best['floor']:.2f}x; {cpu[key] / cpu['floor']:.2f}x |")

    row_a(f"floor: `np.argsort(P, axis=1)` of all {n_rows:,} rows", "floor")
    row_a("**cpa_core**: calibration rows `get_score('aps').truth_scores` -> `calibrate`; test rows sorted "
          "weights -> `sorted_scores` -> `set_sizes` x3 -> boolean membership (n_test, M) x3", "core")
    row_a("**`run_audit`'s certificate path** from the attacker's ranked table: rows of the two splits -> "
          "`ScoredSplit.build` x2 -> `calibrate` -> `AuditResult.certificate` x3", "path")
    row_a("the same with the ranking included: `P` -> ranked `CandidateTable` (argsort + gather) -> the path above",
          "objects")
    row_a("MAPIE 1.6 `SplitConformalClassifier(conformity_score='aps', prefit=True, random_state=0)`: "
          "`conformalize` + `predict_set` (3 levels at once)", "mapie")
    add("")
    add("Runs were interleaved (floor, cpa_core, the certificate path, with the ranking, MAPIE, then again), so that a burst of load "
        "from other processes hits every pipeline alike. All wall times (ms): " + "; ".join(
            f"{name} " + ", ".join(f"{t * 1e3:.0f}" for t in times) for name, times in a["times"].items()) + ".")
    add("")
    add("| level | cpa_core coverage | cpa_core set size median / mean | MAPIE coverage | "
        "MAPIE set size median / mean | check: cpa_core coverage >= level - 3 SE |")
    add("|---|---:|---:|---:|---:|---|")
    coverage_ok = True
    for level, row in a["levels"].items():
        coverage_ok &= row["coverage_ok"]
        add(f"| {level:.2f} | {row['coverage']:.4f} | {row['median_size']:.0f} / {row['mean_size']:.1f} | "
            f"{row['mapie_coverage']:.4f} | {row['mapie_median_size']:.0f} / {row['mapie_mean_size']:.1f} | "
            f"{'ok' if row['coverage_ok'] else 'LOW'} (3 SE = {row['tolerance']:.4f}) |")
    add("")
    add("MAPIE settings: prefit estimator whose `predict_proba(X)` returns the matrix rows `X[:, 0]` "
        "(X = row indices); `conformity_score=\"aps\"`, `include_last_label=True` (its default), "
        "`random_state=0`. MAPIE's APS calibration score is randomised (`cumsum - U * p(y)`), cpa_core's "
        "is the deterministic mass with ties entering together; MAPIE returns boolean (n, M, 3) sets, "
        "cpa_core a set size per document (the set is that prefix of the ranked pool).")
    add("")
    for name, suffix in (("cpa_core's functions", ""), ("`run_audit`'s certificate path", "path_")):
        speedup, ratio = a[f"speedup_{suffix}vs_mapie"], a[f"ratio_{suffix}to_floor"]
        cpu_speedup, cpu_ratio = a[f"cpu_speedup_{suffix}vs_mapie"], a[f"cpu_ratio_{suffix}to_floor"]
        targets.append((f"(a) {name}: >= 20x faster than MAPIE", f"{speedup:.1f}x", f"{cpu_speedup:.1f}x",
                        speedup >= TARGET_MAPIE_SPEEDUP, cpu_speedup >= TARGET_MAPIE_SPEEDUP))
        targets.append((f"(a) {name}: <= 1.5x the np.argsort floor", f"{ratio:.2f}x", f"{cpu_ratio:.2f}x",
                        ratio <= TARGET_FLOOR_RATIO, cpu_ratio <= TARGET_FLOOR_RATIO))
    targets.append(("(a) coverage >= level - 3 SE at 0.90/0.95/0.99",
                    " / ".join(f"{r['coverage']:.3f}" for r in a["levels"].values()), "", coverage_ok, None))

    # ---------------------------------------------------------------- (b)
    add(f"## (b) Re-thresholding {b['n_test']:,} test documents (K = {b['k']}) at a new confidence level")
    add("")
    add(f"Synthetic weights (Dirichlet(0.3) over K, sorted), {b['n_cal']:,} calibration documents, "
        f"registry of {b['registry_size']:,} ids. `ScoredSplit.build` of both splits (once): "
        f"{sec(b['build_s'])}. Timed: `AuditResult.certificate(level)` for 9 levels not stored in the "
        "result (each call re-calibrates from the stored scores, then counts the set sizes).")
    add("")
    add("| calibration | wall median | wall min | wall max | CPU median | worst coverage - level |")
    add("|---|---:|---:|---:|---:|---:|")
    for name, label in (("pooled", "one stratum"), ("mondrian", "Mondrian, 3 groups")):
        row = b[name]
        add(f"| {label} | {ms(row['median'])} | {ms(min(row['times']))} | {ms(max(row['times']))} | "
            f"{ms(row['cpu_median'])} | {row['worst_coverage_gap']:+.4f} |")
    add("")
    targets.append((f"(b) re-threshold {b['n_test']:,} docs <= 50 ms (median)",
                    f"{b['pooled']['median'] * 1e3:.1f} ms (Mondrian {b['mondrian']['median'] * 1e3:.1f} ms)",
                    f"{b['pooled']['cpu_median'] * 1e3:.1f} ms (Mondrian {b['mondrian']['cpu_median'] * 1e3:.1f} ms)",
                    b["pooled"]["median"] * 1e3 <= TARGET_RETHRESHOLD_MS,
                    b["pooled"]["cpu_median"] * 1e3 <= TARGET_RETHRESHOLD_MS))

    # ---------------------------------------------------------------- (c)
    audit, raw = c["audit"], c["raw"]
    add(f"## (c) TF-IDF audit: {c['documents']:,} documents vs {c['people']:,} profiles, top_k = {c['top_k']}")
    add("")
    add(f"Data: `generate_sample_data(n_people={c['people']}, n_documents={c['documents']})` "
        f"({sec(c['generate_s'])} to generate, not timed below). Knowledge: every registry field. "
        f"Each run is a fresh subprocess; wall time: the best of {c['repeats']}; memory: the largest. Loading the "
        "CSVs is outside the timed step. The kernel's peak RSS is reset just before the step, so its peak "
        "excludes imports and loading; the process peak includes them.")
    add("")
    add("| step | wall | CPU | RSS before the step | peak RSS during the step | step's extra (peak - before) "
        "| process peak RSS |")
    add("|---|---:|---:|---:|---:|---:|---:|")
    add(f"| `run_audit` (TfidfAttacker(top_k=100): fit, chunked similarities, top-K, softmax; split "
        f"{c['n_cal']:,}/{c['n_test']:,}, APS scores, calibration) | {sec(audit['seconds'])} | "
        f"{sec(c['audit_cpu'])} | "
        f"{mib(audit['rss_before_mib'])} | {mib(audit['step_peak_mib'])} | {mib(audit['step_extra_mib'])} | "
        f"{mib(audit['process_peak_mib'])} |")
    add(f"| raw: `TfidfVectorizer` fit on profiles + transform of documents + `Q @ P.T` "
        f"(fit {sec(raw['fit_s'])}, transform {sec(raw['transform_s'])}, product {sec(raw['product_s'])}) "
        f"| {sec(raw['seconds'])} | {sec(c['raw_cpu'])} | {mib(raw['rss_before_mib'])} | {mib(raw['step_peak_mib'])} | "
        f"{mib(raw['step_extra_mib'])} | {mib(raw['process_peak_mib'])} |")
    add(f"| **ratio audit / raw** | **{c['ratio']:.2f}x** | **{c['cpu_ratio']:.2f}x** | | | | |")
    add("")
    shape = raw["shape"]
    add(f"All audit runs: {', '.join(sec(t) for t in c['audit_times'])}; raw runs: "
        f"{', '.join(sec(t) for t in c['raw_times'])}. Vocabulary: {raw['vocabulary']:,} terms; `Q @ P.T` has "
        f"{raw['nnz']:,} non-zeros of {shape[0] * shape[1]:,} ({raw['nnz'] / (shape[0] * shape[1]):.0%} dense). "
        f"Audit sanity: top-{c['top_k']} miss rate {audit['miss_rate']:.3f}, coverage at 0.90 "
        f"{audit['coverage_090']:.3f}, median set size {audit['median_size_090']:.0f}.")
    add("")
    source = ("the data set above" if c["generate_sweep_s"] is None else
              f"a second `generate_sample_data(n_people={c['sweep_people']}, n_documents={c['sweep_documents']})`")
    add(f"Memory of `TfidfAttacker(top_k={c['top_k']}).attack` on the same {c['sweep_documents']:,} documents "
        f"as the registry grows (registry = the first N profiles of {source}; a fresh subprocess each; the "
        "peak is reset before the attack):")
    add("")
    add("| registry | attack wall | attack CPU | RSS before | peak RSS during the attack | attack's extra | "
        "for scale: a dense docs x registry float64 matrix |")
    add("|---:|---:|---:|---:|---:|---:|---:|")
    for row in c["sweep"]:
        dense = row["n_documents"] * row["n_registry"] * 8 / 2**20
        add(f"| {row['n_registry']:,} | {sec(row['seconds'])} | {sec(row['cpu_seconds'])} | "
            f"{mib(row['rss_before_mib'])} | "
            f"{mib(row['step_peak_mib'])} | {mib(row['step_extra_mib'])} | {mib(dense)} |")
    add("")
    first, largest = c["sweep"][0], c["sweep"][-1]
    slope = ((largest["step_extra_mib"] - first["step_extra_mib"]) * 1024
             / max(1, largest["n_registry"] - first["n_registry"]))
    dense_slope = largest["n_documents"] * 8 / 1024
    add(f"Growth of the attack's extra memory: {slope:,.1f} KiB per added profile (a dense similarity matrix "
        f"would add {dense_slope:,.1f} KiB per profile for {largest['n_documents']:,} documents).")
    add("")
    extra = largest["step_extra_mib"]
    dense = largest["n_documents"] * largest["n_registry"] * 8 / 2**20
    targets.append(("(c) TF-IDF audit <= 1.3x raw TF-IDF + cosine", f"{c['ratio']:.2f}x", f"{c['cpu_ratio']:.2f}x",
                    c["ratio"] <= TARGET_RAW_RATIO, c["cpu_ratio"] <= TARGET_RAW_RATIO))
    targets.append(("(c) memory bounded as the registry grows (attack's extra RSS at the largest registry "
                    "< 1/4 of a dense docs x registry float64 matrix)",
                    f"{mib(extra)} vs {mib(dense)} at {largest['n_registry']:,} profiles", "", extra < dense / 4, None))

    add("## Targets")
    add("")
    if quick:
        add("A quick run uses small sizes: the verdicts below are indicative only; the targets refer to the "
            "full run.")
        add("")
    add("| target | measured (wall) | status (wall) | measured (CPU time) | status (CPU time) |")
    add("|---|---|---|---|---|")
    for name, figure, cpu_figure, ok, cpu_ok in targets:
        add(f"| {name} | {figure} | {verdict(ok)} | {cpu_figure} | {'' if cpu_ok is None else verdict(cpu_ok)} |")
    add("")
    add("The targets are wall-time targets; the CPU-time column (same runs, `time.process_time`) is what a "
        "quiet machine would show for these single-threaded steps, and is the fairer reading when the load "
        "average above exceeds the core count.")
    add("")
    return "\n".join(lines), targets


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every benchmark")
    parser.add_argument("--write", action="store_true", help="rewrite bench/RESULTS.md with this run's figures")
    parser.add_argument("--large", action="store_true",
                        help="extend the registry sweep of (c) to twice the profiles (a second data set; +1-2 min)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    info = machine()
    log("(a) calibrate + certified sets: cpa_core vs MAPIE vs np.argsort ...")
    a = bench_conformal.bench_conformal(quick=args.quick)
    log("(b) re-thresholding at a new confidence level ...")
    b = bench_conformal.bench_rethreshold(quick=args.quick)
    log("(c) TF-IDF audit vs raw TF-IDF + cosine, and the registry sweep ...")
    with tempfile.TemporaryDirectory(prefix="cpa-bench-") as workdir:
        c = bench_tfidf.bench_tfidf(workdir, quick=args.quick, large=args.large, log=log)
        log("(p) the lexical fusion attacker against TF-IDF: real releases, then synthetic 1k-10k ...")
        o = bench_fusion.bench_fusion(workdir, quick=args.quick, log=log)
        log("(q) importing an outside attacker's scores: 1 and 10 million rows, then 10,000 x 10,000 end to end ...")
        q = bench_scores_import.bench_scores_import(workdir, quick=args.quick, log=log)
        log("(t) the default attacker panel against one TF-IDF audit, and the redaction search over it ...")
        t = bench_panel.bench_panel(workdir, quick=args.quick, log=log)
    text, _ = report(info, a, b, c, args.quick, args.write, started, (load_start, os.getloadavg()[0]), args.large)
    text = (text.rstrip() + "\n\n" + bench_fusion.markdown(o) + "\n\n" + bench_scores_import.markdown(q) + "\n\n"
            + bench_panel.markdown(t))
    print(text)
    if args.write:
        results = HERE / "RESULTS.md"
        # sections recorded by the standalone benchmarks (dense, dashboard, LLM) follow the marker: keep them
        previous = results.read_text(encoding="utf-8") if results.exists() else ""
        if previous and STANDALONE_MARKER not in previous:
            raise SystemExit(f"{results}: no line starting with '{STANDALONE_MARKER}'; not rewritten (the sections "
                             "of the standalone benchmarks would be lost)")
        kept = STANDALONE_MARKER + previous.partition(STANDALONE_MARKER)[2] if previous else STANDALONE_MARKER + " -->\n"
        results.write_text(text.rstrip() + "\n\n" + kept, encoding="utf-8")
        log(f"wrote {HERE / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
