"""Streamlit pieces shared by the pages: guards, error messages, the confidence and policy controls,
the KPI row and the audit status."""

from __future__ import annotations

import streamlit as st

from cpa_core.attack.base import Attacker
from cpa_core.attack.registry import get_spec
from cpa_core.audit.configuration import AUDIT_DEFAULTS, AuditConfig
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.common.errors import CPAError
from cpa_core.common.params import Param
from cpa_core.llm.client import redact_url
from cpa_core.report.formatting import fmt_number, fmt_percent, percent_from_confidence
from cpa_core.report.help import COLUMNS, HELP, PERCENT, column_label, help_texts
from cpa_core.report.metrics import COVERAGE_MEANING, LevelSummary
from cpa_ui import nav
from cpa_ui.attackers import declare, default_threat, needs_endpoint, widget_bounds
from cpa_ui.cache import load_sample
from cpa_ui.memory import forget_results
from cpa_ui.state import AuditRun, DataSet, forget_widgets, set_widget, state, widget_key, widget_value
from cpa_ui.text import (
    ALPHA_PRESETS,
    CONFIDENCE_PERCENT_RANGE,
    CONFIDENCE_PERCENT_STEP,
    confidence_from_alpha,
    confidence_from_percent,
    plain,
)

MAX_FLAG_BELOW = 100


def show_warnings(warnings) -> None:
    """Each reason a certificate certifies nothing, once, as a warning (never silent)."""
    for warning in dict.fromkeys(warnings):
        st.warning(plain(warning[0].upper() + warning[1:] + "."), icon=":material/warning:")


def show_error(error: CPAError, prefix: str = "") -> None:
    """A user error from the core, as the one-line message it carries (never a traceback)."""
    st.error(plain(f"{prefix}{error}"), icon=":material/error:")


def adopt_data(data: DataSet) -> None:
    """Make ``data`` the audited data: new defaults for the threat model, results of older data dropped."""
    state.data = data
    state.threat = default_threat(data)
    state.scores = None
    state.flag_below = int(data.project.audit.get("flag_below", AUDIT_DEFAULTS["flag_below"]))
    state.leakage_threshold = data.project.audit.get("leakage_threshold")
    state.acceptable_linkage = data.project.audit.get("acceptable_linkage")
    levels = data.project.audit.get("confidence") or AUDIT_DEFAULTS["confidence"]
    # viewed at the level its configuration flags at (declared, else the lowest audited one), as exports declare
    state.confidence = float(data.project.audit.get("flag_confidence") or min(levels))
    forget_results()  # and what the caches hold for them
    forget_widgets("w.threat.")


def ensure_data() -> None:
    """Load the bundled sample data the first time the app opens, so every page works at once."""
    if state.data is not None or state.data_error is not None:
        return
    try:
        adopt_data(load_sample())
    except (CPAError, OSError) as error:
        state.data_error = str(error)


def _require(value, missing: str, page, label: str, icon: str):
    """``value``, or a note saying what is missing, a link to the page that provides it, and a stop."""
    if value is None:
        st.info(missing, icon=":material/info:")
        st.page_link(page, label=label, icon=icon)
        st.stop()
    return value


def require_data() -> DataSet:
    return _require(state.data, "No data is loaded yet: load documents and a registry first.", nav.DATA,
                    "Go to Data", ":material/upload_file:")


def require_run() -> AuditRun:
    return _require(state.run, "No calibrated audit yet: declare a threat model, then run the calibration.",
                    nav.CALIBRATE, "Go to Calibrate", ":material/tune:")


def results_page(title: str) -> tuple[DataSet, AuditRun]:
    """The opening of a page on the calibrated audit: the data and the run (or a stop with a link to the page that
    provides what is missing), the page's title and the stale-results notice."""
    data = require_data()
    run = require_run()
    st.title(title)
    stale_notice(run)
    return data, run


def declared(data: DataSet) -> tuple[AuditConfig, Attacker] | None:
    """The declared configuration, or ``None`` after showing why it is invalid."""
    try:
        return declare(data, state.threat or default_threat(data), state.scores)
    except CPAError as error:
        show_error(error, "The declared configuration is not valid: ")
        return None


def stale_notice(run: AuditRun) -> None:
    """Say so when the shown results are not those of the configuration declared now."""
    data = state.data
    if data is None or state.threat is None:
        return
    try:
        config, _ = declare(data, state.threat, state.scores)
    except CPAError:
        return
    if run.key != f"{data.fingerprint}:{config.config_id}":
        st.warning(f"These results are for configuration {run.result.config.config_id} ({plain(run.label)}). The threat "
                   f"model declared now ({config.config_id}) has not been calibrated yet.",
                   icon=":material/history:")


def confidence_control(page: str) -> float:
    """The confidence slider with α presets; the choice is shared by every page.

    ``page`` scopes the widget keys: a widget belongs to one page, the stored choice to all of them.
    """
    preset_columns = st.columns(len(ALPHA_PRESETS) + 1, vertical_alignment="bottom")
    name = f"{page}.confidence_percent"
    key = widget_key(name, percent_from_confidence(state.confidence))
    with preset_columns[0]:
        percent = st.slider("Confidence level 1 − α", min_value=CONFIDENCE_PERCENT_RANGE[0],
                            max_value=CONFIDENCE_PERCENT_RANGE[1], step=CONFIDENCE_PERCENT_STEP, format="%.1f %%",
                            key=key, help=HELP["confidence"])
    for column, alpha in zip(preset_columns[1:], ALPHA_PRESETS):
        target = percent_from_confidence(confidence_from_alpha(alpha))
        column.button(f"α = {alpha:.2f}", key=f"{page}.preset.{alpha}", help=f"{HELP['alpha']} Sets {target:g} %.",
                      type="primary" if percent == target else "secondary", width="stretch",
                      on_click=set_widget, args=(key, target))
    state.confidence = confidence_from_percent(percent)
    return state.confidence


def policy_controls(page: str) -> ReleasePolicy:
    """The release policy: flag sets smaller than ``k``, optionally by the leakage proxy, and documents whose linkage
    probability exceeds the acceptable linkage rate (default 1/k); shared by pages."""
    left, middle, right, last = st.columns([3, 1.2, 1.5, 1.8], vertical_alignment="bottom")
    flag_below = left.slider("Flag documents whose set has fewer than k members", 1, MAX_FLAG_BELOW,
                             key=widget_key(f"{page}.flag_below", min(state.flag_below, MAX_FLAG_BELOW)),
                             help=HELP["flag_below"])
    use_leakage = middle.checkbox("Also by leakage", help=HELP["leakage_threshold"],
                                  key=widget_key(f"{page}.use_leakage", state.leakage_threshold is not None))
    threshold = right.number_input("Leakage threshold L", min_value=0.001, max_value=1.0, step=0.01,
                                   format="%.3f", disabled=not use_leakage,
                                   key=widget_key(f"{page}.leakage_threshold", state.leakage_threshold or 0.09),
                                   help=HELP["leakage_threshold"])
    rate = last.number_input("Acceptable linkage rate (empty: 1/k)", min_value=0.001, max_value=0.999, step=0.01,
                             format="%.3f", placeholder=f"1/k = {1 / int(flag_below):.3f}",
                             key=widget_key(f"{page}.acceptable_linkage", state.acceptable_linkage),
                             help=HELP["acceptable_linkage"])
    state.flag_below = int(flag_below)
    state.leakage_threshold = float(threshold) if use_leakage else None
    state.acceptable_linkage = None if rate is None else float(rate)
    return state.policy


def attack_row(metrics: LevelSummary, policy: ReleasePolicy) -> None:
    """The attack's success, stated first: first-guess and top-k rates with their exact intervals, the flags by rule,
    and what is left after the flagged documents against the acceptable linkage rate."""
    columns = st.columns(4)
    if metrics.first_guess_rate is None:
        columns[0].metric("First guess right", "unknown", delta="no labelled document", delta_color="off",
                          help=HELP["first_guess"])
    else:
        columns[0].metric("First guess right", fmt_percent(metrics.first_guess_rate),
                          delta=f"95 % CI {fmt_percent(metrics.first_guess_low)}–{fmt_percent(metrics.first_guess_high)}"
                          f" of {metrics.n_labelled:,}", delta_color="off", help=HELP["first_guess"])
    columns[1].metric(f"In the top {metrics.top_k}", fmt_percent(metrics.top_k_rate),
                      delta=None if metrics.top_k_rate is None else
                      f"95 % CI {fmt_percent(metrics.top_k_low)}–{fmt_percent(metrics.top_k_high)}",
                      delta_color="off", help=HELP["top_k_rate"])
    columns[2].metric("Flagged", f"{metrics.n_flagged:,} of {metrics.n_test:,}",
                      delta=f"{metrics.n_flagged_by_set:,} by set size, {metrics.n_flagged_by_linkage:,} by linkage",
                      delta_color="off", help=HELP["flagged_by"])
    bound, rate = metrics.remainder_bound, policy.linkage_rate
    columns[3].metric("The rest, linked at most", "nothing left" if bound is None else fmt_percent(bound),
                      delta=None if bound is None else
                      (f"within the acceptable {fmt_percent(rate)}" if bound <= rate else
                       f"{100 * (bound - rate):.1f} pts above the acceptable {fmt_percent(rate)}"),
                      delta_color="off" if bound is None or bound <= rate else "inverse", help=HELP["remainder_bound"])


def kpi_row(metrics: LevelSummary, confidence: float, protocol: str) -> None:
    """Documents at risk, smallest and median set, mean leakage proxy and coverage, explained in the terms of the
    ``protocol`` in use."""
    helps = help_texts(protocol)
    columns = st.columns(5)
    vacuous = (metrics.whole_pool_rate or 0) >= 0.5
    columns[0].metric("Documents at risk", f"{metrics.n_flagged:,}",
                      delta="most sets are the whole pool: not evidence of safety" if vacuous else
                      f"{fmt_percent(metrics.flagged_share)} of {metrics.n_test:,}",
                      delta_color="inverse" if vacuous else "off", help=helps["at_risk"])
    columns[1].metric("Smallest set", fmt_number(metrics.min_set_size), help=helps["min_set"])
    columns[2].metric("Median set", fmt_number(metrics.median_set_size), help=helps["median_set"])
    columns[3].metric("Mean leakage proxy", fmt_number(metrics.mean_leakage), help=helps["mean_leakage"])
    coverage = metrics.coverage
    if protocol == "release":  # by construction: a property of the method, not a validation
        columns[4].metric("Coverage (release)", fmt_percent(coverage), delta="by construction", delta_color="off",
                          help=COVERAGE_MEANING["release"])
    else:
        columns[4].metric("Coverage (test)", fmt_percent(coverage),
                          delta=None if coverage is None else f"{100 * (coverage - confidence):+.1f} pts vs target",
                          delta_color="normal", help=helps["coverage"])


def audit_status() -> None:
    """The sidebar's summary of the current audit."""
    data, run = state.data, state.run
    with st.sidebar:
        st.markdown("**Current audit**")
        if data is None:
            st.caption("No data loaded.")
        else:
            source = "bundled sample" if data.source == "sample" else "uploaded files"
            st.caption(f"Data: {len(data.documents):,} documents, {len(data.registry):,} profiles ({source})")
        if run is None:
            st.caption("Not calibrated yet.")
        else:
            st.caption(f"Calibrated: {plain(run.label)}, config {run.result.config.config_id}")
        st.caption(plain(data_flow_note()))


def table_columns(frame, help_keys: dict[str, str] | None = None, protocol: str | None = None) -> dict:
    """``column_config`` for a table of figures: every known column labelled, formatted and explained once
    (:data:`~cpa_core.report.help.COLUMNS`), in the terms of ``protocol`` when the table is of one audit (without it,
    in terms true under either); ``help_keys`` swaps a column's help (e.g. coverage under drift)."""
    helps = help_texts(protocol)
    config = {}
    for column in frame.columns:
        if column not in COLUMNS:
            continue
        _, number_format, help_key = COLUMNS[column]
        label = column_label(column, protocol)
        text = helps.get((help_keys or {}).get(column, help_key)) if help_key else None
        if number_format is None:
            config[column] = st.column_config.TextColumn(label, help=text)
        else:
            config[column] = st.column_config.NumberColumn(label, help=text, format="percent"
                                                           if number_format == PERCENT else number_format)
    return config


def data_flow_note() -> str:
    """Where document text goes under the declared threat model: nowhere, or to the LLM endpoint."""
    threat = state.threat
    if threat is None or not needs_endpoint(get_spec(threat.attacker), threat.query_mode):
        return "Everything runs on this machine; no data leaves it."
    endpoint = dict(threat.llm).get("base_url") or "the configured LLM endpoint"
    return (f"The declared attacker sends document text to {redact_url(endpoint) if '://' in endpoint else endpoint}; "
            "everything else runs on this machine.")


def param_widgets(params: tuple[Param, ...], values: dict, key_prefix: str, fields) -> dict:
    """One widget per declared parameter, four to a row; returns the chosen values.

    Keys are ``<key_prefix>.<name>``: a prefix per attacker (and one for the LLM endpoint), so parameters
    of the same name never share a widget.
    """
    chosen = {}
    for start in range(0, len(params), 4):
        for column, param in zip(st.columns(4), params[start:start + 4]):
            value = values.get(param.name, param.default)
            with column:
                words = [word for word in param.special  # a word such as 'auto' besides numbers: a checkbox each
                         if st.checkbox(f"{param.label}: {word}", help=param.help,
                                        key=widget_key(f"{key_prefix}.{param.name}.{word}", value == word))]
                key = widget_key(f"{key_prefix}.{param.name}", 1.0 if value in param.special else value)
                number = _param_widget(param, key, fields, disabled=bool(words))
                chosen[param.name] = words[0] if words else number
    return chosen


def _param_widget(param: Param, key: str, fields, disabled: bool = False):
    label, text = param.label, param.help
    if param.kind == "choice":
        return st.selectbox(label, param.choices, key=key, help=text)
    if param.kind == "bool":
        return st.checkbox(label, key=key, help=text)
    if param.kind == "fields":
        set_widget(key, [f for f in widget_value(key) or () if f in fields])
        return tuple(st.multiselect(label, list(fields), key=key, help=text))
    if param.kind == "text":
        set_widget(key, "" if widget_value(key) is None else str(widget_value(key)))
        value = st.text_input(label, key=key, help=text).strip()
        return value or (None if param.optional else param.default)
    bounds = widget_bounds(param)
    if param.kind == "int":
        value = st.number_input(label, step=int(param.step or 1), key=key, help=text, **bounds)
        return None if value is None else int(value)
    value = st.number_input(label, step=float(param.step or 0.01), format="%.3f", key=key, help=text,
                            disabled=disabled, **bounds)
    return None if value is None else float(value)
