"""How long the dashboard takes to follow its sliders with 10,000 test documents.

Generates a synthetic corpus (``cpa_core.io.synthetic``: 11,000 documents about 1,000 registry people),
attacks it once with TF-IDF at knowledge K2 (1,000 calibration and 10,000 test documents, whole
registry as pool, per-group calibration as in the sample configuration), then times the work one
slider change triggers, exactly as the pages do it:

- confidence (α) slider on Explore: certificate, KPIs, calibration notes, per-group table and the
  three figures, each figure also serialised as ``st.plotly_chart`` does;
- k slider on Explore (same work minus nothing: the certificate is recomputed too) and on Flagged
  documents: certificate, worklist (without term explanations), display table, drill-down of the first
  flagged document (candidate table, driving terms, weights figure);
- optionally (``--apptest``) the full rerun of the Explore page in Streamlit's AppTest after a slider
  move, which adds Streamlit's own work (and AppTest's polling).

Usage: ``.venv/bin/python bench/bench_dashboard.py [--repeat 7] [--apptest]``. Prints a markdown table
(median and worst of the repeats) for ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import plotly.io as pio  # noqa: E402

from cpa_core.attack.tfidf_index import TfidfIndex
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.project import load_config
from cpa_core.io.knowledge import profile_texts
from cpa_core.io.synthetic import generate_sample_data
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.evidence import document_evidence
from cpa_core.report.metrics import confidence_curve, summarize
from cpa_core.report.worklist import worklist
from cpa_ui.analysis import candidate_table, flagged_table, group_table, kpis, row_of  # noqa: E402
from cpa_ui.attackers import declare, default_threat  # noqa: E402
from cpa_ui.figures import fig_candidate_weights, fig_confidence_curve, fig_group_breakdown, fig_set_size_histogram  # noqa: E402

N_TEST, N_CAL, N_PEOPLE = 10_000, 1_000, 1_000


def serialise(fig) -> str:
    """What ``st.plotly_chart`` does with a figure before sending it."""
    return pio.to_json(fig.to_dict(), validate=False)


def timed(repeat: int, work) -> list[float]:
    work()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return times


def build(folder: Path):
    paths = generate_sample_data(folder, seed=11, n_people=N_PEOPLE, n_documents=N_TEST + N_CAL)
    project = load_config(REPO_ROOT / "sample_data" / "audit.toml")
    documents = load_documents(paths["documents"])
    registry = load_registry(paths["registry"])
    from cpa_ui.state import DataSet
    data = DataSet(documents, registry, project, "upload", "bench", "group")
    threat = default_threat(data).alone("tfidf")  # one attacker: the dashboard's work on one audit
    from dataclasses import replace
    config, attacker = declare(data, replace(threat, knowledge="K2", protocol="split", n_cal=N_CAL, n_test=N_TEST))
    start = time.perf_counter()
    result = run_audit(documents, registry, attacker, config)
    attack_s = time.perf_counter() - start
    return data, config, attacker, result, attack_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--apptest", action="store_true", help="also time AppTest reruns of the Explore page")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data, config, attacker, result, attack_s = build(Path(tmp))
    split = result.test_split
    print(f"corpus: {len(data.documents):,} documents, {len(data.registry):,} profiles; "
          f"{len(result.calibration_split):,} calibration / {len(split):,} test documents, "
          f"pool {split.table.width:,} candidates, per-group calibration: {bool(config.group_column)}", file=sys.stderr)

    start = time.perf_counter()
    curve = confidence_curve(result)
    curve_s = time.perf_counter() - start
    details = config.attacker.details
    index = TfidfIndex(details["max_features"], details["ngram_max"], details["min_df"]).fit(
        profile_texts(data.registry, config.knowledge))
    explain = index.explainer()
    policy, levels = ReleasePolicy(11), iter(np.linspace(0.60, 0.99, 10_000))
    flag_below = policy.flag_below

    def alpha_change():
        confidence = round(float(next(levels)), 4)
        cert = result.certificate(confidence)
        summary = summarize(result, [confidence], policy)
        summary.level(confidence)
        groups = group_table(summary, confidence)
        for fig in (fig_set_size_histogram(cert.set_sizes, flag_below), fig_confidence_curve(curve, confidence),
                    fig_group_breakdown(groups, confidence)):
            serialise(fig)

    ks = iter(range(1, 10_000))

    def k_change_explore():
        k_policy = ReleasePolicy(5 + next(ks) % 40)
        cert = result.certificate(0.9)
        summary = summarize(result, [0.9], k_policy)
        summary.level(0.9)
        groups = group_table(summary, 0.9)
        for fig in (fig_set_size_histogram(cert.set_sizes, k_policy.flag_below), fig_confidence_curve(curve, 0.9),
                    fig_group_breakdown(groups, 0.9)):
            serialise(fig)

    def k_change_flagged():
        k_policy = ReleasePolicy(5 + next(ks) % 40)
        cert = result.certificate(0.9)
        work = worklist(cert, k_policy, config.config_id)
        flagged_table(work)
        if len(work):
            row = row_of(cert, work["doc_id"].iloc[0])
            candidates = candidate_table(cert, row, data.registry, config.knowledge.fields)
            document_evidence(split, row, explain)
            serialise(fig_candidate_weights(candidates.head(10)))
        return len(work)

    pieces = {}
    cert = result.certificate(0.9)
    groups = group_table(summarize(result, [0.9], policy), 0.9)
    for name, work in {
        "certificate (new confidence)": lambda: result.certificate(round(float(next(levels)), 4)),
        "KPIs (metrics + flag count)": lambda: kpis(result, 0.9, policy),
        "per-group table": lambda: group_table(summarize(result, [0.9], policy), 0.9),
        "histogram figure + serialise": lambda: serialise(fig_set_size_histogram(cert.set_sizes, flag_below)),
        "coverage-curve figure + serialise": lambda: serialise(fig_confidence_curve(curve, 0.9)),
        "per-group figure + serialise": lambda: serialise(fig_group_breakdown(groups, 0.9)),
        "worklist (no term explanations)": lambda: worklist(cert, policy, config.config_id),
    }.items():
        pieces[name] = timed(args.repeat, work)
    totals = {
        "α slider → Explore page work": timed(args.repeat, alpha_change),
        "k slider → Explore page work": timed(args.repeat, k_change_explore),
        "k slider → Flagged page work (incl. drill-down)": timed(args.repeat, k_change_flagged),
    }
    if args.apptest:
        totals.update(apptest_reruns(data, attacker, result, args.repeat))

    print(f"\nDashboard slider latency, {len(split):,} test documents × {split.table.width:,} candidates "
          f"(Python {platform.python_version()}, {platform.machine()}, median and worst of {args.repeat})\n")
    print("| work on a slider change | median (ms) | worst (ms) |\n|---|---:|---:|")
    for name, times in {**totals, **pieces}.items():
        print(f"| {name} | {1000 * statistics.median(times):.0f} | {1000 * max(times):.0f} |")
    print(f"\nOne-time costs (not on a slider change): attack + calibration {attack_s:.1f} s; coverage-vs-confidence "
          f"curve ({len(curve)} levels, cached per audit) {curve_s:.2f} s.")
    return 0


def apptest_reruns(data, attacker, result, repeat: int) -> dict[str, list[float]]:
    """Full reruns of the Explore page in AppTest with the large audit in the session."""
    from streamlit.testing.v1 import AppTest

    from cpa_ui import nav
    from cpa_ui.state import AuditRun

    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=600)
    at.session_state["cpa.data"] = data
    at.session_state["cpa.run"] = AuditRun(result, f"bench:{result.config.config_id}", "bench K2",
                                           data.fingerprint, 0.0, attacker)
    at.run()
    at.switch_page(nav.EXPLORE).run()
    if at.exception:
        raise RuntimeError(at.exception[0].value)
    percents = iter([60.0, 70.0, 80.0, 90.0, 95.0, 99.0] * repeat)
    flags = iter([5, 11, 20, 30] * repeat)
    return {
        "α slider → AppTest rerun of Explore": timed(
            repeat, lambda: at.slider(key="w.explore.confidence_percent").set_value(next(percents)).run()),
        "k slider → AppTest rerun of Explore": timed(
            repeat, lambda: at.slider(key="w.explore.flag_below").set_value(next(flags)).run()),
    }


if __name__ == "__main__":
    sys.exit(main())
