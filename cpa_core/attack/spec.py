"""How an attacker declares itself: its name, typed parameters and how to build it.

Every surface is derived from these declarations: the TOML schema (``[attacker.<name>]``), the command
line's options, the dashboard's forms, the plain-language configuration summary and the manifest. A
new attacker is one module that defines an :class:`AttackerSpec` plus one entry in
:data:`cpa_core.attack.attackers.BUILTIN` (or a call to :func:`~cpa_core.attack.registry.register`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param, resolve_params

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker, ClueExtractor
    from cpa_core.io.candidate_scores import CandidateScores
    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import Registry


@dataclass
class BuildContext:
    """What an attacker may be built from: the registry, the knowledge level and the declared sections.

    ``sections`` holds every ``[attacker.<name>]`` table as declared; ``scores`` the imported table of
    candidate scores, if any. The LLM client of ``[llm]`` is built on first request (attackers that do
    not call an LLM never create one), and so is the clue extractor of a ``direct_plus_clues`` level. ``specs``
    looks up another attacker by name (:data:`cpa_core.attack.registry.ATTACKERS`' ``get``), for an attacker
    built on another (a shortlister).
    """

    registry: "Registry"
    level: "KnowledgeLevel"
    top_k: int | None = None
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    scores: "CandidateScores | None" = None
    make_llm_client: Callable[[], Any] | None = None
    specs: "Callable[[str], AttackerSpec] | None" = None
    _client: Any = field(default=None, repr=False)
    _clues: Any = field(default=None, repr=False)

    def llm_client(self):
        """The ``[llm]`` client, built once."""
        if self._client is None:
            if self.make_llm_client is None:
                raise ConfigError("an LLM attacker needs an endpoint: declare [llm] base_url and model "
                                  "(or --llm-url and --llm-model)")
            self._client = self.make_llm_client()
        return self._client

    def clue_extractor(self) -> "ClueExtractor | None":
        """The ``[attacker.clues]`` extractor when the level's query mode appends clues, else ``None``."""
        if self.level.query_mode != "direct_plus_clues":
            return None
        if self._clues is None:
            from cpa_core.attack.clues import CLUE_PARAMS, LLMClueExtractor

            self._clues = LLMClueExtractor(self.llm_client(),
                                           **resolve_params(CLUE_PARAMS, self.sections.get("clues", {}),
                                                            "[attacker.clues]"))
        return self._clues

    def attacker(self, name: str, **overrides) -> "Attacker":
        """Another registered attacker (e.g. a shortlister), built from its declared section."""
        if self.specs is None:
            raise ConfigError(f"the attacker '{name}' is needed, but no attacker registry was given to look it up")
        spec = self.specs(name)
        params = spec.resolve(self.sections.get(name, {}))
        return spec.build({**params, **overrides}, self)


@dataclass(frozen=True)
class AttackerSpec:
    """An attacker's declaration.

    Parameters
    ----------
    name : the registry key, the TOML section ``[attacker.<name>]`` and the ``--attacker`` value
    label : a short display name
    description : what the attacker does, in plain language (the dashboard and the configuration summary)
    params : its typed parameters
    build : ``(resolved parameters, BuildContext) -> Attacker``
    sends_text : it sends document text to the configured LLM endpoint
    needs_scores : it certifies a table of candidate scores computed elsewhere (``--scores``)
    uses_clues : its queries can carry LLM clues (the ``direct_plus_clues`` query mode)
    required_score : the nonconformity score its weights need (``None``: any score)
    runs_on_cluster : its attack keeps no state from one document to the next, so that a fresh copy of it can
        attack any partition of the documents on a Dask worker (:mod:`cpa_core.attack.engine`)
    """

    name: str
    label: str
    description: str
    params: tuple[Param, ...]
    build: Callable[[dict[str, Any], BuildContext], "Attacker"]
    sends_text: bool = False
    needs_scores: bool = False
    uses_clues: bool = False
    required_score: str | None = None
    runs_on_cluster: bool = False

    def param(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def resolve(self, declared: Mapping[str, Any]) -> dict[str, Any]:
        """Every parameter's value from a declared table (unknown keys and bad values are errors)."""
        return resolve_params(self.params, declared, f"[attacker.{self.name}]")
