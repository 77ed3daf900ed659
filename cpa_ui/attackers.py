"""The threat-model page's attacker forms, derived from the core's attacker specs, and the translation of
the curator's choices into the core's declared configuration: one per attacker of the panel (:class:`Declared`).

A form is a registered :class:`~cpa_core.attack.spec.AttackerSpec`: its label, description and typed
parameters. The LLM endpoint (``[llm]`` base_url and model) is asked for when the attacker sends text to an
LLM or its queries carry LLM clues; it has widget keys of its own, apart from the attacker's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cpa_core.attack.base import Attacker
from cpa_core.attack.registry import attacker_specs, get_spec
from cpa_core.attack.spec import AttackerSpec
from cpa_core.audit.configuration import AUDIT_DEFAULTS, AuditConfig
from cpa_core.audit.panel import default_panel, panel_config_id
from cpa_core.audit.project import declare_audit
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.io.candidate_scores import CandidateScores
from cpa_core.llm.client import LLM_PARAMS
from cpa_ui.state import CUSTOM_LEVEL, DataSet, ThreatChoice

ENDPOINT = tuple(p for p in LLM_PARAMS if p.name in ("base_url", "model"))
"""The ``[llm]`` parameters a form asks for (the rest come from the configuration file)."""
SUGGESTED_ENDPOINT = {"base_url": "http://127.0.0.1:8080/v1"}  # a local server; no default model


def offered_specs() -> list[AttackerSpec]:
    """Every registered attacker, in registration order."""
    return attacker_specs()


def needs_endpoint(spec: AttackerSpec, query_mode: str) -> bool:
    """Whether the attacker, at this query mode, sends document text to an LLM endpoint."""
    return spec.sends_text or (spec.uses_clues and query_mode == "direct_plus_clues")


def form_defaults(spec: AttackerSpec, data: DataSet) -> dict:
    """The attacker's parameters as the configuration file declares them (else their defaults)."""
    return {**spec.defaults(), **data.project.attackers.get(spec.name, {})}


def endpoint_defaults(data: DataSet) -> dict:
    """The endpoint the configuration file declares, else a local server's address."""
    return {p.name: data.project.llm.get(p.name) or SUGGESTED_ENDPOINT.get(p.name) for p in ENDPOINT}


def widget_bounds(param: Param) -> dict:
    """``min_value``/``max_value`` of a number widget (a strict lower bound becomes the next step)."""
    low = param.min if param.min is not None else (None if param.above is None else
                                                    param.above + (1 if param.kind == "int" else 0.001))
    bounds = {"min_value": low, "max_value": param.max}
    if param.kind == "int":
        return {k: None if v is None else int(v) for k, v in bounds.items()}
    return {k: None if v is None else float(v) for k, v in bounds.items()}


@dataclass(frozen=True)
class Member:
    """One declared attacker of the panel: its configuration and its built attacker."""

    config: AuditConfig
    attacker: Attacker


@dataclass(frozen=True)
class Declared:
    """The declared audit: one member per attacker of the panel (one member: a single attacker's audit)."""

    members: tuple[Member, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(member.config.attacker.name for member in self.members)

    @property
    def config(self) -> AuditConfig:
        """The first member's configuration (the members differ in their attacker only)."""
        return self.members[0].config

    @property
    def attacker(self) -> Attacker:
        return self.members[0].attacker

    @property
    def config_id(self) -> str:
        """The panel's configuration id (:func:`~cpa_core.audit.panel.panel_config_id`: a panel of one is its
        member's)."""
        return panel_config_id(self.members)

    @property
    def is_panel(self) -> bool:
        return len(self.members) > 1

    def pairs(self) -> list[tuple[AuditConfig, Attacker]]:
        """``(configuration, attacker)`` of each member, as :func:`~cpa_core.audit.panel.audit_panel` takes them."""
        return [(member.config, member.attacker) for member in self.members]


def declare(data: DataSet, threat: ThreatChoice, scores: CandidateScores | None = None
            ) -> tuple[AuditConfig, Attacker]:
    """The core's configuration and attacker for the curator's choices of one attacker (what a page that runs one
    attacker declares; :func:`declare_panel` declares a panel).

    Raises :class:`~cpa_core.common.errors.ConfigError` (shown on the page) when the choices are inconsistent, or
    declare an attacker panel.
    """
    if len(threat.attackers) > 1:
        raise ConfigError(f"the threat model declares an attacker panel ({', '.join(threat.attackers)}); expected one "
                          "attacker here")
    declared = declare_panel(data, threat, scores)
    return declared.config, declared.attacker


def declare_panel(data: DataSet, threat: ThreatChoice, scores: CandidateScores | None = None) -> Declared:
    """The core's configuration and attacker of every attacker of the panel the curator chose.

    Raises :class:`~cpa_core.common.errors.ConfigError` (shown on the page) when the choices are inconsistent.
    """
    if not threat.attackers:
        raise ConfigError("choose at least one attacker")
    if len(threat.attackers) > 1 and any(get_spec(name).needs_scores for name in threat.attackers):
        raise ConfigError("the imported attacker certifies a table of scores on its own; it is no member of a panel: "
                          "choose it alone")
    return Declared(tuple(Member(*_declare_one(data, threat, name, scores)) for name in threat.attackers))


def _declare_one(data: DataSet, threat: ThreatChoice, name: str, scores: CandidateScores | None
                 ) -> tuple[AuditConfig, Attacker]:
    spec = get_spec(name)
    project = data.project
    audit = {
        "score": spec.required_score or threat.score, "confidence": list(threat.confidences),
        "protocol": threat.protocol, "n_cal": threat.n_cal, "n_test": threat.n_test, "seed": threat.seed, "top_k": threat.top_k, "miss_policy": threat.miss_policy,
        "group_column": (data.group_column or "group") if threat.per_group else None,
        "query_mode": threat.query_mode,
    }
    llm = {**project.llm, **{key: value for key, value in threat.llm if value}}
    # the release policy and the certainty strata are declared once in the file; the rest of [audit] is what the
    # page declares
    policy = {k: v for k, v in project.audit.items()
              if k in ("flag_below", "leakage_threshold", "acceptable_linkage", "flag_confidence", "certainty_bins")}
    project = replace(project, llm=llm, audit=policy)
    if spec.needs_scores and scores is None:
        raise ConfigError("the imported-scores attacker needs a table of candidate scores: upload one above")
    custom = threat.knowledge == CUSTOM_LEVEL
    if custom and not threat.custom_fields:
        raise ConfigError("a custom knowledge level needs at least one registry field")
    return declare_audit(project, data.registry, knowledge=None if custom else threat.knowledge,
                         fields=list(threat.custom_fields) if custom else None, attacker=spec.name,
                         scores=scores if spec.needs_scores else None, overrides=audit,
                         attacker_params=threat.params_of(name), documents=data.documents)


def usable_levels(data: DataSet) -> list[str]:
    """The declared knowledge levels whose fields the loaded registry has."""
    fields = set(data.registry.fields)
    return [name for name, level in data.project.levels.items() if set(level.fields) <= fields]


def default_attackers(data: DataSet) -> tuple[str, ...]:
    """The attackers the configuration file declares (``[audit] attackers``, else ``attacker``), else the default
    panel for the loaded release's size (:func:`~cpa_core.audit.panel.default_panel`), as the command line chooses."""
    declared = data.project.audit.get("attackers") or (
        [data.project.audit["attacker"]] if data.project.audit.get("attacker") else None)
    if declared:
        return tuple(dict.fromkeys(declared))
    return default_panel(len(data.documents), len(data.registry))


def default_threat(data: DataSet) -> ThreatChoice:
    """The configuration file's defaults, adjusted to what the loaded data allows."""
    audit = {**AUDIT_DEFAULTS, **data.project.audit}
    usable = usable_levels(data)
    knowledge = audit.get("knowledge") if audit.get("knowledge") in usable else (usable[0] if usable else CUSTOM_LEVEL)
    attackers = default_attackers(data)
    n_docs = len(data.documents)
    protocol = audit["protocol"]
    n_cal, n_test = audit.get("n_cal"), audit.get("n_test")
    if (n_cal or 0) + (n_test or 0) > n_docs:
        n_cal = n_test = None
    return ThreatChoice(
        attackers=attackers,
        attacker_params=tuple((name, tuple(form_defaults(get_spec(name), data).items())) for name in attackers),
        llm=tuple(endpoint_defaults(data).items()),
        knowledge=knowledge,
        custom_fields=tuple(data.registry.fields),
        query_mode=audit.get("query_mode") or "direct",
        score=audit["score"],
        top_k=audit.get("top_k"),
        protocol=protocol, n_cal=n_cal, n_test=n_test, seed=int(audit["seed"]),
        # groups mapped on upload are calibrated apart unless the configuration says otherwise (protective)
        per_group=data.documents.has_groups and (bool(audit["group_column"]) or "group_column" not in data.project.audit),
        miss_policy=audit["miss_policy"],
        confidences=tuple(float(c) for c in audit["confidence"]),
    )
