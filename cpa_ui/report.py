"""The self-contained HTML certificate report for a privacy officer (no Streamlit).

One HTML file: styles and plotly.js are inlined once, every figure is drawn from data embedded in the
page, nothing is fetched from the network. Every value from the data (file names, ids, group labels,
terms) is escaped. Document text never appears in the report.
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime, timezone
from typing import Iterable

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from cpa_core.audit import AuditResult

from cpa_core.policy import ReleasePolicy

from .analysis import CALIBRATION_COLUMNS, GROUP_COLUMNS, without_empty
from .figures import REPORT_TEMPLATE, fig_confidence_curve, fig_group_breakdown, fig_set_size_histogram
from .help import COLUMNS, HELP, PERCENT
from .text import configuration_summary, fmt_confidence, fmt_number, fmt_percent

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2933; max-width: 1100px;
       margin: 2rem auto; padding: 0 1.5rem; line-height: 1.5; }
h1 { font-size: 1.8rem; margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #d9e2ec; }
.subtitle { color: #52606d; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.88rem; }
.wide { overflow-x: auto; }
th, td { border: 1px solid #d9e2ec; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f0f4f8; }
.kpis { display: grid; grid-template-columns: repeat(5, 1fr); gap: 0.8rem; margin: 1rem 0; }
.kpi { border: 1px solid #d9e2ec; border-radius: 0.5rem; padding: 0.7rem; }
.kpi .value { font-size: 1.6rem; font-weight: 600; } .kpi .label { font-weight: 600; }
.kpi .help { font-size: 0.8rem; color: #52606d; }
.note { background: #fff8e1; border-left: 4px solid #f0b429; padding: 0.6rem 0.9rem; margin: 0.8rem 0; }
.plain { background: #f0f4f8; border-left: 4px solid #2e86c1; padding: 0.6rem 0.9rem; }
code { background: #f0f4f8; padding: 0 0.2rem; }
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _cell(column: str, value) -> str:
    """A table cell as text, formatted as the dashboard formats that column (:data:`~cpa_ui.help.COLUMNS`)."""
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


def _table(frame: pd.DataFrame, max_rows: int | None = None) -> str:
    """An HTML table of ``frame`` with every cell formatted and escaped."""
    shown = frame if max_rows is None else frame.head(max_rows)
    head = "".join(f"<th>{_e(COLUMNS.get(c, (c,))[0])}</th>" for c in shown.columns)
    rows = ["<tr>" + "".join(f"<td>{_e(_cell(column, value))}</td>" for column, value in zip(shown.columns, record))
            + "</tr>" for record in shown.itertuples(index=False)]
    more = "" if max_rows is None or len(frame) <= max_rows else \
        f"<p>… and {len(frame) - max_rows:,} more rows (see the worklist export).</p>"
    return (f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
            f"{more}")


def _pairs(pairs: Iterable[tuple[str, object]]) -> str:
    return "<table><tbody>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in pairs) + \
        "</tbody></table>"


def _figure(fig: go.Figure, div_id: str) -> str:
    fig.update_layout(template=REPORT_TEMPLATE)
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def _percent(value) -> str:
    return fmt_percent(value) if value is not None and not (isinstance(value, float) and math.isnan(value)) else "–"


def certificate_report(result: AuditResult, *, confidence: float, policy: ReleasePolicy, curve: pd.DataFrame,
                       worklist: pd.DataFrame, manifest: dict, generated_at: datetime | None = None) -> str:
    """The report of one audit at one confidence level and release policy, as one HTML document.

    Parameters
    ----------
    curve : :func:`cpa_core.metrics.confidence_curve` of ``result``
    worklist : :func:`cpa_core.policy.worklist` at ``confidence`` under ``policy``
    manifest : :func:`cpa_core.records.manifest` of ``result``
    """
    config = result.config
    cert = result.certificate(confidence)
    levels = sorted(set(config.confidences) | {confidence})
    summary_of_levels = result.summary(levels, policy)
    metrics = summary_of_levels.level(confidence)
    inputs = result.inputs
    groups = sorted({str(g) for g in result.test_split.groups}) if result.test_split.groups is not None else []
    generated = (generated_at or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    rule_text = policy.rule
    rule = _e(rule_text)
    summary = configuration_summary(config, n_documents=inputs.get("documents", {}).get("rows", 0),
                                    n_profiles=inputs.get("registry", {}).get("rows", 0),
                                    groups=groups if config.group_column else ())

    kpi_cards = [
        ("Documents at risk", f"{metrics['n_flagged']:,} of {metrics['n_test']:,}", HELP["at_risk"]),
        ("Smallest set", fmt_number(metrics["min_set_size"]), HELP["min_set"]),
        ("Median set", fmt_number(metrics["median_set_size"]), HELP["median_set"]),
        ("Mean leakage proxy", fmt_number(metrics["mean_leakage"]), HELP["mean_leakage"]),
        ("Coverage (test)", _percent(metrics["coverage"]), HELP["coverage"]),
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
        ("calibration / test documents", f"{len(result.calibration_split):,} / {len(result.test_split):,}"),
        ("split seed", config.seed),
        ("per-group calibration", f"yes, on '{config.group_column}'" if config.group_column else "no"),
        ("identities missing from the pool (calibration)", config.miss_policy),
        ("certified confidence levels", ", ".join(fmt_confidence(float(c)) for c in config.confidences)),
        ("confidence level of this report", fmt_confidence(confidence)),
        ("release policy of this report", f"flag {rule_text}"),
        ("protocol", config.protocol),
        *((f"chosen from the labelled documents: {name}", value) for name, value in inputs.get("learned", {}).items()),
    ]
    calibration = summary_of_levels.overall_frame()[CALIBRATION_COLUMNS]
    calibration_html = _table(without_empty(calibration.drop(columns=["warnings"])))
    per_group_note = ("<li>Thresholds were calibrated per group, so the guarantee holds within each group.</li>"
                      if config.group_column else "")
    notes = [w for level in levels for w in summary_of_levels.level(level)["warnings"]]
    notes_html = "".join(f"<div class='note'>{_e(n)}</div>" for n in dict.fromkeys(notes))

    figures = [_figure(fig_set_size_histogram(cert.set_sizes, policy.flag_below,
                                              title=f"Certified set sizes at {fmt_confidence(confidence)}"),
                       "fig-histogram"),
               _figure(fig_confidence_curve(curve, confidence), "fig-curve")]
    group_html = ""
    if groups:
        per_group = summary_of_levels.groups_frame(confidence)[GROUP_COLUMNS]
        figures.append(_figure(fig_group_breakdown(per_group, confidence), "fig-groups"))
        group_html = "<h3>Per group</h3>" + _table(without_empty(per_group, ("n_cal",)))
        if not config.group_column:
            group_html += ("<p>The thresholds were calibrated on all groups together: the guarantee holds on "
                           "average over the groups, not within each one.</p>")

    flagged = worklist.drop(columns=[c for c in ("config_id", "confidence") if c in worklist.columns])
    flagged_html = _table(flagged, max_rows=500) if len(flagged) else \
        "<p>No test document is flagged under this policy.</p>"

    versions = manifest.get("versions", {})
    split = manifest.get("split", {})
    files = {name: inputs[name] for name in ("documents", "registry") if name in inputs}
    checksums = [(f"{name} file", f"{info.get('file')} ({info.get('rows'):,} rows)") for name, info in files.items()]
    checksums += [(f"{name} SHA-256", info.get("sha256")) for name, info in files.items()]
    checksums += [(f"{name} document ids SHA-256", digest) for name, digest in split.get("doc_ids_sha256", {}).items()]
    version_rows = [(name, version) for name, version in versions.items()]

    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>CPA certificate report {_e(config.config_id)}</title>
<style>{STYLE}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head><body>
<h1>Re-identification risk certificate</h1>
<p class="subtitle">Conformal Privacy Auditing · configuration {_e(config.config_id)} · generated {_e(generated)}</p>

<h2>Summary</h2>
<p>At <b>{_e(fmt_confidence(confidence))}</b> confidence, <b>{metrics['n_flagged']:,}</b> of {metrics['n_test']:,}
held-out test documents have a certified ambiguity set smaller than the release threshold (flagged when {rule}).
Empirical coverage on the test split is {_e(_percent(metrics['coverage']))}
({_e(_percent(metrics['coverage_conditional']))} among documents whose subject is in the registry); the
candidate-miss rate is {_e(_percent(metrics['candidate_miss_rate']))}.</p>
<div class="kpis">{cards}</div>
{notes_html}

<h2>What was audited</h2>
<p>{_e(inputs.get('documents', {}).get('file'))}: {inputs.get('documents', {}).get('rows', 0):,} released documents,
attacked against the registry {_e(inputs.get('registry', {}).get('file'))} of
{inputs.get('registry', {}).get('rows', 0):,} candidate profiles.
{len(result.calibration_split):,} documents with known subjects calibrated the threshold and
{len(result.test_split):,} other documents tested it.</p>

<h2>The declared threat configuration</h2>
<p class="plain">{_e(summary)}</p>
{_pairs(threat_rows)}

<h2>The guarantee, in plain words</h2>
<p>For each audited document, CPA gives a <b>certified ambiguity set</b> C: a list of registry profiles that
contains the document's true subject with probability at least the confidence level
({_e(fmt_confidence(confidence))} here). The probability is over the random draw of calibration and audited
documents; it is a statement about the audit as a whole, not a promise about one particular document.</p>
<p>It rests on a single assumption: the calibration documents and the audited documents are
<b>exchangeable</b>, for example drawn at random from the same release, and the attacker is exactly the declared
one (same knowledge, same model, same candidate pool, same release mechanism). It holds for any attacker and any
score, with no assumption that the attacker's weights are calibrated probabilities.</p>
<ul>
<li>A stronger attacker than declared (more registry fields, other auxiliary data, an LLM) is a different
configuration: its sets would be smaller and this certificate says nothing about it.</li>
<li>Documents from another release mechanism, time period or population break exchangeability: coverage can fall
below the target (see the drift stress test). Recalibrate for each configuration.</li>
<li>Documents whose subject is absent from the registry (open world, rate
{_e(_percent(metrics['candidate_miss_rate']))}) cannot be covered. Unconditional coverage is then at least
(1 − ρ)(1 − α), and calibration treated them as <i>{_e(config.miss_policy)}</i>.</li>
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
<p>{_e(HELP['q_hat'])} {_e(HELP['coverage'])}</p>
{group_html}

<h2>Flagged documents (redaction worklist)</h2>
<p>Flagged when {rule}, smallest set first. The driving terms are the words shared by the document and the
profiles of its top candidates that weigh most in the match: redacting them is where to start. Document text is
not included in this report.</p>
{flagged_html}

<h2>Data checksums and versions</h2>
{_pairs(checksums)}
{_pairs(version_rows)}
<p>Manifest created {_e(manifest.get('created_at'))}. Per-document records (JSONL) re-derive every number above.</p>
</body></html>
"""
