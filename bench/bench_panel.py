"""Benchmark (t): the default attacker panel against one TF-IDF audit at 10,000 documents x 10,000 profiles, and the
redaction search over the panel against the search over TF-IDF alone.

Data: ``generate_sample_data`` with N profiles and N documents (N = 10,000; ``--quick``: 200), read as ``cpa audit``
reads it with no configuration file; every attacker declared as a newcomer gets it with nothing declared
(``declare_audit`` of an empty project: every registry field known, temperature ``auto``, no top-K shortlist,
certainty strata, release protocol, the default policy at 90 %), as ``cpa audit`` declares the members of its default
panel. In the same run, each in a fresh process with a fresh, empty cache folder (``CPA_CACHE_DIR``: the dense
attacker's embeddings are computed, not read):

1. the single TF-IDF audit (``run_audit``);
2. the default panel without dense retrieval (``default_panel(N, N, dense_present=False)``: tfidf, lexical_fusion,
   learned), declared then audited (``audit_panel``), each member timed with its peak RSS (reset before the member);
3. the default panel with dense retrieval (the packaged model; left out where it is not installed), the same way;
4. for comparison, 1. and 2. again with a top-K 100 shortlist declared (``[audit] top_k = 100``, as benchmarks (c),
   (p) and (s) run), 2. with its searches.

Redaction search (``suggest_redactions``, the greedy search of ``cpa redact``, placeholder strategy) on the first
1,500 documents of the release (``--quick``: 40) that the TF-IDF member flags (hence the panel too), timed with its
peak RSS: in the process of 2., over TF-IDF alone (its member's audit) then over the panel; in the process of 3.,
over the panel with dense retrieval on the first 100 of them (``--quick``: 3) and, for comparison, over the same
panel without it on those 100 (the dense attacker encodes every text each try makes: a search over 1,500 documents
with it would take about half an hour on this machine); in the process of 4., over TF-IDF alone and over the
panel, on the same 1,500.

Targets: the full panel within 8 minutes, the panel without dense within 90 s, the search over the panel
for 1,500 flagged documents within 5 minutes, on this 2-core machine with cold caches.

Every measurement runs in a fresh subprocess (``python bench/bench_panel.py WORKER ...``, one JSON line on stdout).

    .venv/bin/python bench/bench_panel.py [--quick] [--write]   # --write puts the section into bench/RESULTS.md
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_tfidf import StepMemory, run_script_worker  # noqa: E402
from results_sections import machine, percent, run_line, script_entry, standalone, uptime  # noqa: E402

SEED = 20261127
SIZES = {False: 10_000, True: 200}
SEARCHED = {False: 1_500, True: 40}
DENSE_SEARCHED = {False: 100, True: 3}
SHORTLIST = 100
"""The top-K of the declared-shortlist rows (the default is none: every profile a candidate)."""
TARGET_PANEL_S = 8 * 60
TARGET_LEXICAL_S = 90
TARGET_SEARCH_S = 5 * 60
HEADING = "## (t) The default attacker panel, and the redaction search over it (`bench/bench_panel.py`)"


def worker_generate(out: str, n: str) -> dict:
    from cpa_core.io.synthetic import generate_sample_data

    start = time.perf_counter()
    generate_sample_data(out, seed=SEED, n_people=int(n), n_documents=int(n))
    return {"seconds": time.perf_counter() - start}


def _load(data: str, cache: str):
    """The release as ``cpa audit`` reads it without a configuration file, and this process's cache folder."""
    from cpa_core.common.cache_dirs import ENV_VAR

    os.environ[ENV_VAR] = cache
    Path(cache).mkdir(parents=True, exist_ok=True)
    import sklearn.feature_extraction.text  # noqa: F401  (imports are not the audit's cost)

    from cpa_core.audit.project import ProjectConfig

    project = ProjectConfig()
    documents = project.load_documents(Path(data) / "documents.csv")
    registry = project.load_registry(Path(data) / "registry.csv")
    return project, documents, registry


def _cache_mib(cache: str) -> float:
    return sum(p.stat().st_size for p in Path(cache).rglob("*") if p.is_file()) / 2**20


def _figures(result) -> dict:
    """An audit's flags and first guess at its policy's level."""
    import numpy as np

    config = result.config
    certificate = result.certificate(config.policy_confidence)
    labelled = result.test_split.labelled
    return {"flagged": int(certificate.flags(config.policy).sum()), "documents": len(certificate.set_sizes),
            "first_guess": float(result.first_guess_right[labelled].mean()) if labelled.any() else None,
            "median_set": float(np.median(certificate.set_sizes))}


def _overrides(top_k: str) -> dict:
    """``[audit]`` as declared: nothing (``none``), or a top-K shortlist."""
    return {} if top_k == "none" else {"top_k": int(top_k)}


def worker_single(data: str, cache: str, top_k: str) -> dict:
    """The single TF-IDF audit, declared as a newcomer gets it (``top_k``: ``none``, or a shortlist declared)."""
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import declare_audit

    project, documents, registry = _load(data, cache)
    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        config, attacker = declare_audit(project, registry, attacker="tfidf", overrides=_overrides(top_k),
                                         documents=documents)
        result = run_audit(documents, registry, attacker, config)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), **_figures(result),
            "n_documents": len(documents), "n_registry": len(registry), "top_k": config.top_k,
            "protocol": config.protocol, "confidence": float(config.policy_confidence)}


def _search(result, attackers, registry, texts, doc_ids) -> dict:
    """The redaction search of ``doc_ids``, timed, with its peak RSS."""
    from cpa_core.redaction.suggestions import WITHHOLD, suggest_redactions

    with StepMemory() as memory:
        start, cpu = time.perf_counter(), time.process_time()
        found = suggest_redactions(result, attackers, registry, texts, doc_ids=doc_ids)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, **memory.figures(), "documents": len(found),
            "acceptable": sum(s.action != WITHHOLD for s in found), "edits": sum(len(s.edits) for s in found)}


def worker_panel(data: str, cache: str, dense: str, top_k: str, searched: str, dense_searched: str) -> dict:
    """The default panel for the release's size, declared and audited member by member (each timed, its peak RSS
    reset before it), then the redaction searches."""
    from cpa_core.attack.model_store import packaged_model_zip
    from cpa_core.audit.panel import PanelResult, audit_panel, default_panel
    from cpa_core.audit.project import declare_audit

    with_dense = dense == "1"
    if with_dense and packaged_model_zip() is None:
        return {"absent": "the packaged sentence-embedding model is not installed"}
    project, documents, registry = _load(data, cache)
    names = list(default_panel(len(documents), len(registry), dense_present=with_dense))
    members, open_steps = [], {}

    def progress(i: int, name: str):
        memory = StepMemory().__enter__()
        open_steps[i] = (name, memory, time.perf_counter(), time.process_time())
        return None

    def finish(result, attacker):
        name, memory, start, cpu = open_steps.pop(len(members))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        memory.__exit__(None, None, None)
        members.append({"attacker": name, "seconds": seconds, "cpu_seconds": cpu, **memory.figures(),
                        **_figures(result)})
        return result

    with StepMemory() as declaring:
        start, cpu = time.perf_counter(), time.process_time()
        declared = [declare_audit(project, registry, attacker=name, overrides=_overrides(top_k), documents=documents)
                    for name in names]
        declare_s, declare_cpu = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    panel = audit_panel(documents, registry, declared, progress, finish=finish)
    audit_s, audit_cpu = time.perf_counter() - start, time.process_time() - cpu
    config = panel.config
    certificate = panel.certificate(config.policy_confidence)
    out = {"attackers": names, "declare_seconds": declare_s, "declare_cpu_seconds": declare_cpu,
           "declare_peak_mib": declaring.figures()["step_peak_mib"], "audit_seconds": audit_s,
           "audit_cpu_seconds": audit_cpu, "seconds": declare_s + audit_s, "cpu_seconds": declare_cpu + audit_cpu,
           "members": members, "peak_mib": max([declaring.figures()["step_peak_mib"]]
                                               + [m["step_peak_mib"] for m in members]),
           "flagged": int(certificate.flags(config.policy).sum()), "documents": len(certificate),
           "cache_mib": _cache_mib(cache)}

    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    tfidf = panel.member("tfidf").with_peers(())  # TF-IDF as audited alone: its linkage reads no peer
    tfidf_cert = tfidf.certificate(config.policy_confidence)
    flagged = [str(d) for d in tfidf_cert.split.table.doc_ids[tfidf_cert.flags(config.policy)]]
    attackers = [attacker for _, attacker in declared]
    out["tfidf_flagged"] = len(flagged)
    if not with_dense:
        ids = flagged[:int(searched)]
        out["search_tfidf"] = _search(tfidf, attackers[names.index("tfidf")], registry, texts, ids)
        out["search_panel"] = _search(panel, attackers, registry, texts, ids)
    else:
        ids = flagged[:int(dense_searched)]
        out["search_dense_panel"] = _search(panel, attackers, registry, texts, ids)
        lexical = [i for i, name in enumerate(names) if name != "dense"]
        without = PanelResult(tuple(panel.members[i] for i in lexical))
        out["search_without_dense"] = _search(without, [attackers[i] for i in lexical], registry, texts, ids)
    return out


WORKERS = {"generate": worker_generate, "single": worker_single, "panel": worker_panel}


def bench_panel(workdir: str | Path, quick: bool = False, log=print) -> dict:
    """The single TF-IDF audit, the default panel without and with dense retrieval, and the redaction searches, on
    one synthetic release."""
    workdir = Path(workdir)
    started = datetime.datetime.now().isoformat(timespec="minutes")
    load_start = uptime()
    n = SIZES[quick]
    data = workdir / f"synthetic-{n}"
    log(f"  generating {n:,} profiles / {n:,} documents ...")
    generated = run_script_worker(__file__, "generate", data, n)
    log(f"  {n:,} x {n:,}: the single TF-IDF audit ...")
    single = run_script_worker(__file__, "single", data, workdir / "cache-single", "none")
    log(f"  {n:,} x {n:,}: the default panel without dense retrieval, then the searches of "
        f"{SEARCHED[quick]:,} flagged documents (TF-IDF alone, the panel) ...")
    lexical = run_script_worker(__file__, "panel", data, workdir / "cache-lexical", 0, "none", SEARCHED[quick],
                                DENSE_SEARCHED[quick])
    log(f"  {n:,} x {n:,}: the default panel with dense retrieval, then the searches of {DENSE_SEARCHED[quick]:,} "
        "flagged documents (with and without dense retrieval) ...")
    full = run_script_worker(__file__, "panel", data, workdir / "cache-full", 1, "none", SEARCHED[quick],
                             DENSE_SEARCHED[quick])
    log(f"  {n:,} x {n:,}, top-K {SHORTLIST} declared: the single TF-IDF audit, the panel without dense retrieval and "
        "its searches ...")
    single_top = run_script_worker(__file__, "single", data, workdir / "cache-single-top", SHORTLIST)
    lexical_top = run_script_worker(__file__, "panel", data, workdir / "cache-lexical-top", 0, SHORTLIST,
                                    SEARCHED[quick], DENSE_SEARCHED[quick])
    return {"started": started, "load": (load_start, uptime()), "machine": machine(), "quick": quick, "n": n,
            "generate_seconds": generated["seconds"], "single": single, "lexical": lexical,
            "full": None if full.get("absent") else full, "absent": full.get("absent"), "single_top": single_top,
            "lexical_top": lexical_top, "shortlist": SHORTLIST,
            "searched": SEARCHED[quick], "dense_searched": DENSE_SEARCHED[quick]}


def _s(value: float) -> str:
    return f"{value:,.1f} s"


def _mib(value: float) -> str:
    return f"{value:,.0f} MiB"


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _dominant(panel: dict) -> str:
    slowest = max(panel["members"], key=lambda m: m["seconds"])
    return (f"`{slowest['attacker']}`, {_s(slowest['seconds'])} "
            f"({100 * slowest['seconds'] / panel['seconds']:.0f} % of the panel)")


def targets(results: dict) -> list[tuple[str, str, str, bool]]:
    """Each target (the panels as declared by default): what it asks, the wall and CPU figures, whether
    the wall time meets it."""
    rows = []
    n, full, lexical = results["n"], results["full"], results["lexical"]
    if full is not None:
        rows.append((f"the default panel ({', '.join(full['attackers'])}), {n:,} x {n:,}, cold caches, <= 8 min",
                     f"{_s(full['seconds'])} ({full['seconds'] / 60:.1f} min); slowest member {_dominant(full)}",
                     _s(full["cpu_seconds"]), full["seconds"] <= TARGET_PANEL_S))
    rows.append((f"the default panel without dense retrieval ({', '.join(lexical['attackers'])}), {n:,} x {n:,}, "
                 "<= 90 s", f"{_s(lexical['seconds'])}; slowest member {_dominant(lexical)}",
                 _s(lexical["cpu_seconds"]), lexical["seconds"] <= TARGET_LEXICAL_S))
    search = lexical["search_panel"]
    rows.append((f"the redaction search over that panel, {search['documents']:,} flagged documents, <= 5 min",
                 _s(search["seconds"]), _s(search["cpu_seconds"]), search["seconds"] <= TARGET_SEARCH_S))
    return rows


def _audit_rows(add, label: str, figures: dict) -> None:
    """One audit's rows: a single audit's, or a panel's total, its declaring and each member."""
    if "members" not in figures:
        add(f"| {label} | `tfidf` | **{_s(figures['seconds'])}** | {_s(figures['cpu_seconds'])} | "
            f"{_mib(figures['rss_before_mib'])} | {_mib(figures['step_peak_mib'])} | "
            f"{_mib(figures['step_extra_mib'])} | {figures['flagged']:,} of {figures['documents']:,} | "
            f"{percent(figures['first_guess'])} | {figures['median_set']:g} |")
        return
    add(f"| **{label}** | {', '.join(figures['attackers'])} | **{_s(figures['seconds'])}** | "
        f"{_s(figures['cpu_seconds'])} | | {_mib(figures['peak_mib'])} | | {figures['flagged']:,} of "
        f"{figures['documents']:,} (any member) | | |")
    add(f"| | declaring the members | {_s(figures['declare_seconds'])} | {_s(figures['declare_cpu_seconds'])} | | "
        f"{_mib(figures['declare_peak_mib'])} | | | | |")
    for m in figures["members"]:
        add(f"| | `{m['attacker']}` | {_s(m['seconds'])} | {_s(m['cpu_seconds'])} | {_mib(m['rss_before_mib'])} | "
            f"{_mib(m['step_peak_mib'])} | {_mib(m['step_extra_mib'])} | {m['flagged']:,} | "
            f"{percent(m['first_guess'])} | {m['median_set']:g} |")


def _names(names) -> str:
    return ", ".join(f"`{name}`" for name in names)


def markdown(results: dict) -> str:
    quick = results.get("quick")
    n, k = results["n"], results["shortlist"]
    lines = [HEADING + (" (quick smoke run: NOT the reference sizes)" if quick else ""), ""]
    add = lines.append
    add(run_line(results))
    add("")
    single, lexical, full = results["single"], results["lexical"], results["full"]
    single_top, lexical_top = results["single_top"], results["lexical_top"]
    add(f"Data: `generate_sample_data(n_people={n}, n_documents={n})` ({_s(results['generate_seconds'])} to generate, "
        "not timed), read as `cpa audit` reads it with no configuration file. Every attacker as a newcomer gets it "
        "with nothing declared (`declare_audit` of an empty project: every registry field, temperature `auto`, "
        f"top-K {single['top_k'] or 'none (every profile a candidate)'}, certainty strata, {single['protocol']} "
        f"protocol, the default policy at {100 * single['confidence']:.0f} %), as `cpa audit` declares its default "
        f"panel's members; the last rows declare a top-K {k} shortlist (`[audit] top_k = {k}`, as benchmarks (c), (p) "
        "and (s) run). Each audit is a fresh process with an empty cache folder (`CPA_CACHE_DIR`: the dense attacker "
        "encodes every text); a panel's time is declaring every member and `audit_panel` (each member run and "
        "calibrated on its own, one after the other); a member's peak RSS is the process's during that member (reset "
        "before it; the members before it are held in memory, as in `cpa audit`). Flagged: documents whose set is "
        "smaller than 11 or whose linkage probability exceeds 1/11.")
    add("")
    add("| audit | attacker | wall | CPU | RSS before | peak RSS | extra (peak - before) | flagged | first guess | "
        "median \\|C\\| |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    _audit_rows(add, "single TF-IDF audit", single)
    _audit_rows(add, "default panel without dense retrieval", lexical)
    if full is not None:
        _audit_rows(add, "default panel", full)
    _audit_rows(add, f"single TF-IDF audit, top-K {k}", single_top)
    _audit_rows(add, f"default panel without dense retrieval, top-K {k}", lexical_top)
    add("")
    if results.get("absent"):
        add(f"The default panel with dense retrieval: left out ({results['absent']}).")
        add("")
    ratios = [f"without dense retrieval {lexical['seconds'] / single['seconds']:.1f}x"]
    if full is not None:
        ratios.append(f"with it {full['seconds'] / single['seconds']:.1f}x")
    ratios.append(f"with a top-K {k} shortlist, without dense retrieval "
                  f"{lexical_top['seconds'] / single_top['seconds']:.1f}x")
    add(f"The panel against the single TF-IDF audit (wall): {'; '.join(ratios)}."
        + (f" Embedding cache written by the panel with dense retrieval: {_mib(full['cache_mib'])}."
           if full is not None else ""))
    add("")
    search_t, search_p = lexical["search_tfidf"], lexical["search_panel"]
    add(f"Redaction search (`suggest_redactions`, placeholder strategy) of the first {search_t['documents']:,} "
        f"documents the TF-IDF member flags ({lexical['tfidf_flagged']:,} of {lexical['documents']:,} flagged; the "
        "panel flags them too), under each audit's stored calibration, in the process of the panel's audit (its "
        "peak RSS reset before each search). Made acceptable: to the policy of every attacker searched over, under "
        "the stored calibration (indicative); withhold: no redaction of at most 15 terms that never raises any "
        "attacker's risk does.")
    add("")
    add("| search over | top-K | documents | wall | CPU | per document | peak RSS | extra | made acceptable | "
        "withhold | edits |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [("`tfidf` alone", "none", search_t), (_names(lexical["attackers"]), "none", search_p)]
    if full is not None:
        rows += [(_names(a for a in full["attackers"] if a != "dense") + " (the first documents only)", "none",
                  full["search_without_dense"]),
                 (_names(full["attackers"]), "none", full["search_dense_panel"])]
    rows += [("`tfidf` alone", str(k), lexical_top["search_tfidf"]),
             (_names(lexical_top["attackers"]), str(k), lexical_top["search_panel"])]
    for label, top_k, s in rows:
        add(f"| {label} | {top_k} | {s['documents']:,} | **{_s(s['seconds'])}** | {_s(s['cpu_seconds'])} | "
            f"{1e3 * s['seconds'] / max(1, s['documents']):,.0f} ms | {_mib(s['step_peak_mib'])} | "
            f"{_mib(s['step_extra_mib'])} | {s['acceptable']:,} | {s['documents'] - s['acceptable']:,} | "
            f"{s['edits']:,} |")
    add("")
    said = [f"The search over the panel against TF-IDF alone (wall): {search_p['seconds'] / search_t['seconds']:.1f}x "
            f"(top-K {k}: {lexical_top['search_panel']['seconds'] / lexical_top['search_tfidf']['seconds']:.1f}x)."]
    if full is not None:
        dense_s, without = full["search_dense_panel"], full["search_without_dense"]
        per_doc = dense_s["seconds"] / max(1, dense_s["documents"])
        said.append(f"With dense retrieval the search costs {per_doc:,.1f} s per document "
                    f"({dense_s['seconds'] / without['seconds']:.1f}x the panel without it on the same documents): at "
                    f"that rate {search_p['documents']:,} documents would take about "
                    f"{per_doc * search_p['documents'] / 60:,.0f} min, mostly the encoding of every text each try "
                    "makes (the profiles' embeddings are cached).")
    add(" ".join(said))
    add("")
    add("| target | measured (wall) | CPU | status (wall) |")
    add("|---|---|---:|---|")
    for name, figure, cpu, ok in targets(results):
        add(f"| {name} | {figure} | {cpu} | {_verdict(ok)} |")
    add("")
    if quick:
        add("A quick run uses small sizes: the verdicts above are indicative only; the targets refer to the full run.")
        add("")
    return "\n".join(lines)


def main(argv=None) -> int:
    return standalone(argv, __doc__.splitlines()[0], f"{SIZES[True]:,} documents x profiles, searches of "
                      f"{SEARCHED[True]} and {DENSE_SEARCHED[True]} documents", bench_panel, markdown, HEADING,
                      "cpa-bench-panel-")


if __name__ == "__main__":
    sys.exit(script_entry(main, WORKERS))
