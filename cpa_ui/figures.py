"""Plotly figures of the dashboard and the report: pure functions ``fig_*(data) -> go.Figure``.

They take arrays and tables computed by :mod:`cpa_core` and only arrange them for display (binning
included); they never import Streamlit and are tested on their own.

Each figure is declared as one dictionary and validated once (``go.Figure(spec)``): building it
step by step (``make_subplots``, ``add_vline``, a named template) costs ten times more, and the
sliders of the dashboard redraw these figures on every move. No template is set: the dashboard
applies its theme, the report :data:`REPORT_TEMPLATE`.

The colours and the set-size bins are the core's (:mod:`cpa_core.report.formatting`), shared with the static
figures of the certificate report (:mod:`cpa_core.report.html`); :func:`certificate_report` is that report with
these figures, interactive, on screen.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from cpa_core.audit.results import AuditResult
from cpa_core.report import html as report_html
from cpa_core.report.formatting import (
    FLAGGED_COLOR,
    SAFE_COLOR,
    TARGET_COLOR,
    bin_counts,
    fmt_confidence,
    set_size_bins,
)

SECOND_COLOR = "#e67e22"
PALETTE = ("#2e86c1", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#d35400", "#2c3e50")
LOG_TICKS = (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000)
REPORT_TEMPLATE = "plotly_white"


def _layout(title: str, height: int = 400, **extra) -> dict:
    """Common layout: title top left, legend in a row under the plot."""
    return {"title": {"text": title, "x": 0, "xanchor": "left"}, "height": height,
            "margin": {"l": 60, "r": 60, "t": 60, "b": 40}, "bargap": 0.05,
            "legend": {"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0}, **extra}


def _vline(x: float, color: str, text: str | None = None, xref: str = "x") -> tuple[dict, list[dict]]:
    """A dashed vertical line across the plot at ``x``, and its label at the top."""
    shape = {"type": "line", "xref": xref, "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
             "line": {"color": color, "dash": "dash", "width": 2}}
    label = [] if text is None else [{"x": x, "xref": xref, "y": 1.0, "yref": "paper", "text": text,
                                      "showarrow": False, "xanchor": "left", "yanchor": "bottom",
                                      "font": {"color": color}}]
    return shape, label


def _hline(y: float, color: str, xref: str = "x", yref: str = "y") -> dict:
    axis = "paper" if xref == "paper" else f"{xref} domain"
    return {"type": "line", "xref": axis, "yref": yref, "x0": 0, "x1": 1, "y0": y, "y1": y,
            "line": {"color": color, "dash": "dot", "width": 2}}


def _panel_titles(titles: Sequence[str], domains: Sequence[tuple[float, float]]) -> list[dict]:
    return [{"text": title, "x": (a + b) / 2, "xref": "paper", "y": 1.0, "yref": "paper", "showarrow": False,
             "xanchor": "center", "yanchor": "bottom", "font": {"size": 13}} for title, (a, b) in zip(titles, domains)]


def _panels(n: int, gap: float = 0.08) -> list[tuple[float, float]]:
    width = (1 - gap * (n - 1)) / n
    return [(i * (width + gap), i * (width + gap) + width) for i in range(n)]


def _panel_axes(n: int, y_titles: Sequence[str | None] = ()) -> dict:
    """Layout axes for ``n`` side-by-side panels (``xaxis``/``yaxis``, ``xaxis2``/``yaxis2``, ...)."""
    axes = {}
    for i, domain in enumerate(_panels(n), start=1):
        suffix = "" if i == 1 else str(i)
        axes[f"xaxis{suffix}"] = {"domain": list(domain), "anchor": f"y{suffix}", "type": "category"}
        axes[f"yaxis{suffix}"] = {"anchor": f"x{suffix}", "rangemode": "tozero",
                                  **({"title": {"text": y_titles[i - 1]}} if i <= len(y_titles) and y_titles[i - 1]
                                     else {})}
    return axes


def _releases(set_sizes: np.ndarray | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One release's set sizes (``{"": sizes}``) or several, by name, as integer arrays."""
    if isinstance(set_sizes, Mapping):
        return {str(name): np.asarray(sizes, dtype=np.int64) for name, sizes in set_sizes.items()}
    return {"": np.asarray(set_sizes, dtype=np.int64)}


def _count_axis(top: float, title: str, log: bool) -> dict:
    """The y axis of document counts: log-scaled from 0.5 (a bar of one document stays visible beside one of
    thousands), or linear from zero."""
    if not log:
        return {"title": {"text": title}, "rangemode": "tozero", "automargin": False}
    top = max(float(top), 1.0)
    return {"title": {"text": f"{title} (log scale)"}, "type": "log", "automargin": False,
            "range": [math.log10(0.5), math.log10(top) + 0.15],
            "tickvals": [v for v in LOG_TICKS if 1 <= v <= 1.4 * top]}


def fig_set_size_histogram(set_sizes: np.ndarray | Mapping[str, np.ndarray], flag_below: int,
                           title: str = "Certified set sizes", *,
                           flagged: np.ndarray | Mapping[str, np.ndarray] | None = None, rule: str | None = None,
                           log_counts: bool = True, documents: str = "documents") -> go.Figure:
    """Histogram of ``|C|`` (binned here: tens of bars, whatever the number of documents), its cumulative share,
    and the flag threshold ``k``.

    ``set_sizes`` is one release's sizes, shape ``(n,)``, or several releases by name (e.g. ``{"before": sizes,
    "after redaction": sizes}``), drawn side by side over the same bins with one cumulative line each. One bar per
    set size up to just past ``k``, wider bins beyond (the axis is categorical, so every bin has the same width).

    ``flagged``: the documents the release policy flags (:meth:`~cpa_core.audit.results.Certificate.flags`, shape
    ``(n,)``, or one mask per release), and ``rule`` its words: each bin's bar is then split into its flagged documents
    (red, at its foot) and the others, so that the red bars count exactly the flagged documents, those flagged by their
    linkage probability right of the k line included. Without ``flagged``, red is the sets smaller than ``k``: red bars
    for one release, a red band behind several. The dashed line sits at ``k``. Counts are log-scaled by default
    (``log_counts``), so that a few flagged documents stay visible beside a bar of thousands. ``documents`` names what
    is counted (e.g. ``"test documents"`` under the split protocol).
    """
    releases = _releases(set_sizes)
    single = not isinstance(set_sizes, Mapping)
    masks = None if flagged is None else \
        {name: np.asarray(mask, dtype=bool) for name, mask in (_releases(flagged).items())}
    bins = set_size_bins(np.concatenate(list(releases.values())), flag_below)
    uppers = bins["upper"].to_numpy()
    below_k = uppers < flag_below
    n_below_bins = int(below_k.sum())
    labels = bins["label"].tolist()
    data, counted, top = [], [], 1
    for i, (name, sizes) in enumerate(releases.items()):
        counts = bin_counts(bins, sizes)
        top = max(top, int(counts.max(initial=0)))
        color = PALETTE[i % len(PALETTE)]
        in_name = "" if single else f" ({name})"
        common = {"type": "bar", "x": labels, "offsetgroup": str(i)}
        if masks is None:
            counted.append((name, int(counts[below_k].sum())))
            data.append({**common, "y": counts.tolist(), "name": name or documents,
                         "marker": {"color": np.where(below_k, FLAGGED_COLOR, SAFE_COLOR).tolist() if single
                                    else color},
                         "hovertemplate": f"|C| %{{x}}: %{{y:,}} {documents}{in_name}<extra></extra>"})
        else:
            red = bin_counts(bins, sizes, masks[name])
            counted.append((name, int(red.sum())))
            # the flagged documents at the foot of each bar, the others stacked on them (``base``)
            data.append({**common, "y": red.tolist(), "name": f"flagged{in_name}: {int(red.sum()):,}",
                         "marker": {"color": FLAGGED_COLOR, **({} if single else {"line": {"color": color,
                                                                                           "width": 2}})},
                         "hovertemplate": f"|C| %{{x}}: %{{y:,}} flagged {documents}{in_name}<extra></extra>"})
            data.append({**common, "y": (counts - red).tolist(), "base": red.tolist(),
                         "name": f"not flagged{in_name}: {int((counts - red).sum()):,}",
                         "marker": {"color": SAFE_COLOR if single else color},
                         "hovertemplate": f"|C| %{{x}}: %{{y:,}} {documents}{in_name} not flagged<extra></extra>"})
        data.append({"type": "scatter", "x": labels, "y": (100 * np.cumsum(counts) / max(sizes.size, 1)).round(2).tolist(),
                     "yaxis": "y2", "name": f"cumulative share{in_name}", "mode": "lines", "showlegend": False,
                     "line": {"color": TARGET_COLOR if single else color, "dash": "solid" if single else "dot"},
                     "hovertemplate": f"|C| ≤ %{{x}}: %{{y:.1f}} % of {documents}{in_name}<extra></extra>"})
    # the line sits between the last bin below k and the first one from k on (bins below k are unit bins)
    what = "flagged" if masks is not None else "|C| < k"
    count_text = f"{counted[0][1]:,} {documents}" if single else ", ".join(f"{name} {n:,}" for name, n in counted)
    line, label = _vline(n_below_bins - 0.5, FLAGGED_COLOR, f"k = {flag_below} · {what}: {count_text}")
    shapes = [line]
    if masks is None and not single and n_below_bins:
        shapes.insert(0, {"type": "rect", "xref": "x", "yref": "paper", "x0": -0.5, "x1": n_below_bins - 0.5,
                          "y0": 0, "y1": 1, "fillcolor": FLAGGED_COLOR, "opacity": 0.08, "line": {"width": 0},
                          "layer": "below"})
    colours = report_html.histogram_colours(flag_below, rule) if masks is not None or single else \
        f"shaded: |C| < k = {flag_below}"
    # margins fixed (no automargin): drawn once, not measured and drawn again on every redraw
    return go.Figure({
        "data": data,
        "layout": _layout(title, shapes=shapes, annotations=label, showlegend=masks is not None or not single,
                          barmode="group", bargap=0.15 if single else 0.25, margin={"l": 70, "r": 60, "t": 70, "b": 95},
                          legend={"orientation": "h", "yanchor": "bottom", "y": 1.08, "xanchor": "right", "x": 1},
                          xaxis={"title": {"text": f"certified set size |C| ({colours})"},
                                 "type": "category", "tickangle": -45, "automargin": False},
                          yaxis=_count_axis(top, documents, log_counts),
                          yaxis2={"title": {"text": "cumulative share (%)"}, "overlaying": "y", "side": "right",
                                  "range": [0, 101], "tickmode": "linear", "dtick": 25, "showgrid": False,
                                  "automargin": False}),
    })


def set_size_counts(set_sizes_by_level: Mapping[float, np.ndarray]) -> pd.DataFrame:
    """How many documents have each set size at each confidence level: one row per level (the index,
    ``confidence``), one column per size ``0, 1, …`` up to the largest; what :func:`fig_set_sizes_by_level` draws,
    a few kilobytes whatever the number of documents."""
    levels = [float(c) for c in set_sizes_by_level]
    sizes = [np.asarray(s, dtype=np.int64) for s in set_sizes_by_level.values()]
    width = 1 + max((int(s.max()) for s in sizes if s.size), default=0)
    counts = np.vstack([np.bincount(s, minlength=width) for s in sizes]) if sizes else np.zeros((0, width), np.int64)
    return pd.DataFrame(counts, index=pd.Index(levels, name="confidence"))


def quantile_from_counts(counts: np.ndarray, q: float) -> np.ndarray:
    """The ``q``-quantile of each row's sizes given as counts per size (``counts[i, s]``: documents of row ``i``
    with ``|C| = s``), as :func:`numpy.quantile` (linear) computes it on the sizes themselves; NaN for an empty row."""
    counts = np.asarray(counts, dtype=np.int64)
    n = counts.sum(axis=1)
    cumulative = counts.cumsum(axis=1)
    position = np.maximum(n - 1, 0) * q
    low, high = np.floor(position), np.ceil(position)

    def size_at(rank: np.ndarray) -> np.ndarray:  # the rank-th smallest size (from 0)
        return (cumulative <= rank[:, None]).sum(axis=1)
    value = size_at(low) + (position - low) * (size_at(high) - size_at(low))
    return np.where(n > 0, value, np.nan)


def fig_set_sizes_by_level(counts: pd.DataFrame, flag_below: int, documents: str = "documents",
                           title: str = "Documents with |C| < k and set sizes versus confidence") -> go.Figure:
    """How many documents have a set smaller than ``k``, and the median and 10th percentile set size, per
    confidence level (``counts``: :func:`set_size_counts`).

    What the confidence level costs and buys when coverage is not evidence (the release protocol, where coverage
    equals the level by construction): higher confidence, larger sets, fewer documents below ``k``.
    """
    x = (100 * counts.index.to_numpy(dtype=float)).round(3).tolist()
    matrix = counts.to_numpy()
    n = np.maximum(matrix.sum(axis=1), 1)
    below = matrix[:, :max(int(flag_below), 0)].sum(axis=1)
    data = [
        {"type": "scatter", "x": x, "y": below.tolist(), "name": f"{documents} with |C| < k = {flag_below}",
         "mode": "lines", "line": {"color": FLAGGED_COLOR}, "customdata": (100 * below / n).round(2).tolist(),
         "hovertemplate": f"confidence %{{x:.1f}} %: %{{y:,}} {documents} (%{{customdata:.1f}} %) with |C| < k"
                          "<extra></extra>"},
        {"type": "scatter", "x": x, "y": quantile_from_counts(matrix, 0.5).tolist(), "yaxis": "y2",
         "name": "median |C|", "mode": "lines", "line": {"color": SECOND_COLOR},
         "hovertemplate": "confidence %{x:.1f} %: median |C| %{y:g}<extra></extra>"},
        {"type": "scatter", "x": x, "y": quantile_from_counts(matrix, 0.1).tolist(), "yaxis": "y2",
         "name": "10th percentile |C|", "mode": "lines", "line": {"color": SECOND_COLOR, "dash": "dot"},
         "hovertemplate": "confidence %{x:.1f} %: 10 % of sets hold at most %{y:g}<extra></extra>"},
    ]
    return go.Figure({"data": data, "layout": _layout(
        title, margin={"l": 70, "r": 70, "t": 60, "b": 100},
        xaxis={"title": {"text": "confidence level 1 − α (%)"}, "automargin": False},
        yaxis={"title": {"text": f"{documents} with |C| < k"}, "rangemode": "tozero", "automargin": False},
        yaxis2={"title": {"text": "certified set size |C|"}, "overlaying": "y", "side": "right", "showgrid": False,
                "rangemode": "tozero", "automargin": False})})


def fig_confidence_curve(curve: pd.DataFrame, confidence: float | None = None,
                         title: str = "Coverage and median |C| versus confidence") -> go.Figure:
    """Empirical coverage (against the target diagonal) and the median set size per confidence level.

    ``curve`` is :func:`cpa_core.report.metrics.confidence_curve`; ``confidence`` marks the current level.
    """
    x = (100 * curve["confidence"].astype(float)).round(3).tolist()
    data = [
        {"type": "scatter", "x": x, "y": x, "name": "target (= confidence)", "mode": "lines",
         "line": {"dash": "dot", "color": TARGET_COLOR}, "hoverinfo": "skip"},
        {"type": "scatter", "x": x, "y": (100 * curve["coverage"].astype(float)).tolist(), "name": "coverage",
         "mode": "lines", "line": {"color": SAFE_COLOR},
         "hovertemplate": "confidence %{x:.1f} %: coverage %{y:.1f} %<extra></extra>"},
    ]
    if curve["coverage_conditional"].notna().any():
        data.append({"type": "scatter", "x": x, "y": (100 * curve["coverage_conditional"].astype(float)).tolist(),
                     "name": "coverage (identity in pool)", "mode": "lines",
                     "line": {"color": SAFE_COLOR, "dash": "dash"},
                     "hovertemplate": "confidence %{x:.1f} %: %{y:.1f} %<extra></extra>"})
    data.append({"type": "scatter", "x": x, "y": curve["median_set_size"].astype(float).tolist(), "yaxis": "y2",
                 "name": "median |C|", "mode": "lines", "line": {"color": SECOND_COLOR},
                 "hovertemplate": "confidence %{x:.1f} %: median |C| %{y}<extra></extra>"})
    shapes, annotations = [], []
    if confidence is not None:
        line, label = _vline(100 * float(confidence), FLAGGED_COLOR, f"{100 * float(confidence):g} %")
        shapes, annotations = [line], label
    return go.Figure({"data": data, "layout": _layout(
        title, shapes=shapes, annotations=annotations,
        xaxis={"title": {"text": "confidence level 1 − α (%)"}},
        yaxis={"title": {"text": "coverage on the test split (%)"}},
        yaxis2={"title": {"text": "median certified set size"}, "overlaying": "y", "side": "right",
                "showgrid": False, "rangemode": "tozero", "tickmode": "auto"})})


def fig_set_size_curve(curve: pd.DataFrame, confidence: float | None, flag_below: int,
                       title: str = "Certified set size versus confidence") -> go.Figure:
    """Median and mean set size per confidence level against the release policy's ``k`` (``curve`` is
    :func:`cpa_core.report.metrics.confidence_curve`; ``confidence`` marks the current level): the curve of the
    release protocol, whose coverage is the target by construction."""
    x = (100 * curve["confidence"].astype(float)).round(3).tolist()
    data = [{"type": "scatter", "x": x, "y": curve[column].astype(float).tolist(), "name": name, "mode": "lines",
             "line": {"color": SAFE_COLOR, "dash": dash},
             "hovertemplate": f"confidence %{{x:.1f}} %: {name} %{{y:g}}<extra></extra>"}
            for column, name, dash in (("median_set_size", "median |C|", "solid"), ("mean_set_size", "mean |C|", "dash"))]
    shapes = [_hline(float(flag_below), FLAGGED_COLOR)]
    annotations = [{"x": 1, "xref": "paper", "y": float(flag_below), "yref": "y", "text": f"k = {flag_below}",
                    "showarrow": False, "xanchor": "right", "yanchor": "bottom", "font": {"color": FLAGGED_COLOR}}]
    if confidence is not None:
        line, label = _vline(100 * float(confidence), FLAGGED_COLOR, fmt_confidence(confidence))
        shapes, annotations = [*shapes, line], [*annotations, *label]
    return go.Figure({"data": data, "layout": _layout(
        title, shapes=shapes, annotations=annotations, xaxis={"title": {"text": "confidence level 1 − α (%)"}},
        yaxis={"title": {"text": "certified set size |C|"}, "rangemode": "tozero"})})


def fig_group_breakdown(groups: pd.DataFrame, confidence: float, title: str = "Per-group breakdown") -> go.Figure:
    """Coverage and median set size of each group (``group``, ``coverage``, ``median_set_size``, ``n_test``)."""
    labels = groups["group"].astype(str).tolist()
    domains = _panels(2, gap=0.12)
    axes = _panel_axes(2)
    axes["yaxis"].update(range=[0, 105])
    return go.Figure({
        "data": [
            {"type": "bar", "x": labels, "y": (100 * groups["coverage"].astype(float)).tolist(), "name": "coverage",
             "marker": {"color": SAFE_COLOR}, "customdata": groups["n_test"].tolist(),
             "hovertemplate": "%{x}: %{y:.1f} % of %{customdata} documents<extra></extra>"},
            {"type": "bar", "x": labels, "y": groups["median_set_size"].astype(float).tolist(), "name": "median |C|",
             "xaxis": "x2", "yaxis": "y2", "marker": {"color": SECOND_COLOR},
             "hovertemplate": "%{x}: median |C| %{y}<extra></extra>"},
        ],
        "layout": _layout(title, height=340, showlegend=False, shapes=[_hline(100 * float(confidence), TARGET_COLOR)],
                          annotations=_panel_titles(("coverage (%) · dotted: target", "median |C|"), domains), **axes),
    })


def fig_compare(summary: pd.DataFrame, confidence: float, title: str = "Configurations side by side") -> go.Figure:
    """Coverage, median set size and flagged share of several configurations on matched splits.

    ``summary`` has one row per configuration: ``label``, ``coverage``, ``median_set_size``,
    ``flagged_share``.
    """
    labels = summary["label"].astype(str).tolist()
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(labels))]
    columns = (("coverage", 100, "%{x}: %{y:.1f} %"), ("median_set_size", 1, "%{x}: %{y}"),
               ("flagged_share", 100, "%{x}: %{y:.1f} %"))
    data = []
    for i, (column, scale, hover) in enumerate(columns, start=1):
        suffix = "" if i == 1 else str(i)
        data.append({"type": "bar", "x": labels, "y": (scale * summary[column].astype(float)).tolist(),
                     "marker": {"color": colors}, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}",
                     "hovertemplate": hover + "<extra></extra>"})
    axes = _panel_axes(3)
    axes["yaxis"].update(range=[0, 105])
    return go.Figure({"data": data, "layout": _layout(
        title, height=340, showlegend=False, shapes=[_hline(100 * float(confidence), TARGET_COLOR)],
        annotations=_panel_titles(("coverage (%) · dotted: target", "median |C|", "flagged documents (%)"),
                                  _panels(3)), **axes)})


def fig_set_size_ecdf(set_sizes: Mapping[str, np.ndarray], flag_below: int,
                      title: str = "Share of documents with a set of at most |C|") -> go.Figure:
    """Empirical distribution functions of the set sizes of several configurations (log-scaled sizes)."""
    data = []
    for i, (label, sizes) in enumerate(set_sizes.items()):
        values, counts = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
        share = np.cumsum(counts) / max(int(counts.sum()), 1)
        data.append({"type": "scatter", "x": np.maximum(values, 0.5).tolist(), "y": (100 * share).tolist(),
                     "name": str(label), "mode": "lines", "line": {"shape": "hv", "color": PALETTE[i % len(PALETTE)]},
                     "hovertemplate": "|C| ≤ %{x}: %{y:.1f} %<extra>" + str(label) + "</extra>"})
    top = max((int(np.max(s)) for s in set_sizes.values() if len(s)), default=1)
    line, label = _vline(max(flag_below - 0.5, 0.5), FLAGGED_COLOR, f"k = {flag_below}")
    return go.Figure({"data": data, "layout": _layout(
        title, height=340, shapes=[line], annotations=label,
        xaxis={"title": {"text": "certified set size |C| (log scale; 0 drawn at 0.5)"}, "type": "log",
               "range": [math.log10(0.5), math.log10(max(top, 10)) + 0.05],
               "tickvals": [v for v in LOG_TICKS if v <= max(top, 10)]},
        yaxis={"title": {"text": "documents (%)"}, "range": [0, 102]})})


def fig_drift(drift: pd.DataFrame, title: str = "Drift: coverage when calibrated on A and tested on B") -> go.Figure:
    """Coverage of B's test split with A's threshold and with B's own, against the target, per level.

    ``drift`` is :func:`cpa_core.report.stress.drift` (columns ``calibration``, ``confidence``, ``coverage``).
    """
    levels = sorted(drift["confidence"].astype(float).unique())
    names = [f"{100 * c:g} %" for c in levels]
    data = []
    for i, (label, part) in enumerate(drift.groupby("calibration", sort=False)):
        by_level = dict(zip(part["confidence"].astype(float), part["coverage"].astype(float)))
        data.append({"type": "bar", "x": names, "y": [100 * by_level[c] for c in levels], "name": str(label),
                     "marker": {"color": (FLAGGED_COLOR, SAFE_COLOR)[i % 2]},
                     "hovertemplate": "%{x}: coverage %{y:.1f} %<extra>" + str(label) + "</extra>"})
    data.append({"type": "scatter", "x": names, "y": [100 * c for c in levels], "name": "target", "mode": "markers",
                 "marker": {"symbol": "line-ew-open", "size": 40, "color": "black", "line": {"width": 2}},
                 "hovertemplate": "target %{y:.1f} %<extra></extra>"})
    return go.Figure({"data": data, "layout": _layout(
        title, height=340, barmode="group", xaxis={"title": {"text": "confidence level"}, "type": "category"},
        yaxis={"title": {"text": "coverage on B's test split (%)"}, "range": [0, 105]})})


def fig_what_if(table: pd.DataFrame, title: str = "What another acceptable rate would release") -> go.Figure:
    """The what-if at the declared ``k`` (:func:`~cpa_core.redaction.whatif.what_if`): per acceptable linkage rate,
    the documents released as they are, edited and withheld, stacked; the declared rate marked."""
    declared = table[table["declared"]].iloc[0]
    rows = table[table["flag_below"] == declared["flag_below"]].sort_values("acceptable_linkage")
    x = rows["acceptable_linkage"].tolist()
    bars = [("released as it is", "released_as_is", SAFE_COLOR), ("edited", "edited", SECOND_COLOR),
            ("withheld", "withheld", FLAGGED_COLOR)]
    data = [{"type": "bar", "name": name, "x": x, "y": rows[column].tolist(), "marker": {"color": color},
             "hovertemplate": f"acceptable rate %{{x:.3f}}: %{{y:,}} {name}<extra></extra>"}
            for name, column, color in bars if column != "edited" or rows[column].any()]
    line, notes = _vline(float(declared["acceptable_linkage"]), TARGET_COLOR, "declared")
    layout = _layout(title, 360, barmode="stack", xaxis={"title": {"text": f"acceptable linkage rate (k = "
                                                                        f"{int(declared['flag_below'])})"}},
                     yaxis={"title": {"text": "documents"}}, shapes=[line], annotations=notes)
    return go.Figure({"data": data, "layout": layout})


def fig_candidate_weights(candidates: pd.DataFrame, title: str = "Top candidates and their weights") -> go.Figure:
    """Bars of the attacker's weight per ranked candidate (``candidate``, ``weight``, ``in_set``, ``is_truth``)."""
    frame = candidates.iloc[::-1]
    colors = np.where(frame["in_set"].to_numpy(dtype=bool), FLAGGED_COLOR, TARGET_COLOR).tolist()
    labels = [f"{c} ★" if t else str(c) for c, t in zip(frame["candidate"], frame["is_truth"])]
    return go.Figure({"data": [{"type": "bar", "x": frame["weight"].astype(float).tolist(), "y": labels,
                                "orientation": "h", "marker": {"color": colors},
                                "hovertemplate": "%{y}: weight %{x:.4f}<extra></extra>"}],
                      "layout": _layout(title, height=max(240, 26 * len(frame) + 110),
                                        xaxis={"title": {"text": "attacker's weight (red: in the certified set; "
                                                                 "★ true identity)"}},
                                        yaxis={"type": "category"})})


# --- the certificate report with these figures ---------------------------------------------------------------

def _figure(fig: go.Figure, div_id: str) -> str:
    fig.update_layout(template=REPORT_TEMPLATE)
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def report_charts(charts: report_html.ReportCharts) -> tuple[str, list[str]]:
    """The certificate report's charts as plotly figures drawn from data embedded in the page: plotly.js, inlined
    once for the page's head, and the figures (set sizes; coverage versus confidence under the split protocol, set
    size versus confidence under the release protocol, where coverage is the target by construction; the groups if
    any)."""
    split = charts.protocol == "split"
    curve = (fig_confidence_curve(charts.curve, charts.confidence) if split else
             fig_set_size_curve(charts.curve, charts.confidence, charts.flag_below))
    figures = [_figure(fig_set_size_histogram(charts.set_sizes, charts.flag_below, title=charts.histogram_title,
                                              flagged=charts.flagged, rule=charts.rule,
                                              documents="test documents" if split else "certified documents"),
                       "fig-histogram"),
               _figure(curve, "fig-curve")]
    if charts.per_group is not None:
        figures.append(_figure(fig_group_breakdown(charts.per_group, charts.confidence), "fig-groups"))
    return f'<script type="text/javascript">{get_plotlyjs()}</script>', figures


def certificate_report(result: AuditResult, *, curve: pd.DataFrame, worklist: pd.DataFrame, manifest: dict,
                       generated_at: datetime | None = None, for_print: bool = False,
                       texts: Mapping[str, str] | None = None) -> str:
    """The dashboard's certificate report: :func:`cpa_core.report.html.certificate_report` with interactive
    plotly charts on screen (:func:`report_charts`); the print version (``for_print=True``, the PDF's source) is
    the core's, with static SVG charts and no script."""
    return report_html.certificate_report(result, curve=curve, worklist=worklist, manifest=manifest,
                                          generated_at=generated_at, for_print=for_print, charts=report_charts,
                                          texts=texts)
