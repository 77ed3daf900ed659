"""Knowledge levels: which registry fields the attacker sees, and how it queries.

A level is declared in the audit configuration (TOML), for example::

    [knowledge.K1]
    fields = ["age_band", "gender", "occupation", "city"]
    query_mode = "direct"

Profile texts are built from the allowed fields only; nothing else of the registry reaches the
attacker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cpa_core.common.errors import ConfigError
from cpa_core.io.columns import REGISTRY_ID
from cpa_core.io.tables import Registry, _is_missing

QUERY_MODES = ("direct", "direct_plus_clues")


@dataclass(frozen=True)
class KnowledgeLevel:
    """A named set of visible registry fields and a query mode."""

    name: str
    fields: tuple[str, ...]
    query_mode: str = "direct"
    description: str = ""

    def __post_init__(self):
        if not self.fields:
            raise ConfigError(f"knowledge level '{self.name}' lists no fields; expected at least one registry field")
        if self.query_mode not in QUERY_MODES:
            raise ConfigError(f"knowledge level '{self.name}': unknown query_mode '{self.query_mode}'; "
                              f"expected one of {', '.join(QUERY_MODES)}")
        if REGISTRY_ID in self.fields:
            raise ConfigError(f"knowledge level '{self.name}' lists '{REGISTRY_ID}': the identity itself "
                              "cannot be an attacker's field")

    def to_dict(self) -> dict:
        return {"name": self.name, "fields": list(self.fields), "query_mode": self.query_mode,
                "description": self.description}

    def check_against(self, registry: Registry) -> None:
        missing = [f for f in self.fields if f not in registry.frame.columns]
        if missing:
            raise ConfigError(f"knowledge level '{self.name}' uses field '{missing[0]}', which {registry.file} "
                              f"does not have; expected one of {registry.fields}")


def full_knowledge(registry: Registry) -> KnowledgeLevel:
    """The level that sees every registry field (used when no level is declared)."""
    return KnowledgeLevel("full", tuple(registry.fields), "direct", "every registry field")


def _cell_text(value) -> str:
    if isinstance(value, (list, tuple, np.ndarray)):
        return ", ".join(_cell_text(v) for v in value if _cell_text(v))
    if isinstance(value, dict):
        return ", ".join(f"{k} {_cell_text(v)}" for k, v in value.items() if _cell_text(v))
    if _is_missing(value) or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return ""
    return str(value).strip()


def profile_texts(registry: Registry, level: KnowledgeLevel) -> list[str]:
    """One text per registry row, joining the values of the level's fields (in declared order)."""
    level.check_against(registry)
    columns = [registry.frame[f].tolist() for f in level.fields]
    return [". ".join(t for t in (_cell_text(v) for v in row) if t) for row in zip(*columns)]
