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

def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


INTEGER = (_is_int, "an integer")
NUMBER = (_is_number, "a number")
TEXT = (lambda v: isinstance(v, str), "a text")
NUMBERS = (lambda v: isinstance(v, list) and v != [] and all(_is_number(x) for x in v), "a list of numbers")

AUDIT_SCHEMA = {
    "knowledge": TEXT, "attacker": TEXT, "score": TEXT, "confidence": NUMBERS, "n_cal": INTEGER, "n_test": INTEGER,
    "seed": INTEGER, "group_column": TEXT, "top_k": INTEGER, "miss_policy": TEXT, "flag_below": INTEGER,
    "leakage_threshold": NUMBER, "flag_confidence": NUMBER, "query_mode": TEXT,
}
ATTACKER_SCHEMAS = {
    "tfidf": {"max_features": INTEGER, "ngram_max": INTEGER, "min_df": NUMBER, "temperature": NUMBER,
              "chunk_size": INTEGER},
    "dense": {"model": TEXT, "temperature": NUMBER, "batch_size": INTEGER, "cache_dir": TEXT},
}
TEXTS = (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of texts")
ATTACKER_SCHEMAS.update({
    "clues": {"max_clues": INTEGER, "retries": INTEGER, "seed": INTEGER, "max_tokens": INTEGER},
    "forced_choice": {"m": INTEGER, "shortlist_k": INTEGER, "mode": TEXT, "seed": INTEGER, "shortlister": TEXT,
                      "max_tokens": INTEGER, "option_chars": INTEGER, "top_logprobs": INTEGER,
                      "label_positions": INTEGER, "shuffle": (lambda v: isinstance(v, bool), "true or false")},
    "profile": {"m": INTEGER, "seed": INTEGER, "attributes": TEXTS, "free_text": TEXTS, "max_tokens": INTEGER,
                "max_allowed_values": INTEGER},
})
LLM_SCHEMA = {
    "base_url": TEXT, "model": TEXT, "api_key_env": TEXT, "temperature": NUMBER, "top_p": NUMBER,
    "max_tokens": INTEGER, "timeout_s": NUMBER, "max_retries": INTEGER, "concurrency": INTEGER,
    "call_budget": INTEGER, "cache_dir": TEXT, "backoff_base_s": NUMBER, "backoff_max_s": NUMBER,
}
SECTIONS = {"knowledge", "attacker", "audit", "columns", "llm"}
COLUMN_TABLES = {"documents", "registry", "scores"}


@dataclass(frozen=True)
class ProjectConfig:
    """What an audit configuration file declares."""

    file: str | None = None
    levels: dict[str, KnowledgeLevel] = field(default_factory=dict)
    attackers: dict[str, dict] = field(default_factory=dict)
    audit: dict = field(default_factory=dict)
    columns: dict[str, dict[str, str]] = field(default_factory=dict)
    llm: dict = field(default_factory=dict)

    def level(self, name: str) -> KnowledgeLevel:
        if name not in self.levels:
            where = self.file or "the configuration"
            raise ConfigError(f"{where}: unknown knowledge level '{name}'; expected one of "
                              f"{', '.join(self.levels) or '(none declared)'}")
        return self.levels[name]


def _table(file: str, section: str, value) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: [{section}] must be a table, found {type(value).__name__} {value!r}")
    return value


def _check(file: str, section: str, table: dict, schema: dict) -> dict:
    for key, value in table.items():
        if key not in schema:
            raise ConfigError(f"{file}: unknown key '{key}' in [{section}]; expected one of {', '.join(sorted(schema))}")
        accepts, expected = schema[key]
        if not accepts(value):
            raise ConfigError(f"{file}: [{section}] {key}: expected {expected}, found {value!r}")
    return table


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
        _check(file, f"knowledge.{name}", _table(file, f"knowledge.{name}", spec),
               {"fields": (lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v), "a list of column names"),
                "query_mode": TEXT, "description": TEXT})
        if "fields" not in spec:
            raise ConfigError(f"{file}: [knowledge.{name}] fields: expected a list of column names, found None")
        levels[name] = KnowledgeLevel(name, tuple(spec["fields"]), spec.get("query_mode", "direct"),
                                      spec.get("description", ""))
    attackers = {}
    for name, params in raw.get("attacker", {}).items():
        if name not in ATTACKER_SCHEMAS:
            raise ConfigError(f"{file}: unknown attacker [attacker.{name}]; expected one of {', '.join(ATTACKER_SCHEMAS)}")
        attackers[name] = _check(file, f"attacker.{name}", _table(file, f"attacker.{name}", params), ATTACKER_SCHEMAS[name])
    audit = _check(file, "audit", raw.get("audit", {}), AUDIT_SCHEMA)
    columns = {}
    for name, mapping in raw.get("columns", {}).items():
        if name not in COLUMN_TABLES:
            raise ConfigError(f"{file}: unknown key '{name}' in [columns]; expected one of {', '.join(sorted(COLUMN_TABLES))}")
        columns[name] = _check(file, f"columns.{name}", _table(file, f"columns.{name}", mapping),
                               {key: TEXT for key in mapping})
    llm = _check(file, "llm", raw.get("llm", {}), LLM_SCHEMA)
    return ProjectConfig(file, levels, attackers, audit, columns, llm)


def load_config(path: str | Path) -> ProjectConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: configuration file is not UTF-8 text") from None
    return parse_config(text, str(path))


ATTACKERS = ("tfidf", "dense", "imported", "forced_choice", "profile")
LLM_ATTACKERS = ("forced_choice", "profile")


def make_llm_client(llm: dict, http_client=None):
    """An :class:`~cpa_core.llm.LLMClient` for the ``[llm]`` settings (endpoint, model, decoding, budget)."""
    from .llm import LLMClient, LLMSettings

    if not llm.get("base_url") or not llm.get("model"):
        raise ConfigError("an LLM attacker needs an endpoint: declare [llm] base_url and model "
                          "(or --llm-url and --llm-model)")
    try:
        return LLMClient(LLMSettings(**llm), http_client)
    except ValueError as error:
        raise ConfigError(f"[llm]: {error}") from None


def declare_audit(project: ProjectConfig, registry, *, knowledge: str | None = None, fields=None,
                  attacker: str | None = None, imported=None, overrides: dict | None = None, llm_client=None):
    """The audit configuration and attacker declared by a file plus explicit overrides.

    Overrides (e.g. from the command line or the dashboard) win over ``[audit]``; ``None`` values are
    ignored. ``fields`` declares a custom knowledge level; ``imported`` is an
    :class:`~cpa_core.attackers.imported.ImportedAttacker` for the ``imported`` attacker.
    ``llm_client`` replaces the client built from ``[llm]`` (LLM attackers and clue extraction).

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
    if settings.get("query_mode") and settings["query_mode"] != level.query_mode:
        from dataclasses import replace
        level = replace(level, query_mode=settings["query_mode"])  # validated by KnowledgeLevel
    level.check_against(registry)
    name = attacker or ("imported" if imported is not None else settings.get("attacker", "tfidf"))
    if name not in ATTACKERS:
        raise ConfigError(f"unknown attacker '{name}'; expected one of {', '.join(ATTACKERS)}")
    top_k = settings.get("top_k")
    if imported is not None and name != "imported":
        raise ConfigError(f"a table of candidate scores was given, but the attacker is '{name}'; "
                          "use the 'imported' attacker to certify it")
    if name == "imported":
        if imported is None:
            raise ConfigError("the 'imported' attacker needs a table of candidate scores (--scores FILE)")
        chosen = imported
    else:
        if settings.get("model") is not None and name != "dense":
            raise ConfigError("a model (--model) applies to the dense attacker only; add --attacker dense")
        needs_llm = name in LLM_ATTACKERS or level.query_mode == "direct_plus_clues"
        client = (llm_client or make_llm_client(project.llm)) if needs_llm else None
        clues = None
        if level.query_mode == "direct_plus_clues":
            from .attackers.llm_clues import LLMClueExtractor
            clues = LLMClueExtractor(client, **project.attackers.get("clues", {}))

        def retrieval(kind: str):
            if kind == "dense":
                from .attackers.dense import DenseAttacker
                params = dict(project.attackers.get("dense", {}))
                params.update({k: settings[k] for k in ("temperature", "model") if k in settings and name == "dense"})
                return DenseAttacker(**params, top_k=top_k, clue_extractor=clues)
            if kind != "tfidf":
                raise ConfigError(f"unknown retrieval attacker '{kind}'; expected tfidf or dense")
            params = dict(project.attackers.get("tfidf", {}))
            params.update({k: settings[k] for k in ("temperature",) if k in settings and name == "tfidf"})
            return TfidfAttacker(**params, top_k=top_k, clue_extractor=clues)

        if name == "forced_choice":
            from .attackers.forced_choice import ForcedChoiceAttacker
            params = dict(project.attackers.get("forced_choice", {}))
            shortlister = retrieval(params.pop("shortlister", "tfidf"))
            if params.get("mode", "sampling") not in ("sampling", "logprobs"):
                raise ConfigError(f"[attacker.forced_choice] mode: expected 'sampling' or 'logprobs', "
                                  f"found {params['mode']!r}")
            chosen = ForcedChoiceAttacker(shortlister, client, **params)
        elif name == "profile":
            from .attackers.profile import (MAX_ALLOWED_VALUES, ProfileAttacker, attributes_from_registry,
                                            categorical_columns)
            params = dict(project.attackers.get("profile", {}))
            max_values = params.pop("max_allowed_values", MAX_ALLOWED_VALUES)
            columns = params.pop("attributes", None) or categorical_columns(registry, level.fields, max_values)
            outside = [c for c in columns if c not in level.fields]
            if outside:
                raise ConfigError(f"Profile-CPA attribute '{outside[0]}' is not a field of knowledge level "
                                  f"'{level.name}' ({list(level.fields)})")
            attributes = attributes_from_registry(registry, columns, free_text=params.pop("free_text", ()),
                                                  max_allowed_values=max_values)
            chosen = ProfileAttacker(client, attributes, **params)
            if (overrides or {}).get("score") is None:  # Profile-CPA scores candidates itself
                settings["score"] = "given"
        else:
            chosen = retrieval(name)
    config = AuditConfig(
        knowledge=level, attacker=chosen.params(), score=settings.get("score", "aps"),
        confidences=tuple(settings.get("confidence", DEFAULT_CONFIDENCES)),
        n_cal=settings.get("n_cal"), n_test=settings.get("n_test"), seed=int(settings.get("seed", 0)),
        group_column=settings.get("group_column") or None, top_k=top_k,
        miss_policy=settings.get("miss_policy", "infinite"), flag_below=int(settings.get("flag_below", 11)),
        leakage_threshold=settings.get("leakage_threshold"), flag_confidence=settings.get("flag_confidence"))
    return config, chosen
