"""The audit configuration file (TOML): knowledge levels, attacker parameters and audit defaults.

::

    [knowledge.K1]
    fields = ["age_band", "gender", "occupation", "city"]
    query_mode = "direct"

    [attacker.tfidf]         # one table per attacker, its keys are the attacker's declared parameters
    temperature = 0.05

    [audit]
    knowledge = "K1"
    confidence = [0.90, 0.95, 0.99]
    n_cal = 400
    n_test = 500

    [columns.documents]      # optional: our column name = the file's column name
    text = "note"
    doc_id = "<row number>"  # a release without ids: its rows numbered 1, 2, … (cpa audit --number-rows)

    [evidence]               # optional: regexes of anonymiser placeholders, never evidence (replaces the
    # default list, cpa_core.io.placeholders.DEFAULT_PLACEHOLDERS; another list is another configuration id)
    placeholders = ["PERSON_[0-9]+", "<[A-Z]+>", "[*]{3,}"]

Every table is validated here, once, against its declared parameters (:data:`AUDIT_PARAMS`, the
attackers' specs, :data:`~cpa_core.llm.client.LLM_PARAMS`); command-line options and the dashboard's choices
override the file and go through the same checks in :func:`declare_audit`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cpa_core.attack.base import Attacker
from cpa_core.attack.clues import CLUE_PARAMS
from cpa_core.attack.registry import attacker_specs, get_spec
from cpa_core.attack.spec import BuildContext
from cpa_core.audit.configuration import AUDIT_DEFAULTS, AUDIT_PARAMS, AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import input_facts
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param, check_table
from cpa_core.io.candidate_scores import CandidateScores
from cpa_core.io.knowledge import QUERY_MODES, KnowledgeLevel, full_knowledge
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, check_placeholders
from cpa_core.io.tables import Documents, Registry, load_documents, load_registry
from cpa_core.llm.client import LLM_PARAMS

LEVEL_PARAMS = (
    Param("fields", "fields", (), "Fields", "Registry fields the attacker sees."),
    Param("query_mode", "choice", "direct", "Query mode", "How the attacker queries.", choices=QUERY_MODES),
    Param("description", "text", "", "Description", "What the level means."),
)
COLUMN_TABLES = ("documents", "registry", "scores")
INPUT_PARAMS = (
    Param("sha256", "text", None, "SHA-256", "The file's checksum: another file is refused.", optional=True),
    Param("encoding", "text", None, "Encoding", "The text encoding of a CSV or JSONL file (default UTF-8).",
          optional=True),
)
"""An ``[inputs.<documents|registry|scores>]`` table: the file the configuration certifies."""
SECTIONS = ("knowledge", "attacker", "audit", "columns", "inputs", "llm", "evidence")
EVIDENCE_KEYS = ("placeholders",)
"""The ``[evidence]`` table: ``placeholders``, the regular expressions of anonymiser placeholders, whose text is
never evidence (default :data:`~cpa_core.io.placeholders.DEFAULT_PLACEHOLDERS`)."""
CLUES_SECTION = "clues"  # [attacker.clues]: the clue extraction of direct_plus_clues levels


def attacker_tables() -> dict[str, tuple[Param, ...]]:
    """The ``[attacker.<name>]`` tables: every registered attacker's parameters, and the clue extraction's."""
    return {**{spec.name: spec.params for spec in attacker_specs()}, CLUES_SECTION: CLUE_PARAMS}


@dataclass(frozen=True)
class ProjectConfig:
    """What an audit configuration file declares (every table already validated)."""

    file: str | None = None
    levels: dict[str, KnowledgeLevel] = field(default_factory=dict)
    attackers: dict[str, dict] = field(default_factory=dict)
    audit: dict = field(default_factory=dict)
    columns: dict[str, dict[str, str]] = field(default_factory=dict)
    llm: dict = field(default_factory=dict)
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The declared placeholders (``[evidence] placeholders``), else the default list."""
        return tuple(self.evidence.get("placeholders", DEFAULT_PLACEHOLDERS))

    def level(self, name: str) -> KnowledgeLevel:
        if name not in self.levels:
            where = self.file or "the configuration"
            raise ConfigError(f"{where}: unknown knowledge level '{name}'; expected one of "
                              f"{', '.join(self.levels) or '(none declared)'}")
        return self.levels[name]

    @property
    def group_column(self) -> str | None:
        return self.audit.get("group_column") or None

    def encoding(self, role: str) -> str:
        """The declared encoding of an input (``[inputs.<role>] encoding``), else UTF-8."""
        return self.inputs.get(role, {}).get("encoding") or "utf-8"

    def load_documents(self, source, *, name: str | None = None, group_column: str | None = None,
                       on_invalid: str = "error", encoding: str | None = None) -> Documents:
        """Documents read with the declared column mapping, group column and encoding (``group_column`` and
        ``encoding`` override them)."""
        return load_documents(source, name=name, columns=self.columns.get("documents"),
                              group_column=group_column or self.group_column, on_invalid=on_invalid,
                              encoding=encoding or self.encoding("documents"))

    def load_registry(self, source, *, name: str | None = None, on_invalid: str = "error",
                      encoding: str | None = None) -> Registry:
        """A registry read with the declared column mapping and encoding (``encoding`` overrides it)."""
        return load_registry(source, name=name, columns=self.columns.get("registry"), on_invalid=on_invalid,
                             encoding=encoding or self.encoding("registry"))


def _table(file: str, section: str, value) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: [{section}] must be a table, found {type(value).__name__} {value!r}")
    return value


def _checked(file: str, params: tuple[Param, ...], table: Mapping, section: str) -> dict:
    try:
        return check_table(params, table, f"[{section}]")
    except ConfigError as error:
        raise ConfigError(f"{file}: {error}") from None


def _evidence(file: str, table: Mapping) -> dict:
    for key in table:
        if key not in EVIDENCE_KEYS:
            raise ConfigError(f"{file}: unknown key '{key}' in [evidence]; expected one of {', '.join(EVIDENCE_KEYS)}")
    if "placeholders" not in table:
        return {}
    try:
        return {"placeholders": check_placeholders(table["placeholders"], "[evidence] placeholders")}
    except ConfigError as error:
        raise ConfigError(f"{file}: {error}") from None


def parse_config(text: str, file: str = "<config>") -> ProjectConfig:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{file}: not valid TOML ({error})") from None
    for key in raw:
        if key not in SECTIONS:
            raise ConfigError(f"{file}: unknown key '{key}' at the top level; expected one of {', '.join(sorted(SECTIONS))}")
        _table(file, key, raw[key])
    levels = {}
    for name, spec in raw.get("knowledge", {}).items():
        declared = _checked(file, LEVEL_PARAMS, _table(file, f"knowledge.{name}", spec), f"knowledge.{name}")
        if "fields" not in declared:
            raise ConfigError(f"{file}: [knowledge.{name}] fields: expected a list of column names, found None")
        levels[name] = KnowledgeLevel(name, declared["fields"], declared.get("query_mode", "direct"),
                                      declared.get("description", ""))
    tables = attacker_tables()
    attackers = {}
    for name, params in raw.get("attacker", {}).items():
        if name not in tables:
            raise ConfigError(f"{file}: unknown attacker [attacker.{name}]; expected one of {', '.join(tables)}")
        attackers[name] = _checked(file, tables[name], _table(file, f"attacker.{name}", params), f"attacker.{name}")
    audit = _checked(file, AUDIT_PARAMS, raw.get("audit", {}), "audit")
    columns = {}
    for name, mapping in raw.get("columns", {}).items():
        if name not in COLUMN_TABLES:
            raise ConfigError(f"{file}: unknown key '{name}' in [columns]; expected one of {', '.join(sorted(COLUMN_TABLES))}")
        text_params = tuple(Param(key, "text", None, key, "") for key in _table(file, f"columns.{name}", mapping))
        columns[name] = _checked(file, text_params, mapping, f"columns.{name}")
    inputs = {}
    for name, table in raw.get("inputs", {}).items():
        if name not in COLUMN_TABLES:
            raise ConfigError(f"{file}: unknown key '{name}' in [inputs]; expected one of {', '.join(sorted(COLUMN_TABLES))}")
        inputs[name] = _checked(file, INPUT_PARAMS, _table(file, f"inputs.{name}", table), f"inputs.{name}")
    llm = _checked(file, LLM_PARAMS, raw.get("llm", {}), "llm")
    evidence = _evidence(file, raw.get("evidence", {}))
    return ProjectConfig(file, levels, attackers, audit, columns, llm, inputs, evidence)


def load_config(path: str | Path) -> ProjectConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: configuration file is not UTF-8 text") from None
    return parse_config(text, str(path))


def make_llm_client(llm: Mapping[str, Any], http_client=None, purpose: str = "an LLM attacker"):
    """An :class:`~cpa_core.llm.client.LLMClient` for the ``[llm]`` settings (endpoint, model, decoding, budget);
    ``purpose`` names what needs it when they lack an endpoint."""
    from cpa_core.llm.client import LLMClient, LLMSettings

    if not llm.get("base_url") or not llm.get("model"):
        raise ConfigError(f"{purpose} needs an endpoint: declare [llm] base_url and model "
                          "(or --llm-url and --llm-model)")
    settings = {k: v for k, v in check_table(LLM_PARAMS, llm, "[llm]").items() if v is not None}
    return LLMClient(LLMSettings(**settings), http_client)


def declare_audit(project: ProjectConfig, registry: Registry, *, knowledge: str | None = None, fields=None,
                  attacker: str | None = None, scores: CandidateScores | None = None,
                  overrides: Mapping[str, Any] | None = None, attacker_params: Mapping[str, Any] | None = None,
                  llm_client=None, documents: Documents | None = None) -> tuple[AuditConfig, Attacker]:
    """The audit configuration and attacker declared by a file plus explicit overrides.

    Overrides of ``[audit]`` (``overrides``) and of the chosen attacker's table (``attacker_params``),
    e.g. from the command line or the dashboard, win over the file; ``None`` values are ignored; both go
    through the file's checks. ``fields`` declares a custom knowledge level; ``scores`` is the table of the
    ``imported`` attacker; ``llm_client`` replaces the client built from ``[llm]``. With ``documents`` the
    configuration is bound to the release (its id covers the files' checksums); files other than those an
    ``[inputs]`` table declares are refused.
    """
    declared = {k: v for k, v in (overrides or {}).items() if v is not None}
    settings = {**AUDIT_DEFAULTS, **project.audit, **check_table(AUDIT_PARAMS, declared, "[audit]")}
    query_mode = settings["query_mode"]
    if fields and tuple(fields) == tuple(registry.fields):  # every field: the undeclared default, one id
        level = full_knowledge(registry)
    elif fields:
        level = KnowledgeLevel("custom", tuple(fields), query_mode or "direct", "custom field list")
    elif knowledge or settings["knowledge"]:
        level = project.level(knowledge or settings["knowledge"])
    else:
        level = full_knowledge(registry)
    if query_mode and query_mode != level.query_mode:
        level = replace(level, query_mode=query_mode)
    level.check_against(registry)
    spec = get_spec(attacker or ("imported" if scores is not None else settings["attacker"]))
    if scores is not None and not spec.needs_scores:
        raise ConfigError(f"a table of candidate scores was given, but the attacker is '{spec.name}'; "
                          "use the 'imported' attacker to certify it")
    section = {**project.attackers.get(spec.name, {}),
               **{k: v for k, v in (attacker_params or {}).items() if v is not None}}
    params = spec.resolve(section)
    context = BuildContext(registry, level, settings["top_k"], {**project.attackers, spec.name: section}, scores,
                           (lambda: llm_client) if llm_client is not None else (lambda: make_llm_client(project.llm)),
                           get_spec)
    chosen = spec.build(dict(params), context)
    tables = {spec.name: dict(params)}
    if CLUES_SECTION in project.attackers and level.query_mode == "direct_plus_clues" and spec.uses_clues:
        tables[CLUES_SECTION] = dict(project.attackers[CLUES_SECTION])
    score = settings["score"]
    if chosen.required_score and "score" not in declared:  # e.g. Profile-CPA scores candidates itself
        score = chosen.required_score
    config = AuditConfig(
        knowledge=level, attacker=AttackerConfig.of(chosen, params, tables),
        score=score, confidences=tuple(settings["confidence"]),
        protocol=settings["protocol"],
        n_cal=settings["n_cal"], n_test=settings["n_test"], seed=settings["seed"],
        group_column=settings["group_column"], certainty_bins=settings["certainty_bins"], top_k=settings["top_k"],
        miss_policy=settings["miss_policy"], flag_below=settings["flag_below"],
        leakage_threshold=settings["leakage_threshold"], acceptable_linkage=settings["acceptable_linkage"],
        flag_confidence=settings["flag_confidence"],
        data={role: {"sha256": table["sha256"]} for role, table in project.inputs.items() if table.get("sha256")},
        placeholders=project.placeholders)
    if documents is not None:
        config = config.with_data(input_facts(documents, registry, scores))
    return config, chosen
