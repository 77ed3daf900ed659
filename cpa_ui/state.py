"""State that survives page switches, behind small typed helpers over ``st.session_state``.

Every value lives under one ``cpa.<name>`` key, read and written through :data:`state`
(``state.run = ...``). Widgets use their own ``w.<page>.<name>`` keys, one per page (a widget
belongs to the page that draws it), which Streamlit forgets when the page is left; :func:`widget_key`
seeds them again from the stored value, so a slider shows the curator's last choice on every page.

The other helpers take a widget's key (from :func:`widget_key`, or the ``key=`` of a widget keyed by the page):
:func:`widget_value` reads it, :func:`set_widget` changes it, :func:`reseeded_widget` seeds it again when what it
shows is made anew, :func:`forget_widgets` drops a family of them; :func:`value_changed` remembers a value between
runs (a click, a file's columns). No other module reads or writes ``st.session_state``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, TypeVar

import numpy as np
import pandas as pd
import streamlit as st

from cpa_core.attack.base import Attacker
from cpa_core.audit.configuration import AUDIT_DEFAULTS, AuditConfig
from cpa_core.audit.panel import PanelResult
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.project import ProjectConfig
from cpa_core.audit.results import AuditResult
from cpa_core.io.candidate_scores import CandidateScores
from cpa_core.io.tables import Documents, Registry
from cpa_core.redaction.decisions import DecisionRows
from cpa_core.redaction.utility import ReleaseUtility

T = TypeVar("T")
CUSTOM_LEVEL = "custom"


@dataclass(frozen=True)
class DataSet:
    """The documents and registry being audited, and where they came from.

    ``fingerprint`` identifies the loaded content (file checksums plus column mapping and row
    policy); an audit result is reused only for the same fingerprint and configuration.
    """

    documents: Documents
    registry: Registry
    project: ProjectConfig
    source: str  # "sample" or "upload"
    fingerprint: str
    group_column: str | None = None  # the documents' column holding the groups, if any
    documents_source: bytes | None = field(default=None, repr=False, compare=False)  # the file as read (exports)

    @property
    def groups(self) -> list[str]:
        if not self.documents.has_groups:
            return []
        return sorted({str(g) for g in self.documents.frame["group"]})


@dataclass(frozen=True)
class ThreatChoice:
    """What the curator declared on the threat-model page (turned into each attacker's ``AuditConfig`` by
    :func:`cpa_ui.attackers.declare`).

    ``attackers``: the attacker panel, in declared order (one attacker: a single attacker's audit);
    ``attacker_params``: each one's parameters, ``(name, ((parameter, value), ...))``."""

    attackers: tuple[str, ...] = (AUDIT_DEFAULTS["attacker"],)
    attacker_params: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    llm: tuple[tuple[str, Any], ...] = ()  # the LLM endpoint ([llm] base_url, model) when the attacker needs one
    knowledge: str = "K2"
    custom_fields: tuple[str, ...] = ()
    query_mode: str = "direct"
    score: str = AUDIT_DEFAULTS["score"]
    top_k: int | None = AUDIT_DEFAULTS["top_k"]
    protocol: str = AUDIT_DEFAULTS["protocol"]
    n_cal: int | None = AUDIT_DEFAULTS["n_cal"]
    n_test: int | None = AUDIT_DEFAULTS["n_test"]
    seed: int = AUDIT_DEFAULTS["seed"]
    per_group: bool = False
    miss_policy: str = AUDIT_DEFAULTS["miss_policy"]
    confidences: tuple[float, ...] = AUDIT_DEFAULTS["confidence"]

    @property
    def attacker(self) -> str:
        """The first attacker of the panel (the one a page that runs a single attacker offers first)."""
        return self.attackers[0] if self.attackers else ""

    def params_of(self, name: str) -> dict:
        """The parameters declared for attacker ``name`` (empty when it is no member)."""
        return dict(dict(self.attacker_params).get(name, ()))

    @property
    def params(self) -> dict:
        """The first attacker's parameters."""
        return self.params_of(self.attacker)

    def alone(self, name: str, params: dict | None = None) -> ThreatChoice:
        """The same threat with attacker ``name`` alone (its declared parameters, or ``params``)."""
        chosen = self.params_of(name) if params is None else params
        return replace(self, attackers=(name,), attacker_params=((name, tuple(chosen.items())),))


@dataclass(frozen=True)
class AuditRun:
    """One calibrated audit: the core's result plus what the dashboard needs to label and reuse it.

    An attacker panel's audit holds its :class:`~cpa_core.audit.panel.PanelResult` (``panel``) and each member's
    attacker (``attackers``); its ``result`` and ``attacker`` are its first member's, and :meth:`member` is the run of
    one member (what a page that shows one attacker's certificate reads)."""

    result: AuditResult
    key: str  # data fingerprint + configuration id (a panel's: its panel_config_id)
    label: str
    data_fingerprint: str
    seconds: float
    attacker: Attacker = field(repr=False, compare=False)  # the declared attacker (explains matches)
    audit_id: int | None = None  # its number in the audit history, once recorded (a panel: its first member's)
    panel: PanelResult | None = field(default=None, repr=False, compare=False)  # an attacker panel's members
    attackers: tuple[Attacker, ...] = field(default=(), repr=False, compare=False)  # a panel: each member's attacker
    member_ids: tuple[int, ...] = ()  # a panel: each member's number in the audit history, once recorded
    redaction: dict | None = field(default=None, compare=False)  # a panel's redaction verified outside its search

    @property
    def is_panel(self) -> bool:
        return self.panel is not None

    @property
    def names(self) -> tuple[str, ...]:
        """The attackers of the audit: the panel's members, in declared order, or its one attacker."""
        return self.panel.names if self.panel is not None else (self.result.config.attacker.name,)

    @property
    def results(self) -> tuple[AuditResult, ...]:
        """Every result the run holds: each member's of a panel, else its one."""
        return self.panel.members if self.panel is not None else (self.result,)

    @property
    def config_id(self) -> str:
        """The configuration id of the audit: the panel's (:func:`~cpa_core.audit.panel.panel_config_id`) or the
        result's."""
        return self.panel.config_id if self.panel is not None else self.result.config.config_id

    def member(self, name: str) -> AuditRun:
        """The run of attacker ``name`` of a panel, as a single attacker's audit (its own cache key); the run itself
        when it is not a panel."""
        if self.panel is None:
            return self
        i = self.panel.names.index(name)
        return AuditRun(self.panel.members[i], f"{self.key}|{name}", f"{self.label} · {name}", self.data_fingerprint,
                        self.seconds, self.attackers[i], self.member_ids[i] if i < len(self.member_ids) else None)

    def member_keys(self) -> tuple[str, ...]:
        """The cache keys of the members' runs (:meth:`member`); none when it is not a panel."""
        return tuple(f"{self.key}|{name}" for name in self.names) if self.panel is not None else ()


@dataclass(frozen=True)
class Comparison:
    """Audits of several configurations on matched splits, and an optional drift table."""

    runs: tuple[AuditRun, ...] = ()
    drift: pd.DataFrame | None = field(default=None, compare=False)
    drift_labels: tuple[str, str] | None = None


@dataclass(frozen=True)
class Review:
    """The review of a run's redactions: what was asked (``ask``: run key, strategy, level, policy, deny and allow
    lists), the search's suggestions (``total``: the flagged documents; fewer suggestions when it was stopped), the
    decisions table (``table``: its ``accept`` column the search's own, ``proposed``, with the curator's decisions
    over it; ``keys``: each row's :func:`~cpa_core.redaction.decisions.row_keys`), and, once run, the audit of the
    release the accepted rows make (``after``, with its data and what it keeps, ``utility``). ``before`` and ``data``
    are the audit and data it redacts.

    ``decided`` holds every decision taken on the table, by row key, in the order taken: the curator's ticks and bulk
    actions, and the rows a word of the deny or allow list (``lists``, as applied to the table) rejects or accepts.
    A new search keeps them: a row of the same key is decided as before. ``version`` counts the table's changes other
    than ticks (a bulk action, a list, a search, the curator's own text); ``rows`` is what its rows are
    (:class:`~cpa_core.redaction.decisions.DecisionRows`), read when they change, not at each tick."""

    ask: tuple
    before: AuditRun = field(compare=False)
    data: DataSet = field(compare=False)
    suggestions: tuple = ()
    total: int = 0
    table: pd.DataFrame | None = field(default=None, compare=False)
    version: int = 0
    after: AuditRun | None = field(default=None, compare=False)
    after_data: DataSet | None = field(default=None, compare=False)
    utility: ReleaseUtility | None = field(default=None, compare=False)  # what the release ``after`` audits keeps
    rewrite: dict | None = field(default=None, compare=False)  # the LLM rewrite's settings, when the search used one
    proposed: np.ndarray | None = field(default=None, compare=False)  # the table's accept column as proposed
    keys: tuple = field(default=(), compare=False)
    decided: dict = field(default_factory=dict, compare=False)  # row key -> (accept, who decided it)
    lists: tuple = field(default=((), ()), compare=False)  # the deny and allow lists applied to the table
    rows: DecisionRows | None = field(default=None, compare=False)  # what the table's rows are, read once per table

    @property
    def complete(self) -> bool:
        return len(self.suggestions) >= self.total


class _Slot(Generic[T]):
    """A typed attribute stored in ``st.session_state['cpa.<name>']``."""

    def __init__(self, default: Callable[[], T]):
        self.default = default

    def __set_name__(self, owner, name: str) -> None:
        self.key = f"cpa.{name}"

    def __get__(self, obj, owner=None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]
        if self.key not in st.session_state:
            st.session_state[self.key] = self.default()
        return st.session_state[self.key]

    def __set__(self, obj, value: T) -> None:
        if self.key in st.session_state:  # the value replaced is let go now, not when the next run starts (Streamlit
            del st.session_state[self.key]  # keeps the last run's values until then): it may be an audit's result
        st.session_state[self.key] = value


class AuditState:
    """The curator's audit as it moves through the pages."""

    data: _Slot[DataSet | None] = _Slot(lambda: None)
    data_error: _Slot[str | None] = _Slot(lambda: None)  # why the bundled sample could not be loaded
    notice: _Slot[str | None] = _Slot(lambda: None)  # a one-time message for the next run of a page
    threat: _Slot[ThreatChoice | None] = _Slot(lambda: None)
    scores: _Slot[CandidateScores | None] = _Slot(lambda: None)  # the imported attacker's table
    run: _Slot[AuditRun | None] = _Slot(lambda: None)
    confidence: _Slot[float] = _Slot(lambda: 0.95)
    member: _Slot[str | None] = _Slot(lambda: None)  # the panel's attacker the pages show one certificate of
    flag_below: _Slot[int] = _Slot(lambda: AUDIT_DEFAULTS["flag_below"])
    leakage_threshold: _Slot[float | None] = _Slot(lambda: None)
    acceptable_linkage: _Slot[float | None] = _Slot(lambda: None)  # None: 1/k
    comparison: _Slot[Comparison] = _Slot(Comparison)
    review: _Slot[Review | None] = _Slot(lambda: None)  # the redaction under review (Redact page)
    # the Redact page's last run drew the audit of the release its decisions made (a tick that drops it reruns the page)
    audit_drawn: _Slot[bool] = _Slot(lambda: False)
    # weak references to the results of audits let go, each with the runs of the app left to wait for it to be gone
    # (cpa_ui.memory gives their memory back)
    letting_go: _Slot[tuple] = _Slot(tuple)

    @property
    def policy(self) -> ReleasePolicy:
        """The release policy the pages view the results under (k, the leakage threshold and the acceptable linkage
        rate)."""
        return ReleasePolicy(self.flag_below, self.leakage_threshold, self.acceptable_linkage)

    def adopt_policy(self, config: AuditConfig) -> None:
        """View the results at the configuration's flagging level under its release policy (a reopened audit
        then exports the configuration it declared)."""
        self.confidence = float(config.policy_confidence)
        self.flag_below = config.flag_below
        self.leakage_threshold = config.leakage_threshold
        self.acceptable_linkage = config.acceptable_linkage

    def forget_results(self) -> None:
        """Drop everything computed from the current data (after new data is loaded;
        :func:`cpa_ui.memory.forget_results` also drops what the caches hold for it)."""
        self.run = None
        self.comparison = Comparison()
        self.review = None


state = AuditState()


def widget_key(name: str, value: Any) -> str:
    """The key of the widget showing ``name``, seeded with ``value`` when the widget has no state yet."""
    key = f"w.{name}"
    if key not in st.session_state:
        st.session_state[key] = value
    return key


def widget_value(key: str) -> Any:
    """What the widget with key ``key`` holds now (``None`` while it has no state)."""
    return st.session_state.get(key)


def set_widget(key: str, value: Any) -> None:
    """Change what the widget with key ``key`` shows at the next run (call from a callback or before it is drawn)."""
    st.session_state[key] = value


def widget_showing(key: str, value: Any) -> str:
    """``key``, the widget set to show ``value`` when it holds anything else: what it shows is decided elsewhere
    (a callback, a bulk action), and it is updated in place, not drawn anew."""
    if st.session_state.get(key, not value) != value:
        st.session_state[key] = value
    return key


def reseeded_widget(key: str, signature: Any, value: Callable[[], Any]) -> str:
    """``key``, the widget seeded with ``value()`` when it has no state yet or when ``signature`` (what the value is
    made from) differs from the last call's: the widget keeps the curator's edits until what it shows is made anew.
    The signature is remembered under ``<key>.seed``."""
    if value_changed(f"{key}.seed", signature) or key not in st.session_state:
        st.session_state[key] = value()
    return key


def forget_widgets(prefix: str) -> None:
    """Drop the state of every widget whose key starts with ``prefix``: each shows its default at the next run."""
    for key in [k for k in st.session_state if str(k).startswith(prefix)]:
        del st.session_state[key]


def value_changed(key: str, value: Any) -> bool:
    """Whether ``value`` differs from the one remembered under ``key`` by the last call (``None`` before any), which
    it then replaces: tells a new click or a new file from the same one seen again at the next run."""
    changed = st.session_state.get(key) != value
    st.session_state[key] = value
    return changed
