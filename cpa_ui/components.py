"""Streamlit pieces shared by the pages: guards, error messages, the confidence and policy controls,
the KPI row, the audit status, an audit's verdict with its counts, and an attacker panel's verdict with its
attackers side by side and the choice of the attacker whose certificate a page shows."""

from __future__ import annotations

from pathlib import PurePath

import streamlit as st

from cpa_core.attack.registry import get_spec
from cpa_core.audit.configuration import AUDIT_DEFAULTS
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.common.errors import CPAError
from cpa_core.common.params import Param
from cpa_core.llm.client import redact_url
from cpa_core.report.diagnostics import NEARLY_WHOLE
from cpa_core.report.formatting import counted, fmt_number, fmt_percent, percent_from_confidence
from cpa_core.report.help import COLUMNS, HELP, PERCENT, column_label, help_texts
from cpa_core.report.html import decided_sentence, panel_correction
from cpa_core.report.metrics import COVERAGE_MEANING, LevelSummary
from cpa_core.report.verdict import PanelVerdict, Verdict
from cpa_ui import nav
from cpa_ui.analysis import members_table
from cpa_ui.attackers import Declared, declare_panel, default_threat, needs_endpoint, widget_bounds
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


def declared(data: DataSet) -> Declared | None:
    """The declared audit (each attacker of the panel), or ``None`` after showing why it is invalid."""
    try:
        return declare_panel(data, state.threat or default_threat(data), state.scores)
    except CPAError as error:
        show_error(error, "The declared configuration is not valid: ")
        return None


def stale_message(run: AuditRun, data: DataSet, declared_config_id: str) -> str | None:
    """What the shown results (``run``) are of, when it is not the documents loaded on the Data page (``data``) under
    the configuration declared now (``declared_config_id``): the data and the configuration compared each on its own,
    and only what differs said (``None`` when nothing does). Raw text: show it with :func:`~cpa_ui.text.plain`."""
    same_data, same_config = run.data_fingerprint == data.fingerprint, run.config_id == declared_config_id
    if same_data and same_config:
        return None
    loaded = PurePath(str(data.documents.file)).name
    released = PurePath(str(run.result.inputs.get("documents", {}).get("file") or loaded)).name
    release = f"the release {released}" if released != loaded else f"another version of {loaded}"
    if same_config:
        return (f"These results are of {release} ({run.label}), not of {loaded}, the documents loaded on the Data "
                f"page. The declared configuration is the same ({run.config_id}).")
    if same_data:
        return (f"These results are for configuration {run.config_id} ({run.label}). The threat model declared now "
                f"(configuration {declared_config_id}) has not been calibrated yet.")
    return (f"These results are of {release} under configuration {run.config_id} ({run.label}). The Data page holds "
            f"{loaded}, and the threat model declared now (configuration {declared_config_id}) has not been "
            "calibrated on it yet.")


def stale_notice(run: AuditRun) -> None:
    """Say so when the shown results are not those of the loaded documents under the configuration declared now,
    and what differs (:func:`stale_message`)."""
    data = state.data
    if data is None or state.threat is None:
        return
    try:
        config_id = declare_panel(data, state.threat, state.scores).config_id
    except CPAError:
        return
    message = stale_message(run, data, config_id)
    if message is not None:
        st.warning(plain(message), icon=":material/history:")


def verdict_counts(verdict: Verdict, metrics: LevelSummary, documents: str = "documents") -> str:
    """The counts a verdict rests on, in words: the flagged documents of all (by each rule, under the policy's rule),
    what is left to release, and the sets that certify nothing (whole-pool sets, documents on which the attacker has
    nothing to go on, empty sets), said even when there are none, so that a vacuous certificate is never silent."""
    n, n_flagged = verdict.n_documents, verdict.n_flagged
    whole = round((metrics.whole_pool_rate or 0) * n)
    empty = round((metrics.empty_rate or 0) * n)
    uninformative = verdict.n_uninformative or 0
    parts = [f"Flagged: {n_flagged:,} of {n:,} {documents} ({verdict.n_flagged_by_set or 0:,} by set size, "
             f"{verdict.n_flagged_by_linkage or 0:,} by linkage probability; flagged when {verdict.rule})",
             f"left to release: {n - n_flagged:,}",
             f"whole-pool sets (at least {100 * NEARLY_WHOLE:g} % of the candidate pool; they certify nothing, no "
             f"evidence of safety): {whole:,}" if whole else "no set is the whole candidate pool"]
    if uninformative:
        parts.append(f"{counted(uninformative, 'document')} on which the attacker has nothing to go on (every "
                     "candidate ties): their set is the whole pool")
    if empty:
        parts.append(f"empty sets (|C| = 0, the highest risk): {empty:,}")
    return " · ".join(parts) + "."


def verdict_box(verdict: Verdict, metrics: LevelSummary, label: str = "Verdict", documents: str = "documents") -> None:
    """The release verdict of one audit (:func:`~cpa_core.report.verdict.release_verdict`, as the report states it):
    a heading, its title and headline in a coloured box, and the counts it rests on (:func:`verdict_counts`)."""
    st.subheader(plain(label), anchor=False)
    show = st.success if verdict.status == "release" else st.warning  # a page's errors are the app's own
    show(plain(f"{label}: {verdict.title}. {verdict.headline}"),
         icon=":material/gavel:" if verdict.status in ("release", "redact") else ":material/report:")
    st.markdown(plain(verdict_counts(verdict, metrics, documents)))


def member_choice(page: str, run: AuditRun, label: str = "Attacker shown below") -> AuditRun:
    """The run of the panel's attacker the curator picks (the choice is shared by every page; ``page`` scopes the
    widget); the run itself when it is not a panel."""
    if not run.is_panel:
        return run
    names = list(run.names)
    key = widget_key(f"{page}.member", state.member if state.member in names else names[0])
    if widget_value(key) not in names:
        set_widget(key, names[0])
    state.member = st.selectbox(label, names, key=key, help="Each attacker of the panel was run and calibrated on its "
                                "own: its certificate, strata and linkage probabilities are its own. The figures "
                                "and charts below are this attacker's.")
    return run.member(state.member)


MEMBER_HELP = {
    "attacker": "The attacker of the panel: each one run and calibrated on its own, on the same documents.",
    "first_guess_rate": None,
    "first_guess_ci": "Exact (Clopper–Pearson) 95 % interval of its first-guess rate.",
    "n_flagged": "Documents this attacker flags by itself (the panel flags those of every attacker).",
    "remainder_first_guess": "Its first-guess rate on the rest: what the panel leaves, the labelled documents no "
                             "attacker flags.",
    "corrected_bound": "Its upper bound on the rest (what the panel leaves), one-sided at this level: corrected for "
                       "testing several attackers (Bonferroni: the bounds hold together). The panel releases only "
                       "when every one is within the acceptable linkage rate.",
    "own_verdict": "Its own verdict, as its single audit would state it (its flags, its checks).",
    "decided": "The attacker that decided the panel's verdict: the highest corrected bound, or, inconclusive, the "
               "first whose checks failed.",
}


def panel_verdict_row(verdict: PanelVerdict) -> None:
    """A panel's verdict: its status and headline, which attacker decided it, and the attackers side by side (each
    one's first-guess rate with its interval, the documents it flags, its corrected bound on what the panel leaves,
    its own verdict)."""
    show = st.success if verdict.status == "release" else st.warning
    show(plain(f"Panel verdict: {verdict.title}. {verdict.headline}"),
         icon=":material/gavel:" if verdict.status in ("release", "redact") else ":material/report:")
    st.markdown(f"**{plain(decided_sentence(verdict))}**")
    table = members_table(verdict)
    st.dataframe(table, hide_index=True, width="stretch", column_config=members_columns(verdict))
    st.caption(f"{verdict.n_flagged:,} of {verdict.n_documents:,} documents are flagged by at least one of the "
               f"{len(verdict.members)} attackers ({plain(verdict.rule)}); {verdict.remainder_documents:,} are left. "
               + plain(panel_correction(len(verdict.members))))


def members_columns(verdict: PanelVerdict) -> dict:
    """``column_config`` of :func:`~cpa_ui.analysis.members_table`."""
    bound = f"rest linked at most ({100 * verdict.bound_level:.4g} % bound)"
    return {
        "attacker": st.column_config.TextColumn("attacker", help=MEMBER_HELP["attacker"]),
        "first_guess_rate": st.column_config.NumberColumn("first guess right", format="percent",
                                                          help=HELP["first_guess"]),
        "first_guess_ci": st.column_config.TextColumn("95 % CI", help=MEMBER_HELP["first_guess_ci"]),
        "n_flagged": st.column_config.NumberColumn("flagged", format="%d", help=MEMBER_HELP["n_flagged"]),
        "remainder_first_guess": st.column_config.NumberColumn("first guess right on the rest",
                                                               format="percent",
                                                               help=MEMBER_HELP["remainder_first_guess"]),
        "corrected_bound": st.column_config.NumberColumn(bound, format="percent", help=MEMBER_HELP["corrected_bound"]),
        "own_verdict": st.column_config.TextColumn("own verdict", help=MEMBER_HELP["own_verdict"]),
        "decided": st.column_config.CheckboxColumn("decided", help=MEMBER_HELP["decided"]),
    }


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
            st.caption(f"Calibrated: {plain(run.label)}, config {run.config_id}")
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
    if threat is None or not any(needs_endpoint(get_spec(name), threat.query_mode) for name in threat.attackers):
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


def panel_flagged_columns(frame) -> dict:
    """``column_config`` of a panel's flagged documents (:func:`~cpa_ui.analysis.panel_flagged_table`): the worst over
    the attackers, each with the attacker that gave it."""
    config = table_columns(frame)
    config.update({
        "flagged_by": st.column_config.TextColumn("flagged by", help="The attackers that flag the document, each with "
                                                  "the rule that flagged it (set, linkage or both)."),
        "linkage_probability": st.column_config.NumberColumn("largest linkage probability", format="%.3f",
                                                             help=HELP["linkage_probability"] + " The largest over "
                                                             "the attackers."),
        "linkage_by": st.column_config.TextColumn("largest by", help="The attacker that gave the largest linkage "
                                                  "probability; its interval and its first guess are shown."),
        "set_size": st.column_config.NumberColumn("smallest |C|", format="%d", help=HELP["set_size"] + " The "
                                                  "smallest over the attackers: no certificate of its own, the "
                                                  "smallest of valid ones."),
        "set_size_by": st.column_config.TextColumn("smallest by", help="The attacker that gave the smallest set."),
    })
    return config


def document_members_columns(frame) -> dict:
    """``column_config`` of one document under each attacker of a panel (:func:`~cpa_ui.analysis.document_members`)."""
    config = table_columns(frame)
    config.update({
        "flagged_by": st.column_config.TextColumn("flagged by", help="The rule by which this attacker flags the "
                                                  "document (set, linkage or both; empty: it does not)."),
        "true_rank": st.column_config.NumberColumn("true identity's rank", format="%d", help=HELP["true_rank"]),
        "smallest_set": st.column_config.CheckboxColumn("smallest set", help="This attacker gave the document's "
                                                        "smallest set over the panel."),
        "largest_linkage": st.column_config.CheckboxColumn("largest linkage", help="This attacker gave the "
                                                           "document's largest linkage probability over the panel."),
    })
    return config


def redaction_columns() -> dict:
    """``column_config`` of a redaction verified outside its search (:func:`~cpa_core.report.html.redaction_frame`)."""
    rate = "{} first-guess rate on the release {} redaction"
    return {
        "attacker": st.column_config.TextColumn("attacker", help=MEMBER_HELP["attacker"]),
        "held_out": st.column_config.CheckboxColumn("held out", help="The attacker the redaction search never "
                                                    "consulted: it grades the redaction without having shaped it."),
        "first_guess_before": st.column_config.NumberColumn("first guess right before", format="percent",
                                                            help=rate.format("The attacker's", "before")),
        "before_low": st.column_config.NumberColumn("before: low", format="percent", help="Its interval's bottom."),
        "before_high": st.column_config.NumberColumn("before: high", format="percent", help="Its interval's top."),
        "n_before": st.column_config.NumberColumn("documents before", format="%d",
                                                  help="The labelled documents the rate counts."),
        "first_guess_after": st.column_config.NumberColumn("first guess right after", format="percent",
                                                           help=rate.format("The attacker's", "after")),
        "after_low": st.column_config.NumberColumn("after: low", format="percent", help="Its interval's bottom."),
        "after_high": st.column_config.NumberColumn("after: high", format="percent", help="Its interval's top."),
        "n_after": st.column_config.NumberColumn("documents after", format="%d",
                                                 help="The labelled documents the rate counts."),
    }


def what_if_section(table, key: str, searched: bool) -> None:
    """The curator's trade-off (:func:`~cpa_core.redaction.whatif.what_if`): what another acceptable rate or k would
    release, as a chart over the rates and a table of every policy; the declared policy stays what the verdict uses."""
    from cpa_ui.figures import fig_what_if

    with st.expander("What if: another acceptable rate or k", icon=":material/tune:"):
        st.caption(HELP["what_if"] + ("" if searched else " No search ran yet: every flagged document counts as "
                                                          "withheld until 'Suggest redactions' on the Redact page."))
        st.plotly_chart(fig_what_if(table), key=f"{key}.what_if_chart")
        shown = table.drop(columns=["declared"])
        shown.insert(0, "policy", ["declared" if d else "" for d in table["declared"]])
        st.dataframe(shown, hide_index=True, width="stretch", height=300, key=f"{key}.what_if_table",
                     column_config=table_columns(shown))
