"""The dashboard's figures are pure functions of the core's numbers: tested without Streamlit (that the pure
modules do not import it: tests/integration/test_figures_imports.py; the set-size bins they draw:
tests/report/test_formatting.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from cpa_core.report.formatting import MAX_BINS
from cpa_core.report.html import ReportCharts
from cpa_ui.figures import (
    FLAGGED_COLOR,
    SAFE_COLOR,
    TARGET_COLOR,
    fig_candidate_weights,
    fig_compare,
    fig_confidence_curve,
    fig_drift,
    fig_group_breakdown,
    fig_set_size_ecdf,
    fig_set_size_curve,
    fig_set_size_histogram,
    fig_set_sizes_by_level,
    quantile_from_counts,
    report_charts,
    set_size_counts,
)

# --- figures -------------------------------------------------------------------------------------------------

def test_histogram_marks_flagged_bins_and_the_threshold():
    sizes = np.array([0, 1, 2, 2, 5, 11, 12, 40, 400])
    fig = fig_set_size_histogram(sizes, flag_below=11)
    assert isinstance(fig, go.Figure)
    bars, cumulative = fig.data
    colors = list(bars.marker.color)
    assert colors[:11] == [FLAGGED_COLOR] * 11 and set(colors[11:]) == {SAFE_COLOR}
    assert sum(bars.y) == len(sizes) and list(bars.x[:3]) == ["0", "1", "2"]
    assert cumulative.y[-1] == pytest.approx(100.0) and cumulative.yaxis == "y2"
    (line,) = fig.layout.shapes
    assert line.x0 == line.x1 == 10.5
    assert fig.layout.annotations[0].text == "k = 11 · |C| < k: 5 documents"  # sizes 0, 1, 2, 2 and 5
    json.loads(fig.to_json())


def test_histogram_follows_k():
    sizes = np.arange(30)
    assert fig_set_size_histogram(sizes, 3).layout.shapes[0].x0 == 2.5
    red = [c == FLAGGED_COLOR for c in fig_set_size_histogram(sizes, 3).data[0].marker.color]
    assert sum(red) == 3


def _one_big_bar(flagged: int = 11, n: int = 6_447, seed: int = 0) -> np.ndarray:
    """A release like the users' at 10,000 documents: nearly every set is the whole pool of 50, a few are tiny."""
    rng = np.random.default_rng(seed)
    sizes = np.full(n, 50)
    sizes[:flagged] = rng.integers(0, 11, flagged)
    return sizes


def test_histogram_counts_are_log_scaled_so_a_few_flagged_documents_show_beside_thousands():
    sizes = _one_big_bar()
    bars = fig_set_size_histogram(sizes, 11).data[0]
    fig = fig_set_size_histogram(sizes, 11)
    axis = fig.layout.yaxis
    assert axis.type == "log" and "log scale" in axis.title.text
    # the axis starts below one document: a bar of one is drawn, up to log10(1) = 0 above the bottom
    assert axis.range[0] == pytest.approx(math.log10(0.5)) and axis.range[1] >= math.log10(6_436)
    assert 1 in axis.tickvals and all(v >= 1 for v in axis.tickvals)
    red = [y for y, c in zip(bars.y, bars.marker.color) if c == FLAGGED_COLOR]
    assert sum(red) == 11 and max(bars.y) == 6_436
    assert "|C| < k: 11 documents" in fig.layout.annotations[0].text


def test_histogram_is_binned_here_tens_of_bars_whatever_the_number_of_documents():
    sizes = np.random.default_rng(1).integers(0, 5_000, 100_000)
    fig = fig_set_size_histogram(sizes, 11)
    bars, cumulative = fig.data
    assert 11 <= len(bars.x) <= MAX_BINS + 1 and sum(bars.y) == 100_000  # the bins of the report's histogram
    assert list(bars.x[:11]) == [str(size) for size in range(11)]  # a bar per size below k
    assert len(fig.to_json()) < 20_000  # tens of bars, not 100,000 values


def test_histogram_linear_counts_and_the_counted_documents_named():
    fig = fig_set_size_histogram(np.array([1, 2, 30]), 5, log_counts=False, documents="test documents")
    assert fig.layout.yaxis.type != "log" and fig.layout.yaxis.rangemode == "tozero"
    assert fig.layout.yaxis.title.text == "test documents"
    assert "test documents" in fig.data[0].hovertemplate
    assert fig.layout.annotations[0].text == "k = 5 · |C| < k: 2 test documents"


def test_histogram_of_two_releases_side_by_side_over_the_same_bins():
    before, after = np.array([0, 1, 1, 3, 20, 50]), np.array([3, 12, 20, 50])
    fig = fig_set_size_histogram({"before": before, "after redaction": after}, 4)
    bars = [t for t in fig.data if t.type == "bar"]
    lines = [t for t in fig.data if t.type == "scatter"]
    assert [t.name for t in bars] == ["before", "after redaction"] and fig.layout.barmode == "group"
    assert list(bars[0].x) == list(bars[1].x)
    by_size = [dict(zip(t.x, t.y)) for t in bars]
    assert (by_size[0]["0"], by_size[0]["1"], by_size[0]["3"]) == (1, 2, 1)
    assert (by_size[1]["0"], by_size[1]["1"], by_size[1]["3"]) == (0, 0, 1)
    assert sum(bars[0].y) == 6 and sum(bars[1].y) == 4
    assert bars[0].marker.color != bars[1].marker.color  # one colour per release
    assert [line.y[-1] for line in lines] == pytest.approx([100, 100]) and {line.yaxis for line in lines} == {"y2"}
    band, line = fig.layout.shapes  # the flagged bins behind both releases, then the line at k
    assert band.type == "rect" and band.x1 == line.x0 == 3.5
    assert fig.layout.annotations[0].text == "k = 4 · |C| < k: before 4, after redaction 1"
    assert fig.layout.showlegend


def test_set_size_counts_per_level():
    counts = set_size_counts({0.9: np.array([0, 2, 2, 5]), 0.95: np.array([3, 5])})
    assert list(counts.index) == [0.9, 0.95] and counts.index.name == "confidence"
    assert counts.loc[0.9].tolist() == [1, 0, 2, 0, 0, 1] and counts.loc[0.95].tolist() == [0, 0, 0, 1, 0, 1]


@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
def test_quantile_from_counts_is_numpys_on_the_sizes(q):
    rng = np.random.default_rng(3)
    rows = [rng.integers(0, 30, n) for n in (1, 2, 7, 10, 101)]
    counts = set_size_counts(dict(enumerate(rows))).to_numpy()
    assert quantile_from_counts(counts, q) == pytest.approx([np.quantile(row, q) for row in rows])


def test_quantile_from_counts_of_no_document_is_nan():
    assert np.isnan(quantile_from_counts(np.zeros((1, 4), dtype=int), 0.5)).all()
    assert quantile_from_counts(np.array([[0, 1, 1]]), 0.5) == pytest.approx([1.5])  # the median of 1 and 2


def test_set_sizes_by_level_counts_the_documents_below_k():
    counts = set_size_counts({0.8: np.array([0, 1, 1, 4, 9]), 0.9: np.array([1, 3, 4, 9, 9])})
    fig = fig_set_sizes_by_level(counts, 4, documents="audited documents")
    below, median, p10 = fig.data
    assert list(below.x) == pytest.approx([80, 90]) and list(below.y) == [3, 2]
    assert below.name == "audited documents with |C| < k = 4" and list(below.customdata) == pytest.approx([60, 40])
    assert list(median.y) == pytest.approx([1, 4]) and median.yaxis == "y2" and p10.yaxis == "y2"
    assert list(p10.y) == pytest.approx([np.quantile([0, 1, 1, 4, 9], 0.1), np.quantile([1, 3, 4, 9, 9], 0.1)])
    assert "coverage" not in " ".join(t.name for t in fig.data).lower()


def _curve() -> pd.DataFrame:
    levels = np.array([0.5, 0.8, 0.9, 0.95])
    return pd.DataFrame({"confidence": levels, "alpha": 1 - levels, "coverage": levels + 0.01,
                         "coverage_conditional": levels + 0.02, "median_set_size": [1.0, 3.0, 8.0, 20.0],
                         "mean_set_size": 0.0, "mean_leakage": 0.0, "empty_rate": 0.0, "q_hat": 0.5})


def test_confidence_curve_traces_and_marker():
    fig = fig_confidence_curve(_curve(), 0.9)
    names = [t.name for t in fig.data]
    assert names == ["target (= confidence)", "coverage", "coverage (identity in pool)", "median |C|"]
    assert list(fig.data[0].x) == pytest.approx([50, 80, 90, 95]) and list(fig.data[1].y) == pytest.approx(
        [51, 81, 91, 96])
    assert fig.data[3].yaxis == "y2" and list(fig.data[3].y) == [1, 3, 8, 20]
    assert fig.layout.shapes[0].x0 == pytest.approx(90)


def test_confidence_curve_without_conditional_coverage_or_marker():
    curve = _curve().assign(coverage_conditional=np.nan)
    fig = fig_confidence_curve(curve)
    assert "coverage (identity in pool)" not in [t.name for t in fig.data] and not fig.layout.shapes


def test_set_size_curve_against_k_and_the_level():
    fig = fig_set_size_curve(_curve().assign(mean_set_size=[2.0, 4.0, 9.0, 25.0]), 0.9, 11)
    median, mean = fig.data
    assert (median.name, mean.name) == ("median |C|", "mean |C|") and list(mean.y) == [2, 4, 9, 25]
    assert list(median.x) == pytest.approx([50, 80, 90, 95])
    k_line, level = fig.layout.shapes
    assert k_line.y0 == k_line.y1 == 11 and level.x0 == pytest.approx(90)
    assert "coverage" not in " ".join(t.name for t in fig.data)


@pytest.mark.parametrize("protocol", ["split", "release"])
def test_report_charts_show_coverage_only_under_the_split_protocol(protocol):
    charts = ReportCharts(np.array([0, 3, 12, 40]), 11, "Certified set sizes at 90 %", _curve(), 0.9, None, protocol)
    script, figures = report_charts(charts)
    assert script.startswith("<script") and len(figures) == 2
    histogram, curve = figures
    assert ("test documents" if protocol == "split" else "certified documents") in histogram
    assert ('"name":"coverage"' in curve) == (protocol == "split")
    assert ('"name":"median |C|"' in curve)


def test_group_breakdown_panels():
    groups = pd.DataFrame({"group": ["a", "b"], "coverage": [0.9, 0.96], "median_set_size": [4.0, 9.0],
                           "n_test": [10, 20]})
    fig = fig_group_breakdown(groups, 0.95)
    coverage, sizes = fig.data
    assert list(coverage.y) == pytest.approx([90, 96]) and list(sizes.y) == [4, 9] and sizes.xaxis == "x2"
    assert fig.layout.shapes[0].y0 == pytest.approx(95)
    assert fig.layout.xaxis.domain[1] < fig.layout.xaxis2.domain[0]


def test_compare_three_panels():
    summary = pd.DataFrame({"label": ["K1", "K2", "K3"], "coverage": [0.95, 0.96, 0.94],
                            "median_set_size": [50.0, 20.0, 3.0], "flagged_share": [0.0, 0.1, 0.6]})
    fig = fig_compare(summary, 0.95)
    assert [t.yaxis for t in fig.data] == ["y", "y2", "y3"]
    assert list(fig.data[2].y) == pytest.approx([0, 10, 60]) and list(fig.data[0].x) == ["K1", "K2", "K3"]


def test_ecdf_per_configuration():
    fig = fig_set_size_ecdf({"K1": np.array([0, 5, 5, 10]), "K3": np.array([1, 1])}, 3)
    k1, k3 = fig.data
    assert list(k1.x) == [0.5, 5, 10] and list(k1.y) == pytest.approx([25, 75, 100])
    assert list(k3.y) == pytest.approx([100]) and fig.layout.xaxis.type == "log"
    assert fig.layout.shapes[0].x0 == 2.5


def test_drift_bars_against_target():
    drift = pd.DataFrame({"calibration": ["drift (calibrated on A)", "own (recalibrated on B)"] * 2,
                          "confidence": [0.9, 0.9, 0.95, 0.95], "coverage": [0.7, 0.91, 0.8, 0.96]})
    fig = fig_drift(drift)
    assert [t.name for t in fig.data] == ["drift (calibrated on A)", "own (recalibrated on B)", "target"]
    assert list(fig.data[0].y) == pytest.approx([70, 80]) and list(fig.data[2].y) == pytest.approx([90, 95])
    assert list(fig.data[0].x) == ["90 %", "95 %"]


def test_candidate_weights_mark_set_and_truth():
    candidates = pd.DataFrame({"candidate": ["P1", "P2", "P3"], "weight": [0.7, 0.2, 0.1],
                               "in_set": [True, True, False], "is_truth": [False, True, False]})
    fig = fig_candidate_weights(candidates)
    (bars,) = fig.data
    assert list(bars.y) == ["P3", "P2 ★", "P1"]  # top candidate drawn at the top
    assert list(bars.marker.color) == [TARGET_COLOR, FLAGGED_COLOR, FLAGGED_COLOR]

