"""The dashboard's figures are pure functions of the core's numbers: tested without Streamlit (that the pure
modules do not import it: tests/integration/test_figures_imports.py; the set-size bins they draw:
tests/report/test_formatting.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from cpa_core.report.metrics import summarize
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
    fig_set_size_histogram,
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
    assert fig.layout.annotations[0].text == "k = 11"
    json.loads(fig.to_json())


def test_histogram_follows_k():
    sizes = np.arange(30)
    assert fig_set_size_histogram(sizes, 3).layout.shapes[0].x0 == 2.5
    red = [c == FLAGGED_COLOR for c in fig_set_size_histogram(sizes, 3).data[0].marker.color]
    assert sum(red) == 3


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


def test_calibration_table_shows_the_coverage_interval_only_where_coverage_is_a_check():
    from dataclasses import replace

    from tables import audited_groups

    from cpa_ui.analysis import calibration_table

    result = audited_groups()[0]
    split = calibration_table(summarize(result))
    assert list(split.columns[3:6]) == ["coverage", "coverage_low", "coverage_high"]
    assert (split["coverage_low"] <= split["coverage"]).all() and (split["coverage"] <= split["coverage_high"]).all()
    release = calibration_table(replace(summarize(result), protocol="release"))
    assert "coverage_low" not in release.columns  # coverage by construction: no interval to show
