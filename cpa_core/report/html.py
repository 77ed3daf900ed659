"""The self-contained certificate report for a privacy officer (no Streamlit, no plotly), on screen and on paper.

One HTML file: styles are inlined, every figure is drawn from data embedded in the page, nothing is fetched
from the network. It opens with the release verdict (:func:`cpa_core.report.verdict.release_verdict`) and a sign-off
block. The figures are static inline SVG drawn here, and the page carries no script: the command line's
``report.html`` (:func:`cpa_core.store.records.write_audit`) and the print version (``for_print=True``, the source
of the PDF, see :mod:`cpa_ui.pdf`). The dashboard passes a renderer of interactive charts instead
(``charts``, :func:`cpa_ui.figures.report_charts`: plotly charts, plotly.js inlined once). Every value from the
data (file names, ids, group labels, terms) is escaped. Document text never appears in the report.

An attacker panel has a report of its own (:func:`panel_report`, written at the top of the panel's folder by
:func:`cpa_core.store.records.write_panel`): the panel's verdict, the attackers side by side with a link to each one's
own report, the one that decided and the correction for testing several attackers.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from cpa_core.audit.results import AuditResult
from cpa_core.report.diagnostics import NEARLY_WHOLE
from cpa_core.report.evidence import evidence_excerpt
from cpa_core.report.formatting import (
    FLAGGED_COLOR,
    GROUP_COLUMNS,
    SAFE_COLOR,
    TARGET_COLOR,
    bin_counts,
    configuration_summary,
    counted,
    fmt_confidence,
    fmt_coverage,
    fmt_interval,
    fmt_number,
    fmt_percent,
    kept_text,
    linkage_method,
    set_size_bins,
    without_empty,
)
from cpa_core.report.help import COLUMNS, HELP, PERCENT, UPPER_BOUND, column_label, help_texts
from cpa_core.report.metrics import COVERAGE_MEANING, summarize
from cpa_core.report.verdict import (
    PANEL_ERROR,
    PanelVerdict,
    Verdict,
    panel_bound_level,
    panel_verdict,
    release_verdict,
)

if TYPE_CHECKING:
    from cpa_core.audit.panel import PanelResult

REPORT_CALIBRATION_COLUMNS = ["confidence", "alpha", "coverage", "coverage_ci", "coverage_conditional",
                              "candidate_miss_rate", "open_world_bound", "threshold", "median_set_size",
                              "whole_pool_rate", "n_cal", "n_cal_needed"]
"""The report's table per confidence level: coverage (with its interval under the split protocol) first; the
open-world bound only under the 'exclude' miss policy, the only one it describes."""

STATUS_COLORS = {"release": "#1e7e34", "redact": "#b9770e", "inconclusive": "#c0392b", "unsafe": "#8e1b10"}
CHECK_RESULTS = {True: ("passed", "pass"), False: ("FAILED", "fail"), None: ("not a test", "info")}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1f2933;
       max-width: 1100px; margin: 2rem auto; padding: 0 1.5rem; line-height: 1.5; }
h1 { font-size: 1.8rem; margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #d9e2ec; }
.subtitle { color: #52606d; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.88em; }
.wide { overflow-x: auto; }
th, td { border: 1px solid #d9e2ec; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f0f4f8; }
.kpis { display: grid; grid-template-columns: repeat(5, 1fr); gap: 0.8rem; margin: 1rem 0; }
.kpi { border: 1px solid #d9e2ec; border-radius: 0.5rem; padding: 0.7rem; }
.kpi .value { font-size: 1.6rem; font-weight: 600; } .kpi .label { font-weight: 600; }
.kpi .help { font-size: 0.8em; color: #52606d; }
.note { background: #fff8e1; border-left: 4px solid #f0b429; padding: 0.6rem 0.9rem; margin: 0.8rem 0; }
.plain { background: #f0f4f8; border-left: 4px solid #2e86c1; padding: 0.6rem 0.9rem; }
code { background: #f0f4f8; padding: 0 0.2rem; }
.verdict { border: 2px solid; border-radius: 0.5rem; padding: 0.4rem 1.2rem 0.8rem; margin: 1.2rem 0; }
.verdict .status { display: inline-block; color: #fff; font-weight: 700;
                   letter-spacing: 0.03em; padding: 0.25rem 0.8rem; border-radius: 0.3rem; margin-top: 0.8rem; }
.verdict .headline { font-size: 1.15rem; font-weight: 600; }
.verdict h3 { margin-bottom: 0.2rem; }
td.pass { color: #1e7e34; font-weight: 600; } td.fail { color: #c0392b; font-weight: 700; }
td.info { color: #52606d; }
.signoff td.line { min-width: 14rem; height: 2.2rem; }
.hash td, td.hash { font-family: "DejaVu Sans Mono", monospace; font-size: 0.9em; overflow-wrap: anywhere; }
table.checks td:nth-child(2) { white-space: nowrap; }
.figure-note { color: #52606d; font-size: 0.85em; }
svg text { font-family: "DejaVu Sans", sans-serif; }
@page { size: A4; margin: 16mm 14mm 18mm 14mm;
        @bottom-right { content: "page " counter(page) " of " counter(pages); font-size: 8pt; color: #52606d;
                        font-family: "DejaVu Sans", sans-serif; } }
@media print {
  body { max-width: none; margin: 0; padding: 0; font-size: 9.5pt; line-height: 1.35; }
  h1 { font-size: 18pt; } h2 { font-size: 13pt; margin-top: 1.2rem; break-after: avoid; page-break-after: avoid; }
  h3 { break-after: avoid; page-break-after: avoid; }
  table { font-size: 8pt; width: 100%; } th, td { padding: 0.15rem 0.35rem; overflow-wrap: break-word; }
  thead { display: table-header-group; } tr { break-inside: avoid; page-break-inside: avoid; }
  .wide { overflow: visible; }
  .keep, .kpis, .kpi, .note, figure, svg { break-inside: avoid; page-break-inside: avoid; }
  .kpis { gap: 0.4rem; } .kpi { padding: 0.4rem; } .kpi .value { font-size: 13pt; }
  .verdict { padding: 0.2rem 0.8rem 0.5rem; }
  .signoff { break-inside: avoid; page-break-inside: avoid; }
}
"""

GUARANTEE = {
    "infinite": "Under the conservative miss policy (calibration documents whose subject is missing from the pool "
                "count as infinitely nonconforming), coverage is unconditional: P(truth ∈ C) ≥ 1 − α = {level} over "
                "all documents, including those whose subject is not in the candidate pool.",
    "exclude": "Under the 'exclude' miss policy (calibration documents whose subject is missing from the pool are "
               "left out), the guarantee is conditional on the subject being in the pool: P(truth ∈ C | truth in "
               "pool) ≥ 1 − α = {level}; unconditionally, coverage is at least (1 − ρ)(1 − α) = {bound}, where "
               "ρ = {rho} is the candidate-miss rate.",
}
"""The guarantee sentence of each miss policy; the report quotes only the audit's."""


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _cell(column: str, value) -> str:
    """A table cell as text, formatted as the dashboard formats that column (:data:`~cpa_core.report.help.COLUMNS`)."""
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–" if column in COLUMNS and COLUMNS[column][1] is not None else ""
    number_format = COLUMNS.get(column, (None, None, None))[1]
    if number_format == PERCENT:
        return fmt_percent(value)
    if number_format in ("%d", "%g"):
        return fmt_number(value)
    if number_format is not None:
        return number_format % value
    return str(value)


def _table(frame: pd.DataFrame, max_rows: int | None = None, protocol: str | None = None) -> str:
    """An HTML table of ``frame`` with every cell formatted and escaped, its columns labelled in the terms of
    ``protocol`` when it is given."""
    shown = frame if max_rows is None else frame.head(max_rows)
    head = "".join(f"<th>{_e(column_label(c, protocol))}</th>" for c in shown.columns)
    rows = ["<tr>" + "".join(f"<td>{_e(_cell(column, value))}</td>" for column, value in zip(shown.columns, record))
            + "</tr>" for record in shown.itertuples(index=False)]
    more = "" if max_rows is None or len(frame) <= max_rows else \
        f"<p>… and {len(frame) - max_rows:,} more rows (see the worklist export).</p>"
    return (f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
            f"{more}")


def _pairs(pairs: Iterable[tuple[str, object]], cls: str = "") -> str:
    return f"<table class='keep {cls}'><tbody>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
                                                          for k, v in pairs) + "</tbody></table>"


def _percent(value) -> str:
    return fmt_percent(value) if value is not None and not (isinstance(value, float) and math.isnan(value)) else "–"


# --- static figures (no script runs in a PDF engine) -----------------------------------------------------------

@dataclass(frozen=True)
class ReportCharts:
    """What the report's charts show, for a renderer of other charts than its static ones (the dashboard's
    interactive ones, :func:`cpa_ui.figures.report_charts`)."""

    set_sizes: np.ndarray
    """The certified set sizes at the report's level (the histogram)."""
    flag_below: int
    histogram_title: str
    curve: pd.DataFrame
    """:func:`cpa_core.report.metrics.confidence_curve` (coverage versus confidence)."""
    confidence: float
    per_group: pd.DataFrame | None
    """The per-group figures at the report's level (:data:`~cpa_core.report.formatting.GROUP_COLUMNS`); ``None``
    when the documents have no groups."""
    protocol: str = "split"
    """The audit's protocol: under ``release`` coverage is the target by construction (a curve of it says nothing),
    so the static report draws set size against confidence instead."""
    flagged: np.ndarray | None = None
    """The documents the release policy flags (by set size or by linkage probability), the histogram's red."""
    rule: str | None = None
    """The release policy's rule in symbols (:attr:`~cpa_core.audit.policy.ReleasePolicy.rule`)."""


ChartRenderer = Callable[[ReportCharts], tuple[str, list[str]]]
"""Draws the report's charts: returns what the page's head needs (e.g. a script, once) and the figures' HTML, in
order; the report places both as given."""


def _svg(width: int, height: int, body: str, label: str) -> str:
    return (f'<svg role="img" aria-label="{_e(label)}" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" style="max-width:100%">{body}</svg>')


def _svg_text(x: float, y: float, text: str, size: int = 10, anchor: str = "middle", color: str = "#1f2933",
              weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}" '
            f'font-weight="{weight}">{_e(text)}</text>')


CHARACTER_WIDTH = 0.64
"""An upper estimate of a character's width in DejaVu Sans, in ems (digits are 0.636): enough room for a label."""


def _text_width(text: str, size: float) -> float:
    return CHARACTER_WIDTH * size * len(text)


def _fitted_text(x: float, y: float, text: str, size: int, width: float, anchor: str = "middle",
                 color: str = "#1f2933", backdrop: bool = False) -> str:
    """A label at ``x`` anchored as asked, moved left or right just enough to stay within ``[0, width]`` (text outside
    the figure's box is cut off, on paper as on screen); ``backdrop``: on a white box, readable over the bars."""
    extent = _text_width(text, size)
    start = {"start": x, "middle": x - extent / 2, "end": x - extent}[anchor]
    shift = max(0.0, -start + 1) - max(0.0, start + extent - (width - 1))
    box = (f'<rect x="{start + shift - 1:.1f}" y="{y - size:.1f}" width="{extent + 2:.1f}" height="{size + 3:.1f}" '
           'fill="#ffffff" fill-opacity="0.9"/>') if backdrop else ""
    return box + _svg_text(x + shift, y, text, size, anchor, color)


def histogram_colours(flag_below: int, rule: str | None) -> str:
    """What the histograms' red stands for: the documents the release policy flags (its ``rule``), or, without the
    flags, the sets smaller than ``k``."""
    return f"red: flagged, {rule}" if rule else f"red: |C| < k = {flag_below}"


def svg_set_size_histogram(set_sizes: np.ndarray, flag_below: int, title: str, flagged: np.ndarray | None = None,
                           rule: str | None = None) -> str:
    """The set-size histogram (the bins of :func:`cpa_core.report.formatting.set_size_bins`) as a static SVG bar chart,
    a dashed line at k. Red: the documents ``flagged`` by the release policy (``rule``: its words), at the foot of
    each bin's bar, so that a bin right of k shows the documents flagged by their linkage probability; without
    ``flagged``, the bins of sets smaller than k. Every label stays inside the figure: the last bin's beside the right
    edge, the line's on whichever side of it has room."""
    bins = set_size_bins(set_sizes, flag_below)
    red = bin_counts(bins, set_sizes, flagged) if flagged is not None else \
        np.where(bins["upper"] < flag_below, bins["count"], 0)
    n = max(len(bins), 1)
    last = str(bins["label"].iloc[-1]) if len(bins) else ""
    width, height, left, top, bottom = 680, 250, 52, 30, 52
    right = max(12, math.ceil(_text_width(last, 9) / 2) + 4)  # half the last bin's label hangs past its bar
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(int(bins["count"].max()) if len(bins) else 0, 1)
    step = plot_w / n
    parts = [_svg_text(left, 16, title, 12, "start", weight="bold"),
             f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#52606d"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#52606d"/>',
             _svg_text(left - 6, top + plot_h + 4, "0", 9, "end"), _svg_text(left - 6, top + 8, f"{peak:,}", 9, "end")]
    widest = max((_text_width(str(label), 9) for label in bins["label"]), default=0.0)
    label_every = max(1, math.ceil(n / 12), math.ceil((widest + 6) / max(step, 1e-9)))  # labels never overlap
    for i, row in enumerate(bins.itertuples(index=False)):
        x = left + i * step
        base = top + plot_h
        for count, color in ((int(red[i]), FLAGGED_COLOR), (row.count - int(red[i]), SAFE_COLOR)):
            if count:  # red at the foot of the bar, the documents not flagged above it
                bar = plot_h * count / peak
                parts.append(f'<rect x="{x + 0.5:.1f}" y="{base - bar:.1f}" width="{max(step - 1, 0.5):.1f}" '
                             f'height="{bar:.1f}" fill="{color}"/>')
                base -= bar
        if i == n - 1 or (i % label_every == 0 and n - 1 - i >= label_every):  # the last label always, alone
            parts.append(_fitted_text(x + step / 2, top + plot_h + 14, row.label, 9, width))
    flagged = int((bins["upper"] < flag_below).sum())
    line_x = left + flagged * step
    parts.append(f'<line x1="{line_x:.1f}" y1="{top}" x2="{line_x:.1f}" y2="{top + plot_h}" stroke="{FLAGGED_COLOR}" '
                 'stroke-dasharray="4 3"/>')
    k_label = f"k = {flag_below}"
    room_right = line_x + 4 + _text_width(k_label, 9) <= width - 2
    parts.append(_fitted_text(line_x + 4 if room_right else line_x - 4, top + 10, k_label, 9, width,
                              "start" if room_right else "end", FLAGGED_COLOR, backdrop=True))
    parts.append(_fitted_text(left + plot_w / 2, height - 14,
                              f"certified set size |C| ({histogram_colours(flag_below, rule)})", 10, width))
    parts.append(_svg_text(14, top + plot_h / 2, "documents", 10).replace(
        "<text ", f'<text transform="rotate(-90 14 {top + plot_h / 2:.1f})" ', 1))
    return _svg(width, height, "".join(parts), title)


def svg_set_size_curve(curve: pd.DataFrame, confidence: float, flag_below: int, title: str) -> str:
    """Median and mean certified set size as the confidence level varies
    (:func:`cpa_core.report.metrics.confidence_curve`), as a static SVG line chart with the release policy's k and the
    report's level marked: the chart of the release protocol, whose coverage is the target by construction."""
    width, height, left, right, top, bottom = 680, 250, 52, 180, 30, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    levels = curve["confidence"].astype(float).to_numpy()
    series = [("median |C|", curve["median_set_size"].astype(float).to_numpy(), SAFE_COLOR, ""),
              ("mean |C|", curve["mean_set_size"].astype(float).to_numpy(), SAFE_COLOR, "6 3")]
    x0, x1 = float(levels.min()), float(levels.max())
    finite = [v for _, values, _, _ in series for v in values if math.isfinite(v)]
    top_value = max([*finite, float(flag_below), 1.0])
    sx = lambda v: left + plot_w * (v - x0) / max(x1 - x0, 1e-9)  # noqa: E731
    sy = lambda v: top + plot_h * (1 - v / top_value)  # noqa: E731
    parts = [_svg_text(left, 16, title, 12, "start", weight="bold"),
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#d9e2ec"/>']
    for tick in np.linspace(0, top_value, 5):
        parts.append(_svg_text(left - 6, sy(tick) + 3, fmt_number(float(round(tick))), 9, "end"))
    for tick in np.arange(math.ceil(20 * x0) / 20, x1 + 1e-9, 0.1):
        parts.append(_svg_text(sx(tick), top + plot_h + 14, f"{100 * tick:.0f} %", 9))
    k_y = sy(float(flag_below))
    parts.append(f'<line x1="{left}" y1="{k_y:.1f}" x2="{left + plot_w}" y2="{k_y:.1f}" stroke="{FLAGGED_COLOR}" '
                 'stroke-dasharray="2 3"/>')
    parts.append(_svg_text(left + plot_w + 6, k_y + 3, f"k = {flag_below} (flagged below)", 9, "start", FLAGGED_COLOR))
    parts += _svg_lines(series, levels, sx, sy, left + plot_w, top)
    marker = sx(float(confidence))
    parts.append(f'<line x1="{marker:.1f}" y1="{top}" x2="{marker:.1f}" y2="{top + plot_h}" stroke="{FLAGGED_COLOR}" '
                 'stroke-dasharray="4 3"/>')
    parts.append(_svg_text(marker - 3, top + 12, fmt_confidence(confidence), 9, "end", FLAGGED_COLOR))
    parts.append(_svg_text(left + plot_w / 2, height - 8, "confidence level 1 − α", 10))
    parts.append(_svg_text(14, top + plot_h / 2, "certified set size |C|", 10).replace(
        "<text ", f'<text transform="rotate(-90 14 {top + plot_h / 2:.1f})" ', 1))
    return _svg(width, height, "".join(parts), title)


def _svg_lines(series, levels, sx, sy, legend_x: float, top: float) -> list[str]:
    """Each ``(name, values, color, dash)`` of ``series`` as a polyline over ``levels`` (values that are not finite
    left out), with its legend entry to the right of the plot (``legend_x``: the plot's right edge)."""
    parts = []
    for i, (name, values, color, dash) in enumerate(series):
        points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(levels, values) if math.isfinite(y))
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.8"{dashing}/>')
        legend_y = top + 12 + 16 * i
        parts.append(f'<line x1="{legend_x + 10}" y1="{legend_y - 3}" x2="{legend_x + 30}" '
                     f'y2="{legend_y - 3}" stroke="{color}" stroke-width="1.8"{dashing}/>')
        parts.append(_svg_text(legend_x + 34, legend_y, name, 9, "start"))
    return parts


def svg_confidence_curve(curve: pd.DataFrame, confidence: float, title: str) -> str:
    """Coverage against the target as the confidence level varies (:func:`cpa_core.report.metrics.confidence_curve`),
    as a static SVG line chart with the report's level marked."""
    width, height, left, right, top, bottom = 680, 250, 52, 180, 30, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    levels = curve["confidence"].astype(float).to_numpy()
    series = [("target (= confidence)", levels, TARGET_COLOR, "2 3"),
              ("coverage", curve["coverage"].astype(float).to_numpy(), SAFE_COLOR, "")]
    if curve["coverage_conditional"].notna().any():
        series.append(("coverage (identity in pool)", curve["coverage_conditional"].astype(float).to_numpy(),
                       SAFE_COLOR, "6 3"))
    x0, x1 = float(levels.min()), float(levels.max())
    y0 = math.floor(10 * min(x0, *(np.nanmin(y) for _, y, _, _ in series))) / 10
    sx = lambda v: left + plot_w * (v - x0) / max(x1 - x0, 1e-9)  # noqa: E731
    sy = lambda v: top + plot_h * (1 - (v - y0) / max(1 - y0, 1e-9))  # noqa: E731
    parts = [_svg_text(left, 16, title, 12, "start", weight="bold"),
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#d9e2ec"/>']
    for tick in np.arange(math.ceil(10 * y0) / 10, 1.0001, 0.1):
        parts.append(_svg_text(left - 6, sy(tick) + 3, f"{100 * tick:.0f} %", 9, "end"))
    for tick in np.arange(math.ceil(20 * x0) / 20, x1 + 1e-9, 0.1):
        parts.append(_svg_text(sx(tick), top + plot_h + 14, f"{100 * tick:.0f} %", 9))
    parts += _svg_lines(series, levels, sx, sy, left + plot_w, top)
    marker = sx(float(confidence))
    parts.append(f'<line x1="{marker:.1f}" y1="{top}" x2="{marker:.1f}" y2="{top + plot_h}" stroke="{FLAGGED_COLOR}" '
                 'stroke-dasharray="4 3"/>')
    parts.append(_svg_text(marker + 3, top + plot_h - 4, fmt_confidence(confidence), 9, "start", FLAGGED_COLOR))
    parts.append(_svg_text(left + plot_w / 2, height - 8, "confidence level 1 − α", 10))
    return _svg(width, height, "".join(parts), title)


# --- the blocks of the report ---------------------------------------------------------------------------------

def attack_rows(verdict: Verdict) -> list[tuple[str, str]]:
    """The attack's success as the verdict reads it: first-guess rate, acceptable rate, flags by rule, remainder."""
    first = ("unknown (no labelled document)" if verdict.first_guess_rate is None else
             f"{fmt_percent(verdict.first_guess_rate)} (95 % CI {fmt_percent(verdict.first_guess_low)}–"
             f"{fmt_percent(verdict.first_guess_high)})")
    return [("first guess is the right person", first),
            ("acceptable linkage rate", fmt_percent(verdict.acceptable_linkage)),
            ("flagged", f"{verdict.n_flagged:,} of {verdict.n_documents:,} ({verdict.n_flagged_by_set or 0:,} by set "
                        f"size, {verdict.n_flagged_by_linkage or 0:,} by linkage probability)"),
            ("the rest, linked at most", "nothing left" if verdict.remainder_bound is None else
             f"{fmt_percent(verdict.remainder_bound)} ({UPPER_BOUND})"),
            ("documents that give the attacker nothing", f"{verdict.n_uninformative or 0:,}")]


def verdict_block(verdict: Verdict) -> str:
    """The verdict: status, headline, the validity checks, what the curator should do, and the warnings."""
    rows = "".join(f"<tr><td>{_e(check.name)}</td><td class='{CHECK_RESULTS[check.passed][1]}'>"
                   f"{CHECK_RESULTS[check.passed][0]}</td><td>{_e(check.reason)}</td></tr>" for check in verdict.checks)
    actions = "".join(f"<li>{_e(action)}</li>" for action in verdict.actions)
    warnings = "".join(f"<div class='note'>{_e(w)}</div>" for w in verdict.warnings)
    attack = "".join(f"<tr><td>{_e(name)}</td><td>{_e(value)}</td></tr>" for name, value in attack_rows(verdict))
    return f"""<section class="verdict" id="verdict" style="border-color: {STATUS_COLORS[verdict.status]}">
<div class="status" style="background: {STATUS_COLORS[verdict.status]}">Verdict: {_e(verdict.title)}</div>
<p class="headline">{_e(verdict.headline)}</p>
<h3>The attack</h3>
<table class="keep attack"><tbody>{attack}</tbody></table>
<p class="figure-note">{_e(HELP['linkage_probability'])}</p>
<h3>Validity checks</h3>
<table class="keep checks"><thead><tr><th>check</th><th>result</th><th>reason</th></tr></thead>
<tbody>{rows}</tbody></table>
<h3>What the curator should do</h3>
<ol>{actions}</ol>
{warnings}
<p class="figure-note">{_e(HELP['verdict'])}</p>
</section>"""


LISTED_AT = 8
"""A configuration detail that is a list of more items than this (a tuning fold's document ids) is shown in the
report's appendix as a count and a SHA-256, not item by item."""


def listed_in_appendix(rows: Sequence[tuple[str, object]]) -> tuple[list[tuple[str, object]], list[tuple]]:
    """The configuration's rows with each long list (:data:`LISTED_AT`) replaced by its count and a pointer to the
    appendix, and the appendix's entries: name, count and the SHA-256 of the items (each as text, one per line)."""
    shown, listed = [], []
    for name, value in rows:
        if isinstance(value, (list, tuple)) and len(value) > LISTED_AT:
            digest = hashlib.sha256("\n".join(map(str, value)).encode("utf-8", "surrogatepass")).hexdigest()
            listed.append((name, len(value), digest))
            shown.append((name, f"{len(value):,} items (appendix {len(listed)})"))
        else:
            shown.append((name, value))
    return shown, listed


def appendix_block(listed: Sequence[tuple]) -> str:
    """The report's appendix: each long configuration list as a count and a SHA-256 (the items are in the
    manifest and the per-document records); nothing without one."""
    if not listed:
        return ""
    rows = "".join(f"<tr><th>appendix {i}: {_e(name)}</th><td>{count:,} items; SHA-256 of the items, one per line: "
                   f"<span class='hash'>{_e(digest)}</span></td></tr>"
                   for i, (name, count, digest) in enumerate(listed, start=1))
    return f"""<section class="keep" id="appendix">
<h2>Appendix: configuration lists</h2>
<p>Configuration details that are lists are counted and hashed here; the items themselves are in the audit's
manifest (manifest.json).</p>
<table class="keep"><tbody>{rows}</tbody></table>
</section>"""


def signoff_block(verdict: Verdict | PanelVerdict, *, inputs: dict, protocol: str, miss_policy: str, generated: str,
                  tool_version: str, attackers: Iterable[str] = (), redaction: Mapping | None = None) -> str:
    """The block a privacy officer fills in and signs, with what exactly is signed for (``attackers``: the members of
    an attacker panel, whose verdict is signed; ``redaction``: where a redacted release comes from, whose file is
    named beside the redacted one's)."""
    files = [(f"{name} file" + (" (the redacted release)" if redaction and name == "documents" else ""),
              f"{info.get('file')} ({info.get('rows', 0):,} rows)")
             for name, info in ((n, inputs[n]) for n in ("documents", "registry") if n in inputs)]
    hashes = "".join(f"<tr><th>{_e(name)} SHA-256</th><td class='hash'>{_e(inputs[name].get('sha256'))}</td></tr>"
                     for name in ("documents", "registry") if name in inputs)
    if redaction:
        source = redaction.get("source") or {}
        files.append(("redacted from", f"{redaction_origin(redaction)}: {redaction_counts_text(redaction)}"))
        hashes += (f"<tr><th>redacted from: documents SHA-256</th><td class='hash'>{_e(source.get('sha256'))}</td></tr>"
                   f"<tr><th>decisions table SHA-256</th>"
                   f"<td class='hash'>{_e((redaction.get('decisions') or {}).get('sha256'))}</td></tr>")
    panel = [("attackers (each calibrated on its own)", ", ".join(attackers))] if attackers else []
    facts = [("configuration id", verdict.config_id), *panel, ("verdict", verdict.title),
             ("confidence level", fmt_confidence(verdict.confidence)), ("release rule", f"flag {verdict.rule}"),
             ("protocol", protocol), ("miss policy", miss_policy), *files]
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    lines = "".join(f"<tr><th>{label}</th><td class='line'></td></tr>"
                    for label in ("Reviewed by", "Role", "Date", "Signature"))
    decisions = ("Release as audited", "Release after redacting or withholding the flagged documents",
                 "Do not release: audit again")
    return f"""<section class="signoff" id="signoff">
<h2>Sign-off</h2>
<p>This certificate covers exactly the configuration, data and release rule below; any change needs a new audit.</p>
<table class="keep"><tbody>{rows}{hashes}
<tr><th>generated at</th><td>{_e(generated)}</td></tr>
<tr><th>tool version</th><td>cpa-core {_e(tool_version)}</td></tr></tbody></table>
<p><b>Decision</b> (tick one): {' &nbsp; '.join(f'☐ {_e(d)}' for d in decisions)}</p>
<table class="keep"><tbody>{lines}</tbody></table>
</section>"""


def certificate_report(result: AuditResult, *, curve: pd.DataFrame, worklist: pd.DataFrame, manifest: dict,
                       generated_at: datetime | None = None, for_print: bool = False,
                       charts: ChartRenderer | None = None, texts: Mapping[str, str] | None = None) -> str:
    """The report of one audit, as one HTML document, at its flagging level under its release policy (both from
    its declared configuration, so the report states one configuration: see :meth:`AuditResult.with_policy`).

    Parameters
    ----------
    curve : :func:`cpa_core.report.metrics.confidence_curve` of ``result``
    worklist : :func:`cpa_core.report.worklist.worklist` of ``result`` (at its flagging level, under its policy)
    manifest : :func:`cpa_core.store.records.manifest` of ``result``
    for_print : the print version, for :func:`cpa_ui.pdf.report_pdf`: static SVG figures and no script
    charts : on screen, draws the charts instead of the static SVG ones (the dashboard's interactive charts,
        :func:`cpa_ui.figures.report_charts`); without it, or for print, the figures are static and the page
        carries no script
    texts : the released texts by doc id: each flagged document's row then carries a short excerpt around its
        evidence (:func:`~cpa_core.report.evidence.evidence_excerpt`), and the report holds document text
    """
    config = result.config
    confidence, policy = config.policy_confidence, config.policy
    cert = result.certificate(confidence)
    levels = sorted(set(config.confidences) | {confidence})
    summary_of_levels = summarize(result, levels, policy)
    metrics = summary_of_levels.level(confidence)
    verdict = release_verdict(summary_of_levels, confidence)
    split_protocol = config.protocol == "split"
    helps = help_texts(config.protocol)
    inputs = result.inputs
    groups = sorted({str(g) for g in result.test_split.groups}) if result.test_split.groups is not None else []
    generated = (generated_at or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    rule_text = policy.rule
    rule = _e(rule_text)
    level = _e(fmt_confidence(confidence))
    summary = configuration_summary(config, n_documents=inputs.get("documents", {}).get("rows", 0),
                                    n_profiles=inputs.get("registry", {}).get("rows", 0),
                                    groups=groups if config.group_column else ())
    versions = manifest.get("versions", {})
    documents = "held-out test documents" if split_protocol else "documents"
    n_test = metrics.n_test
    n_empty = round((metrics.empty_rate or 0) * n_test)
    n_whole = round((metrics.whole_pool_rate or 0) * n_test)
    flag_counts = (f"{metrics.n_flagged_by_set or 0:,} by set size, {metrics.n_flagged_by_linkage or 0:,} by linkage "
                   "probability")

    coverage = fmt_coverage(metrics.coverage, metrics.coverage_low, metrics.coverage_high)
    coverage_in_pool = fmt_coverage(metrics.coverage_conditional, metrics.coverage_conditional_low,
                                    metrics.coverage_conditional_high)
    if split_protocol:
        coverage_sentence = (f"Empirical coverage on the test split is {_e(coverage)} ({_e(coverage_in_pool)} among "
                             "documents whose subject is in the candidate pool)")
    else:
        coverage_sentence = (f"{_e(_percent(metrics.coverage))} of the labelled documents are covered by their "
                             "leave-one-out set: about ⌈n(1 − α)⌉/n by construction under the release protocol, a "
                             "property of the method, not a validation of it")
    kpi_cards = [
        ("Documents at risk", f"{metrics.n_flagged:,} of {n_test:,}", HELP["at_risk"]),
        ("Smallest set", fmt_number(metrics.min_set_size), helps["min_set"]),
        ("Median set", fmt_number(metrics.median_set_size), helps["median_set"]),
        ("Mean leakage proxy", fmt_number(metrics.mean_leakage), helps["mean_leakage"]),
        (f"Coverage ({'test' if split_protocol else 'release'})", _percent(metrics.coverage),
         f"95 % CI {fmt_interval(metrics.coverage_low, metrics.coverage_high)}. {helps['coverage']}"
         if split_protocol else f"By construction: the {COVERAGE_MEANING['release']}."),
    ]
    cards = "".join(f"<div class='kpi'><div class='label'>{_e(label)}</div><div class='value'>{_e(value)}</div>"
                    f"<div class='help'>{_e(text)}</div></div>" for label, value, text in kpi_cards)

    knowledge = config.knowledge
    threat_rows = [
        ("configuration id", config.config_id),
        ("knowledge level", f"{knowledge.name}: {knowledge.description}" if knowledge.description else knowledge.name),
        ("registry fields the attacker sees", ", ".join(knowledge.fields)),
        ("query mode", knowledge.query_mode),
        ("attacker", json.dumps(config.attacker.to_dict(), sort_keys=True, default=str)),
        ("candidate pool", "whole registry" if config.top_k is None else f"top {config.top_k}"),
        ("nonconformity score", config.score),
        ("calibration / test documents" if split_protocol else "calibrating / certified documents",
         f"{len(result.calibration_split):,} / {len(result.test_split):,}"),
        *((("split seed", config.seed),) if split_protocol else ()),  # the release protocol splits nothing
        ("per-group calibration", f"yes, on '{config.group_column}'" if config.group_column else "no"),
        ("identities missing from the pool (calibration)", config.miss_policy),
        ("certified confidence levels", ", ".join(fmt_confidence(float(c)) for c in config.confidences)),
        ("confidence level of this report", fmt_confidence(confidence)),
        ("release policy of this report", f"flag {rule_text}"),
        ("protocol", config.protocol),
        *((f"chosen from the labelled documents: {name}", value) for name, value in inputs.get("learned", {}).items()),
        *((f"trained on the registry: {name}", value) for name, value in inputs.get("trained", {}).items()),
        ("linkage probability", linkage_method(result.linkage_model.describe())),
    ]
    threat_rows, listed = listed_in_appendix(threat_rows)
    calibration = summary_of_levels.overall_frame()
    calibration["coverage_ci"] = [fmt_interval(low, high) for low, high in
                                  zip(calibration["coverage_low"], calibration["coverage_high"])]
    shown_columns = [c for c in REPORT_CALIBRATION_COLUMNS
                     if (c != "coverage_ci" or split_protocol) and (c != "open_world_bound" or
                                                                   config.miss_policy == "exclude")]
    calibration_html = _table(without_empty(calibration[shown_columns]), protocol=config.protocol)
    per_group_note = ("<li>Thresholds were calibrated per group, so the guarantee holds within each group.</li>"
                      if config.group_column else "")
    guarantee = GUARANTEE[config.miss_policy].format(level=fmt_confidence(confidence),
                                                     bound=_percent(metrics.open_world_bound),
                                                     rho=_percent(metrics.candidate_miss_rate))
    other_notes = [w for other in levels if other != confidence for w in summary_of_levels.level(other).warnings]
    other_notes = [w for w in dict.fromkeys(other_notes) if w not in verdict.warnings]
    notes_html = ("<p>Warnings at the other certified levels:</p>" + "".join(
        f"<div class='note'>{_e(n)}</div>" for n in other_notes)) if other_notes else ""

    histogram_title = f"Certified set sizes at {fmt_confidence(confidence)}"
    per_group = summary_of_levels.groups_frame(confidence)[GROUP_COLUMNS] if groups else None
    group_html = ""
    if charts is not None and not for_print:
        script, figures = charts(ReportCharts(cert.set_sizes, policy.flag_below, histogram_title, curve, confidence,
                                              per_group, config.protocol, cert.flags(policy), policy.rule))
    else:
        script = ""
        if split_protocol:
            curve_figure = svg_confidence_curve(curve, confidence, "Coverage versus confidence")
            curve_note = "the median set size per level is in the table below"
        else:
            curve_figure = svg_set_size_curve(curve, confidence, policy.flag_below, "Certified set size versus "
                                                                                    "confidence")
            curve_note = ("under the release protocol coverage is about ⌈n(1 − α)⌉/n at every level by construction "
                          "(a chart of it would be the diagonal), so the second chart shows instead how the certified "
                          "sets grow with the confidence level, against the release policy's k; coverage per level is "
                          "in the table below")
        histogram = svg_set_size_histogram(cert.set_sizes, policy.flag_below, histogram_title, cert.flags(policy),
                                           policy.rule)
        figures = [f"<figure>{histogram}</figure>",
                   f"<figure>{curve_figure}</figure>",
                   f"<p class='figure-note'>{'Printed' if for_print else 'Static'} version: the charts are drawn "
                   f"from the same figures as the interactive report; {curve_note}"
                   + ("; the per-group chart is replaced by the per-group table." if groups else ".") + "</p>"]
    if per_group is not None:
        group_html = "<h3>Per group</h3>" + _table(without_empty(per_group, ("n_cal",)), protocol=config.protocol)
        if not config.group_column:
            group_html += ("<p>The thresholds were calibrated on all groups together: the guarantee holds on "
                           "average over the groups, not within each one.</p>")

    flagged = without_empty(worklist.drop(columns=[c for c in ("evidence", "config_id", "confidence")
                                                   if c in worklist.columns]), ("inferred_clues", "group"))
    if texts is not None and len(worklist):
        flagged.insert(flagged.columns.get_loc("driving_terms") + 1, "excerpt",
                       [evidence_excerpt(str(texts.get(str(doc_id), "")), spans or [])
                        for doc_id, spans in zip(worklist["doc_id"], worklist["evidence"])])
    text_note = ("Each row carries a short excerpt of the released text around its evidence (the evidence between « "
                 "and »): this report holds document text; keep it as private as the release."
                 if texts is not None else "Document text is not included in this report.")
    flagged_html = _table(flagged, max_rows=500) if len(flagged) else \
        f"<p>No {'test ' if split_protocol else ''}document is flagged under this policy.</p>"

    split = manifest.get("split", {})
    files = {name: inputs[name] for name in ("documents", "registry") if name in inputs}
    checksums = [(f"{name} file", f"{info.get('file')} ({info.get('rows'):,} rows)") for name, info in files.items()]
    checksums += [(f"{name} SHA-256", info.get("sha256")) for name, info in files.items()]
    roles = {} if split_protocol else {"calibration": "calibrating", "test": "certified"}  # the manifest's keys
    checksums += [(f"{roles.get(name, name)} document ids SHA-256", digest)
                  for name, digest in split.get("doc_ids_sha256", {}).items()]
    version_rows = [(name, version) for name, version in versions.items()]
    if split_protocol:
        audited = (f"{len(result.calibration_split):,} documents with known subjects calibrated the threshold and "
                   f"{len(result.test_split):,} other documents tested it.")
    else:
        audited = (f"Release protocol: all {len(result.test_split):,} documents were certified; the "
                   f"{len(result.calibration_split):,} documents with known subjects calibrated the thresholds, each "
                   "labelled document's own set leaving its score out.")
    signoff = signoff_block(verdict, inputs=inputs, protocol=config.protocol, miss_policy=config.miss_policy,
                            generated=generated, tool_version=versions.get("cpa-core", "unknown"),
                            redaction=inputs.get("redaction"))

    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>CPA certificate report {_e(config.config_id)}</title>
<style>{STYLE}</style>
{script}
</head><body>
<h1>Re-identification risk certificate</h1>
<p class="subtitle">Conformal Privacy Auditing · configuration {_e(config.config_id)} · generated {_e(generated)}</p>
{verdict_block(verdict)}
{redaction_block(inputs['redaction']) if inputs.get('redaction') else ''}
{signoff}

<h2>Summary</h2>
<p>At <b>{level}</b> confidence, <b>{metrics.n_flagged:,}</b> of {n_test:,}
{documents} {'is' if metrics.n_flagged == 1 else 'are'} flagged (flagged when {rule}: {_e(flag_counts)}).
{coverage_sentence}; the candidate-miss rate is {_e(_percent(metrics.candidate_miss_rate))}.</p>
<div class="kpis">{cards}</div>
{notes_html}

<h2>Empty and whole-pool sets</h2>
<p><b>{n_empty:,}</b> of {n_test:,} {documents} {'has' if n_empty == 1 else 'have'} an <b>empty set</b> at {level}
confidence. |C| = 0: the attacker is more certain of its top candidate than the certificate needs — the highest risk;
flagged.</p>
<p><b>{n_whole:,}</b> of {n_test:,} {documents} {'has' if n_whole == 1 else 'have'} a <b>whole-pool set</b> (at least
{fmt_percent(NEARLY_WHOLE, 0)} of their candidate pool): the method could not narrow anything down — not evidence
of safety. A document that gives the attacker nothing (every candidate ties) gets the whole pool, never an empty set.
A count of flagged documents built on such sets says nothing about the risk of these documents.</p>

<h2>What was audited</h2>
<p>{_e(inputs.get('documents', {}).get('file'))}: {inputs.get('documents', {}).get('rows', 0):,} released documents,
attacked against the registry {_e(inputs.get('registry', {}).get('file'))} of
{inputs.get('registry', {}).get('rows', 0):,} candidate profiles. {audited}</p>

<h2>The declared threat configuration</h2>
<p class="plain">{_e(summary)}</p>
{_pairs(threat_rows)}

<h2>The guarantee, in plain words</h2>
<p>For each audited document, CPA gives a <b>certified ambiguity set</b> C: a list of registry profiles that
contains the document's true subject with probability at least the confidence level
({level} here). The probability is over the random draw of calibration and audited
documents; it is a statement about the audit as a whole, not a promise about one particular document.</p>
<p class="plain" id="guarantee">{_e(guarantee)}</p>
<p>It rests on a single assumption: the calibration documents and the audited documents are
<b>exchangeable</b>, for example drawn at random from the same release, and the attacker is exactly the declared
one (same knowledge, same model, same candidate pool, same release mechanism). It holds for any attacker and any
score, with no assumption that the attacker's weights are calibrated probabilities.</p>
<ul>
<li>A stronger attacker than declared (more registry fields, other auxiliary data, an LLM) is a different
configuration: its sets would be smaller and this certificate says nothing about it.</li>
<li>Documents from another release mechanism, time period or population break exchangeability: coverage can fall
below the target (see the drift stress test). Recalibrate for each configuration.</li>
<li>Documents whose subject is absent from the candidate pool (rate ρ =
{_e(_percent(metrics.candidate_miss_rate))} here) can never be in their set.</li>
{per_group_note}
</ul>

<h2>What |C| and the leakage proxy mean, and do not mean</h2>
<ul>
<li><b>|C|</b> is how many people remain statistically plausible after the attack. |C| = 3 means the attacker can
certifiably narrow the document down to three people; |C| = 0 (an empty set) means the attacker's top candidate is
more certain than the threshold allows, the highest risk.</li>
<li>|C| is <b>not</b> the number of people who could have written the text, and a large set is not proof of
safety against a different attacker: it is relative to the declared threat configuration.</li>
<li>The <b>leakage proxy</b> L = 1 / max(1, |C|) rescales |C| to [0, 1] for release policies (L &gt; 1/k ⇔
|C| &lt; k; a 0.09 threshold corresponds to sets of 11 or fewer). It is <b>not</b> a probability of
re-identification: L = 0.1 means the attacker is certifiably down to ten people, not that it has a 10 % chance of
being right.</li>
<li>Top-1 accuracy and other ranking metrics describe the attacker on this data, with no guarantee.</li>
</ul>

<h2>Results</h2>
{''.join(figures)}
<h3>Threshold and coverage per confidence level</h3>
{calibration_html}
<p>{_e(helps['q_hat'])} {_e(helps['coverage'])}{(' ' + _e(helps['coverage_ci'])) if split_protocol else ''}</p>
{group_html}

<h2>Flagged documents (redaction worklist)</h2>
<p>Flagged when {rule}; riskiest first (highest linkage probability, then smallest set), each with the rule that
flagged it. The driving terms are the words shared by the document and the
profiles of its top candidates that weigh most in the match: redacting them is where to start. {_e(text_note)}</p>
{flagged_html}

<section class="keep">
<h2>Data checksums and versions</h2>
{_pairs(checksums, 'hash')}
{_pairs(version_rows)}
<p>Manifest created {_e(manifest.get('created_at'))}. Per-document records (JSONL) re-derive every number above.</p>
</section>
{appendix_block(listed)}
</body></html>
"""


# --- an attacker panel ------------------------------------------------------------------------------------------

MEMBER_COLUMNS = ("attacker", "first_guess_rate", "first_guess_low", "first_guess_high", "n_flagged",
                  "remainder_first_guess", "corrected_bound", "own_verdict", "decided")
"""The members of an attacker panel side by side (:func:`member_frame`)."""
REDACTION_TITLE = "A redacted release"
PANEL_WORKLIST_LABELS = {"set_size": "smallest |C|", "set_size_by": "smallest set by",
                         "linkage_probability": "largest linkage probability", "linkage_by": "largest linkage by",
                         "flagged_by": "flagged by (rule)"}
"""How the report's table of a panel's flagged documents names the worst over the attackers."""


def member_frame(verdict: PanelVerdict) -> pd.DataFrame:
    """The members of an attacker panel side by side as its verdict reads them, one row per attacker in declared
    order: its own first-guess rate over the labelled documents with its exact 95 % interval, the documents it flags,
    its first-guess rate on what the panel leaves (the documents no attacker flags) and that rate's corrected upper
    bound (the one the panel's verdict reads), its own verdict, and whether it decided the panel's verdict."""
    rows = [{"attacker": member.attacker, "first_guess_rate": member.own.first_guess_rate,
             "first_guess_low": member.own.first_guess_low, "first_guess_high": member.own.first_guess_high,
             "n_flagged": member.n_flagged, "remainder_first_guess": member.remainder_first_guess,
             "corrected_bound": member.remainder_bound, "own_verdict": member.own.title,
             "decided": member.attacker == deciding_member(verdict)} for member in verdict.members]
    return pd.DataFrame(rows, columns=list(MEMBER_COLUMNS))


def deciding_member(verdict: PanelVerdict) -> str | None:
    """The attacker that decided the panel's verdict (``decided_by``), ``None`` when none did: every document is
    flagged, so no attacker's bound on what is left was read."""
    if verdict.status != "inconclusive" and verdict.remainder_bound is None:
        return None
    return verdict.decided_by


def _level_text(level: float) -> str:
    return f"{100 * level:.4g} %"


def panel_correction(members: int) -> str:
    """The correction for testing several attackers, in words (``docs/guarantee.md``, "An attacker panel"), at the
    levels of a panel of ``members``."""
    return (f"With {members} attacker{'s' if members > 1 else ''}, each attacker's bound is the one-sided "
            f"{_level_text(1 - PANEL_ERROR / members)} Clopper–Pearson upper bound (1 − {PANEL_ERROR:g}/{members}: the "
            f"top of the two-sided {_level_text(panel_bound_level(members))} interval) of its first-guess rate on the "
            "labelled documents no attacker flags, weighted with its mean linkage probability on the unlabelled ones. "
            f"By Bonferroni, the {members} bounds hold together: the chance that any attacker's true first-guess rate "
            f"on what is released is above its bound is at most {members} × {PANEL_ERROR:g}/{members} = "
            f"{PANEL_ERROR:g}, whatever the dependence between the attackers (they read the same documents, so their "
            "errors are not independent; the union bound needs no independence). The panel releases only when every "
            "attacker's bound is within the acceptable linkage rate and every attacker's validity checks pass; it is "
            "not releasable as it is when any bound is above that rate, and the attacker with the highest bound is "
            "named as the one that decided.")


def decided_sentence(verdict: PanelVerdict) -> str:
    """Which attacker decided the panel's verdict, and why that one."""
    if verdict.status == "inconclusive":
        return (f"Decided by {verdict.decided_by}: the first attacker whose validity checks failed (its own report "
                "says which).")
    if verdict.remainder_bound is None:
        return ("No attacker's bound decides it: every document is flagged by at least one attacker, so nothing is "
                "left to release.")
    return (f"Decided by {verdict.decided_by}: its bound on what the panel leaves, "
            f"{fmt_percent(verdict.remainder_bound)}, is the highest of the {len(verdict.members)} attackers'.")


def redaction_rows(redaction: Mapping) -> list[dict]:
    """Each attacker of a redaction verified outside its search (``summary.json``'s ``redaction``: ``held_out``,
    ``source_config_id``, ``attackers``), with its first-guess rate before and after the redaction and their intervals
    (``None`` where that side was not audited), the held-out attacker marked."""
    rows = []
    for item in redaction.get("attackers") or ():
        before, after = item.get("before") or {}, item.get("after") or {}
        rows.append({"attacker": item.get("attacker"), "held_out": bool(item.get("held_out")),
                     "first_guess_before": before.get("first_guess"), "before_low": before.get("low"),
                     "before_high": before.get("high"), "n_before": before.get("n"),
                     "first_guess_after": after.get("first_guess"), "after_low": after.get("low"),
                     "after_high": after.get("high"), "n_after": after.get("n")})
    return rows


def redaction_frame(redaction: Mapping) -> pd.DataFrame:
    """:func:`redaction_rows` as a table."""
    return pd.DataFrame(redaction_rows(redaction),
                        columns=["attacker", "held_out", "first_guess_before", "before_low", "before_high", "n_before",
                                 "first_guess_after", "after_low", "after_high", "n_after"])


def rate_text(rate, low, high, n) -> str:
    """A first-guess rate with its interval and the documents it counts, or that it was not measured."""
    if rate is None:
        return "not audited"
    documents = "" if n is None else f", {int(n):,} documents"
    return f"{fmt_percent(rate)} ({fmt_interval(low, high)}{documents})"


def redaction_counts_text(redaction: Mapping) -> str:
    """What the decisions did to the release a redacted one comes from, in one sentence: its documents withheld,
    edited (by how many edits, removing how many characters) and untouched."""
    counts = redaction.get("counts") or {}
    untouched = counts.get("untouched")
    return (f"{counted(counts.get('withheld', 0), 'document')} withheld, {counts.get('edited', 0):,} edited by "
            f"{counted(counts.get('edits', 0), 'edit')} ({counted(counts.get('characters', 0), 'character')} removed)"
            + ("" if untouched is None else f", {untouched:,} released untouched"))


def redaction_origin(redaction: Mapping) -> str:
    """The release a redacted one comes from: the audit (its history id when it has one) and configuration, and its
    documents' file with its rows."""
    source = redaction.get("source") or {}
    audit = f"audit {redaction['from_audit']}, " if redaction.get("from_audit") is not None else "the audit of "
    config_id = redaction.get("source_config_id") or redaction.get("from_config_id")
    file = f" of {source.get('file')} ({int(source.get('rows') or 0):,} documents)" if source.get("file") else ""
    return f"{audit}configuration {config_id}{file}"


def redaction_block(redaction: Mapping) -> str:
    """The report's section on the release a redacted release comes from (``summary.json``'s ``redaction``,
    :func:`~cpa_core.redaction.decisions.redaction_lineage`): the audit and file it was redacted from (with the
    file's SHA-256), what the decisions did (withheld, edited, untouched, edits, characters), the decisions' SHA-256,
    each attacker's first-guess rate before and after with its interval (the one the search never consulted marked)
    and what the release keeps."""
    source = redaction.get("source") or {}
    decisions = redaction.get("decisions") or {}
    held_out = redaction.get("held_out")
    rows = "".join(
        f"<tr><td>{_e(row['attacker'])}</td>"
        f"<td>{'held out: never consulted by the search' if row['held_out'] else 'consulted by the search'}</td>"
        f"<td>{_e(rate_text(row['first_guess_before'], row['before_low'], row['before_high'], row['n_before']))}</td>"
        f"<td>{_e(rate_text(row['first_guess_after'], row['after_low'], row['after_high'], row['n_after']))}</td></tr>"
        for row in redaction_rows(redaction))
    graded = (f"<p>The redaction search read the evidence of the audit's attackers; the redacted release was then "
              f"audited again by every one of them and by <b>{_e(held_out)}</b>, an attacker the search never "
              "consulted (held out), so that the redaction is graded by an attacker it was not fitted to.</p>"
              if held_out else "")
    table = (f"""{graded}<table class="keep redaction"><thead><tr><th>attacker</th><th>role</th>
<th>first guess right before (interval)</th><th>first guess right after (interval)</th></tr></thead>
<tbody>{rows}</tbody></table>""" if rows else "")
    digest = (f"<tr><th>redacted from: SHA-256</th><td class='hash'>{_e(source.get('sha256'))}</td></tr>"
              if source.get("sha256") else "")
    return f"""<section class="keep" id="redaction">
<h2>{REDACTION_TITLE}</h2>
<p>This audit certifies a <b>redacted release</b>, made from {_e(redaction_origin(redaction))}:
<b>{_e(redaction_counts_text(redaction))}</b>. The redacted release was calibrated anew; this certificate is its own,
and the audit before it certifies only the release as it was.</p>
<table class="keep"><tbody>{digest}
<tr><th>decisions table SHA-256</th><td class='hash'>{_e(decisions.get('sha256'))}</td></tr></tbody></table>
{table}
{kept_paragraph(redaction.get('kept'))}
</section>"""


def kept_paragraph(kept: Mapping | None) -> str:
    """What a redacted release keeps (:func:`~cpa_core.report.formatting.kept_text`), as a paragraph; nothing when it
    was not measured."""
    return f"<p id='kept'>What the redacted release keeps: {_e(kept_text(kept))}.</p>" if kept else ""


def _member_rows(verdict: PanelVerdict, links: Mapping[str, str]) -> str:
    rows = []
    for row in member_frame(verdict).to_dict(orient="records"):
        name = row["attacker"]
        report = f"<a href='{_e(links[name])}'>its report</a>" if name in links else ""
        rows.append(f"<tr{' class=decided' if row['decided'] else ''}><td>{_e(name)}</td>"
                    f"<td>{_e(_percent(row['first_guess_rate']))}</td>"
                    f"<td>{_e(fmt_interval(row['first_guess_low'], row['first_guess_high']))}</td>"
                    f"<td>{row['n_flagged']:,}</td><td>{_e(_percent(row['remainder_first_guess']))}</td>"
                    f"<td>{_e('nothing left' if row['corrected_bound'] is None else _percent(row['corrected_bound']))}"
                    f"</td><td>{_e(row['own_verdict'])}</td><td>{'decided' if row['decided'] else ''}</td>"
                    f"<td>{report}</td></tr>")
    return "".join(rows)


def panel_report(panel: PanelResult, *, worklist: pd.DataFrame, manifest: Mapping,
                 member_links: Mapping[str, str] | None = None, redaction: Mapping | None = None,
                 generated_at: datetime | None = None) -> str:
    """The certificate report of an attacker panel, as one HTML document with no script (on screen and the source of
    the PDF alike), at the panel's flagging level under its release policy: the panel's verdict, the attackers side by
    side (each one's figures, own verdict and a link to its own report, ``member_links``: attacker to address), the one
    that decided, the correction for testing several attackers, a redaction verified outside its search
    (``redaction``, as ``summary.json`` holds it) when there is one, the documents any attacker flags and the
    checksums.

    Parameters
    ----------
    worklist : :func:`cpa_core.report.worklist.panel_worklist` of ``panel`` at its flagging level, under its policy
    manifest : the panel's manifest (its ``inputs``, ``versions`` and ``created_at``)
    """
    config = panel.config
    confidence = config.policy_confidence
    verdict = panel_verdict(panel, confidence)
    inputs = dict(manifest.get("inputs") or panel.members[0].inputs)
    versions = manifest.get("versions") or {}
    generated = (generated_at or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    names = ", ".join(panel.names)
    status_color = STATUS_COLORS[verdict.status]
    actions = "".join(f"<li>{_e(action)}</li>" for action in verdict.actions)
    knowledge = config.knowledge
    threat_rows = [
        ("panel's configuration id", panel.config_id),
        ("knowledge level", f"{knowledge.name}: {knowledge.description}" if knowledge.description else knowledge.name),
        ("registry fields the attackers see", ", ".join(knowledge.fields)),
        ("query mode", knowledge.query_mode),
        ("candidate pool", "whole registry" if config.top_k is None else f"top {config.top_k}"),
        ("protocol", config.protocol),
        ("per-group calibration", f"yes, on '{config.group_column}'" if config.group_column else "no"),
        ("identities missing from the pool (calibration)", config.miss_policy),
        ("confidence level of this report", fmt_confidence(confidence)),
        ("release policy of this report", f"flag {config.policy.rule}"),
        *((f"attacker {member.config.attacker.name} (configuration {member.config.config_id})",
           json.dumps(member.config.attacker.to_dict(), sort_keys=True, default=str)) for member in panel.members),
    ]
    shown = worklist.drop(columns=[c for c in ("config_id", "confidence") if c in worklist.columns])
    flagged_html = (_table(without_empty(shown, ("group",)).rename(columns=PANEL_WORKLIST_LABELS), max_rows=500)
                    if len(shown) else "<p>No document is flagged by any attacker under this policy.</p>")
    files = {name: inputs[name] for name in ("documents", "registry") if name in inputs}
    checksums = [(f"{name} file", f"{info.get('file')} ({info.get('rows', 0):,} rows)") for name, info in files.items()]
    checksums += [(f"{name} SHA-256", info.get("sha256")) for name, info in files.items()]
    signoff = signoff_block(verdict, inputs=inputs, protocol=config.protocol, miss_policy=config.miss_policy,
                            generated=generated, tool_version=versions.get("cpa-core", "unknown"),
                            attackers=panel.names, redaction=redaction)
    own_reports = "".join(
        f"<li><b>{_e(member.attacker)}</b>: {_e(member.own.headline)}"
        + (f" (<a href='{_e(member_links[member.attacker])}'>its report</a>)" if member.attacker in (member_links or {})
           else "") + "</li>" for member in verdict.members)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>CPA certificate report, attacker panel {_e(panel.config_id)}</title>
<style>{STYLE} tr.decided td {{ font-weight: 600; background: #fff8e1; }}</style>
</head><body>
<h1>Re-identification risk certificate: attacker panel</h1>
<p class="subtitle">Conformal Privacy Auditing · {len(panel.members)} attackers ({_e(names)}) · configuration
{_e(panel.config_id)} · generated {_e(generated)}</p>
<section class="verdict" id="verdict" style="border-color: {status_color}">
<div class="status" style="background: {status_color}">Verdict: {_e(verdict.title)}</div>
<p class="headline">{_e(verdict.headline)}</p>
<p id="decided-by"><b>{_e(decided_sentence(verdict))}</b></p>
<h3>The attackers side by side</h3>
<p>Each attacker was run and calibrated on its own on the same documents; a document is flagged when any of them
flags it. At {_e(fmt_confidence(confidence))} confidence, {verdict.n_flagged:,} of {verdict.n_documents:,} documents are
flagged by at least one attacker ({_e(config.policy.rule)}); {verdict.remainder_documents:,} are left. Acceptable
linkage rate: {_e(fmt_percent(verdict.acceptable_linkage))}.</p>
<div class="wide"><table class="keep members" id="members"><thead><tr><th>attacker</th><th>first guess right</th>
<th>95 % CI</th><th>flagged</th><th>first guess right on what the panel leaves</th>
<th>left linked at most ({_e(_level_text(verdict.bound_level))} bound, corrected for {len(verdict.members)})</th>
<th>its own verdict</th><th>decided the panel</th><th>its report</th></tr></thead>
<tbody>{_member_rows(verdict, member_links or {})}</tbody></table></div>
<h3>What the curator should do</h3>
<ol>{actions}</ol>
</section>
{redaction_block(redaction) if redaction else ''}
{signoff}

<section id="correction">
<h2>The correction for several attackers</h2>
<p class="plain">{_e(panel_correction(len(panel.members)))}</p>
<p>Each attacker's own certificate keeps its guarantee (its own report); a document's smallest set over the attackers
is no certificate of its own, only the smallest of valid ones.</p>
</section>

<h2>Each attacker's own audit</h2>
<ul>{own_reports}</ul>

<h2>The declared threat configuration</h2>
{_pairs(threat_rows)}

<h2>Flagged documents (any attacker)</h2>
<p>Every document at least one attacker flags, riskiest first (the largest linkage probability over the attackers,
then the smallest set), with the attackers that flag it and by which rule, the attacker that gave its largest linkage
probability and the one that gave its smallest set. Each attacker's own worklist, with the evidence, is in its own
report; an attacker that explains a match by leaving each sentence out (dense retrieval) gives evidence only in a
panel where no attacker explains by words: the words the others weigh are then the evidence to act on, and its risk
is still checked at every redaction step. Document text is not included in this report.</p>
{flagged_html}

<section class="keep">
<h2>Data checksums and versions</h2>
{_pairs(checksums, 'hash')}
{_pairs(list(versions.items()))}
<p>Manifest created {_e(manifest.get('created_at'))}.</p>
</section>
</body></html>
"""
