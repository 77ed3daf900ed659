"""The audit configuration file (TOML): knowledge levels, attacker parameters and audit defaults.

::

    [knowledge.K1]
    fields = ["age_band", "gender", "occupation", "city"]
    query_mode = "direct"

    [attacker.tfidf]
    temperature = 0.05

    [audit]
    knowledge = "K1"
    confidence = [0.90, 0.95, 0.99]
    n_cal = 400
    n_test = 500

    [columns.documents]      # optional: our column name = the file's column name
    text = "note"

Command-line options override the file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
from .knowledge import KnowledgeLevel

AUDIT_KEYS = {"knowledge", "attacker", "score", "confidence", "n_cal", "n_test", "seed", "group_column", "top_k",
              "miss_policy", "flag_below", "leakage_threshold", "flag_confidence"}
TFIDF_KEYS = {"max_features", "ngram_max", "min_df", "temperature", "chunk_size"}
SECTIONS = {"knowledge", "attacker", "audit", "columns"}


@dataclass(frozen=True)
class ProjectConfig:
    """What an audit configuration file declares."""

    file: str | None = None
    levels: dict[str, KnowledgeLevel] = field(default_factory=dict)
    attackers: dict[str, dict] = field(default_factory=dict)
    audit: dict = field(default_factory=dict)
    columns: dict[str, dict[str, str]] = field(default_factory=dict)

    def level(self, name: str) -> KnowledgeLevel:
        if name not in self.levels:
            where = self.file or "the configuration"
            raise ConfigError(f"{where}: unknown knowledge level '{name}'; expected one of "
                              f"{', '.join(self.levels) or '(none declared)'}")
        return self.levels[name]


def _unknown(file: str, section: str, keys, allowed) -> None:
    extra = sorted(set(keys) - set(allowed))
    if extra:
        raise ConfigError(f"{file}: unknown key '{extra[0]}' in [{section}]; expected one of {', '.join(sorted(allowed))}")


def parse_config(text: str, file: str = "<config>") -> ProjectConfig:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{file}: not valid TOML ({error})") from None
    _unknown(file, "top level", raw, SECTIONS)
    levels = {}
    for name, spec in raw.get("knowledge", {}).items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{file}: [knowledge.{name}] must be a table with 'fields'")
        _unknown(file, f"knowledge.{name}", spec, {"fields", "query_mode", "description"})
        fields = spec.get("fields")
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise ConfigError(f"{file}: [knowledge.{name}] fields: expected a list of column names, found {fields!r}")
        levels[name] = KnowledgeLevel(name, tuple(fields), spec.get("query_mode", "direct"), spec.get("description", ""))
    attackers = raw.get("attacker", {})
    if "tfidf" in attackers:
        _unknown(file, "attacker.tfidf", attackers["tfidf"], TFIDF_KEYS)
    audit = raw.get("audit", {})
    _unknown(file, "audit", audit, AUDIT_KEYS)
    columns = raw.get("columns", {})
    _unknown(file, "columns", columns, {"documents", "registry", "scores"})
    return ProjectConfig(file, levels, attackers, audit, columns)


def load_config(path: str | Path) -> ProjectConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: configuration file is not UTF-8 text") from None
    return parse_config(text, str(path))


ATTACKERS = ("tfidf", "imported")


def declare_audit(project: ProjectConfig, registry, *, knowledge: str | None = None, fields=None,
                  attacker: str | None = None, imported=None, overrides: dict | None = None):
    """The audit configuration and attacker declared by a file plus explicit overrides.

    Overrides (e.g. from the command line or the dashboard) win over ``[audit]``; ``None`` values are
    ignored. ``fields`` declares a custom knowledge level; ``imported`` is an
    :class:`~cpa_core.attackers.imported.ImportedAttacker` for the ``imported`` attacker.

    Returns
    -------
    (AuditConfig, attacker)
    """
    from .attackers.tfidf import TfidfAttacker
    from .audit import DEFAULT_CONFIDENCES, AuditConfig
    from .knowledge import full_knowledge

    settings = {**project.audit, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    if fields:
        level = KnowledgeLevel("custom", tuple(fields), settings.get("query_mode", "direct"), "custom field list")
    elif knowledge or settings.get("knowledge"):
        level = project.level(knowledge or settings["knowledge"])
    else:
        level = full_knowledge(registry)
    level.check_against(registry)
    name = attacker or ("imported" if imported is not None else settings.get("attacker", "tfidf"))
    if name not in ATTACKERS:
        raise ConfigError(f"unknown attacker '{name}'; expected one of {', '.join(ATTACKERS)}")
    top_k = settings.get("top_k")
    if name == "imported":
        if imported is None:
            raise ConfigError("the 'imported' attacker needs a table of candidate scores (--scores FILE)")
        chosen = imported
    else:
        params = {k: v for k, v in project.attackers.get("tfidf", {}).items()}
        params.update({k: settings[k] for k in ("temperature",) if k in settings})
        chosen = TfidfAttacker(**params, top_k=top_k)
    config = AuditConfig(
        knowledge=level, attacker=chosen.params(), score=settings.get("score", "aps"),
        confidences=tuple(settings.get("confidence", DEFAULT_CONFIDENCES)),
        n_cal=settings.get("n_cal"), n_test=settings.get("n_test"), seed=int(settings.get("seed", 0)),
        group_column=settings.get("group_column") or None, top_k=top_k,
        miss_policy=settings.get("miss_policy", "infinite"), flag_below=int(settings.get("flag_below", 11)),
        leakage_threshold=settings.get("leakage_threshold"), flag_confidence=settings.get("flag_confidence"))
    return config, chosen
