"""The rules for reopening a recorded audit (the dashboard's History page and anything else that reopens one):
whether it fits the loaded documents and registry, and the attacker that explains its matches without attacking.

Reopening sends nothing anywhere: an attacker that would send text to an LLM endpoint, or that certifies an
imported table of scores, is not rebuilt; it explains nothing, as does one whose parameters no longer build.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpa_core.attack.base import Attacker, AttackerBase
from cpa_core.attack.registry import get_spec
from cpa_core.attack.spec import BuildContext
from cpa_core.audit.configuration import AuditConfig
from cpa_core.common.errors import CPAError, HistoryError
from cpa_core.io.tables import Documents, Registry
from cpa_core.store.history import SHORT_SHA, HistoryEntry


def data_mismatch(entry: HistoryEntry, documents: Documents, registry: Registry) -> str | None:
    """Why a recorded audit cannot be reopened on these documents and registry (``None`` when it can).

    What is shown beside the certificates (the documents' texts, the registry's profiles) must be what the audit
    certified: the same files (checksum) with the same rows kept.
    """
    for role, table in (("documents", documents), ("registry", registry)):
        recorded = entry.checksums.get(role) or {}
        if recorded.get("sha256") != table.sha256 or recorded.get("rows") != len(table):
            return (f"Audit {entry.id} certified the {role} file {recorded.get('file')} (SHA-256 "
                    f"{str(recorded.get('sha256'))[:SHORT_SHA]}…, {recorded.get('rows')} rows), not the loaded one "
                    f"({table.file}, SHA-256 {table.sha256[:SHORT_SHA]}…, {len(table)} rows): load that file on the "
                    "Data page to reopen it.")
    return None


@dataclass
class Unexplained(AttackerBase):
    """Stands for a reopened audit's attacker when it is not rebuilt: it explains no match and never attacks."""

    name: str

    def params(self) -> dict:
        return {"attacker": self.name}

    def attack(self, doc_ids, texts, registry, level, progress=None):
        raise HistoryError("a reopened audit is not attacked again; calibrate on the Calibrate page instead")


def declared_attacker(config: AuditConfig, registry: Registry) -> Attacker:
    """The audit's attacker rebuilt from its declared parameters, so that its matches can be explained; an
    :class:`Unexplained` stand-in when it would send text anywhere, needs imported scores or no longer builds."""
    try:
        spec = get_spec(config.attacker.name)
        if not (spec.sends_text or spec.needs_scores):
            context = BuildContext(registry, config.knowledge, config.top_k, specs=get_spec)  # no LLM client
            return spec.build(spec.resolve(dict(config.attacker.params)), context)
    except CPAError:
        pass
    return Unexplained(config.attacker.name)
