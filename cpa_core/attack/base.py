"""The attacker interface.

An attacker turns documents into a :class:`~cpa_core.attack.candidates.CandidateTable` given the registry
and the knowledge level. The calibration layer never sees the attacker, only the table. Besides the
attack, every attacker answers the questions the pipeline asks of it (the :class:`Attacker` protocol):
how many LLM calls a run would make, what it counted during its last run, which LLM clients it holds
(to close them), and how to explain a match when it can. :class:`AttackerBase` gives the answers of an
attacker that calls no LLM and explains nothing; :class:`RetrievalAttacker` those of the retrieval
attackers (TF-IDF, dense), whose queries may carry LLM clues.

A query builder produces the retrieval query of each document: ``direct`` uses the released text;
``direct_plus_clues`` appends clues from a clue extractor (an LLM) to it
(:func:`~cpa_core.attack.explainers.clue_query`), and the candidate table keeps each document's clues, so that
evidence is always offsets into the released text.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import numpy as np

from cpa_core.attack.candidates import CandidateTable, rank_by_similarity
from cpa_core.attack.explainers import Explainer, clue_query
from cpa_core.attack.fitted import shared_fit
from cpa_core.attack.temperature import (
    AUTO,
    FALLBACK_TEMPERATURE,
    TUNING_MAX,
    TUNING_SHARE,
    fit_block_rows,
    fit_temperature,
    tuning_fold,
)
from cpa_core.attack.tfidf_index import TfidfIndex
from cpa_core.common.errors import ConfigError
from cpa_core.common.progress import Progress
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.io.tables import Registry


LLM_COUNTS = ("requests", "invalid_answers", "failed_answers")
"""The counts every LLM component of an attacker reports in :meth:`Attacker.counters`, which the release verdict
reads: ``requests`` the answers it asked for in the last attack (cached or not), ``invalid_answers`` those that gave
it nothing to use (a pick naming no option, a value naming none; always the failed ones), ``failed_answers`` those
the LLM client returned as failed (empty, truncated, filtered or over-long: never cached)."""


class ClueExtractor(Protocol):
    """Query augmentation of the ``direct_plus_clues`` mode (:class:`~cpa_core.attack.clues.LLMClueExtractor`)."""

    def __call__(self, doc_ids: Sequence[str], texts: Sequence[str],
                 progress: Progress | None = None) -> list[list[str]]:
        """A list of clue strings per document."""

    def params(self) -> dict:
        """Its settings, for the manifest."""

    def estimate_calls(self, doc_ids: Sequence[str], texts: Sequence[str]) -> int:
        """The LLM calls a run would make (no call is made)."""

    def counters(self) -> dict | None:
        """What the last run counted (``None`` before a run)."""

    def clients(self) -> list:
        """The LLM clients it holds."""


MIN_TEMPERATURE, MAX_TEMPERATURE = 0.001, 1000.0  # beyond them softmax weights overflow or are all equal
TEMPERATURE_RULE = ("the temperature of a 11-point grid from 0.002 to 2 giving the smallest mean certified set (APS, "
                    "leave-one-out thresholds at 90 % confidence) over a tuning fold "
                    f"({TUNING_SHARE:.0%} of the labelled documents, at most {TUNING_MAX}, those whose ids hash "
                    "lowest), which is then left out of calibration")


class Attacker(Protocol):
    """What the pipeline needs of an attacker.

    ``required_score`` names the nonconformity score the attacker's weights need (Profile-CPA scores
    candidates itself: ``"given"``), ``None`` when any score applies; ``weight_kind`` says what its
    weights are (``probability``, ``rank`` or ``score``).
    """

    name: str
    required_score: str | None
    weight_kind: str

    def params(self) -> dict:
        """Every parameter that defines the attack, for the manifest."""

    def attack(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        """Rank the registry for each document."""

    def learn(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
              identities: Sequence[str | None], progress: Progress | None = None) -> dict:
        """Set what the attacker chooses from the labelled documents before it attacks them (a temperature
        ``auto``); a symmetric function of all of them, so their scores stay exchangeable. Returns what it
        chose, for the manifest (``{}``: nothing)."""

    def adopt(self, learned: dict) -> None:
        """Take what :meth:`learn` chose in an audit (its ``learned`` input), so that texts attacked after it (an
        edited document re-scored) are attacked exactly as that audit's documents were."""

    def estimate_calls(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry,
                       level: KnowledgeLevel) -> int:
        """The LLM calls an attack would make (answers already cached cost none); no call is made."""

    def counters(self) -> dict[str, dict]:
        """What the last attack counted (invalid picks, answers without clues, calls), by component; an LLM
        component's counts carry :data:`LLM_COUNTS`, which the verdict reads."""

    def clients(self) -> list:
        """The LLM clients the attacker holds (closed when the run ends)."""

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> Explainer | None:
        """The terms that drive a document's match to its candidates, when the attacker can say."""

    def trained(self) -> dict:
        """What the last attack trained on the registry alone (a classifier's penalty and what chose it), for the
        manifest (``{}``: nothing)."""


class AttackerBase:
    """The protocol's answers for an attacker that calls no LLM, counts nothing and explains nothing."""

    required_score: str | None = None
    weight_kind: str = "probability"
    costly_rescoring: bool = False
    """Whether attacking one edited text costs far more than a lexical attacker's sparse products (a model's
    encoding, an LLM's calls): a redaction search then attacks with it only the steps it would take."""

    def learn(self, doc_ids, texts, registry, level, identities, progress=None) -> dict:
        return {}

    def adopt(self, learned: dict) -> None:
        pass

    def estimate_calls(self, doc_ids, texts, registry, level) -> int:
        return 0

    def counters(self) -> dict[str, dict]:
        return {}

    def clients(self) -> list:
        return []

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> Explainer | None:
        return None

    def trained(self) -> dict:
        return {}


def texts_key(doc_ids: Sequence[str], texts: Sequence[str]) -> str:
    """A digest of the exact documents (ids and texts) an attacker was given."""
    import hashlib

    digest = hashlib.sha256()
    for part in (*map(str, doc_ids), "\x01", *map(str, texts)):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    return digest.hexdigest()


def close_clients(attacker: Attacker) -> None:
    """Close every distinct LLM client of an attacker."""
    for client in {id(c): c for c in attacker.clients()}.values():
        client.close()


def extract_clues(doc_ids: Sequence[str], texts: Sequence[str], level: KnowledgeLevel,
                  clue_extractor: ClueExtractor | None, progress: Progress | None = None
                  ) -> list[tuple[str, ...]] | None:
    """The clues of each document under the level's query mode (``None`` in the ``direct`` mode)."""
    if level.query_mode == "direct":
        return None
    if clue_extractor is None:
        raise ConfigError(f"knowledge level '{level.name}' uses query mode 'direct_plus_clues', "
                          "which needs a clue extractor (an LLM endpoint); none is configured")
    return [tuple(c) for c in clue_extractor(doc_ids, texts, progress)]


def build_queries(doc_ids: Sequence[str], texts: Sequence[str], level: KnowledgeLevel,
                  clue_extractor: ClueExtractor | None, progress: Progress | None = None) -> list[str]:
    """The retrieval query of each document under the level's query mode."""
    clues = extract_clues(doc_ids, texts, level, clue_extractor, progress)
    return list(texts) if clues is None else [clue_query(text, c) for text, c in zip(texts, clues)]


class RetrievalAttacker(AttackerBase):
    """Shared by the retrieval attackers: queries (with clues at a ``direct_plus_clues`` level), the
    temperature (a number, or ``auto``: chosen from the labelled documents by :meth:`learn`), the ranking
    loop over similarity blocks, the clue extractor's calls, counters and client.

    Subclasses are dataclasses with ``temperature``, ``top_k``, ``chunk_size`` and ``clue_extractor``, and
    implement :meth:`similarities` (queries and block function; computed once for :meth:`learn` and
    :meth:`attack` on the same inputs).
    """

    temperature: float | str
    top_k: int | None
    chunk_size: int
    clue_extractor: Any

    def similarities(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
                     progress: Progress | None = None) -> tuple[list[str], Callable[[int, int], np.ndarray]]:
        """The queries and ``(start, stop) -> similarities of those queries to every profile``."""
        raise NotImplementedError

    @property
    def costly_rescoring(self) -> bool:
        """With a clue extractor, an LLM reads every edited text."""
        return self.clue_extractor is not None

    def queries(self, doc_ids: Sequence[str], texts: Sequence[str], level: KnowledgeLevel,
                progress: Progress | None = None) -> list[str]:
        """The queries (:func:`build_queries`); their clues are kept for the candidate table."""
        clues = extract_clues(doc_ids, texts, level, self.clue_extractor, progress)
        self._clues = None if clues is None else tuple(clues)
        return list(texts) if clues is None else [clue_query(text, c) for text, c in zip(texts, clues)]

    def _start(self) -> None:
        """Called by subclasses' ``__post_init__``: no prepared inputs, no chosen temperature yet."""
        if self.temperature != AUTO and (isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float))
                                         or not MIN_TEMPERATURE <= self.temperature <= MAX_TEMPERATURE):
            raise ConfigError(f"temperature must be a positive number (from {MIN_TEMPERATURE:g} to "
                              f"{MAX_TEMPERATURE:g}) or '{AUTO}', found {self.temperature!r}")
        self._memo: tuple | None = None
        self._clues: tuple | None = None
        self.temperature_: float | None = None
        self._fitted_on: tuple | None = None

    def fitted(self, attribute: str, settings: Hashable, registry: Registry, level: KnowledgeLevel,
               fit: Callable[[list[str]], Any]) -> Any:
        """What the attacker fits on the registry's profiles under the level (``fit(profile texts)``, kept in
        ``attribute``): fitted once per (registry, level), and shared with any attacker of this process of the same
        kind and ``settings`` on the same profiles (:func:`~cpa_core.attack.fitted.shared_fit`). Attacking one edited
        document again, or explaining matches, reuses it."""
        on = (registry.sha256, len(registry), level)
        if getattr(self, attribute) is None or self._fitted_on != on:
            texts = profile_texts(registry, level)
            ids = registry.ids.tolist()
            setattr(self, attribute, shared_fit(type(self).__qualname__, settings, ids, texts, lambda: fit(texts)))
            self._fitted_on = on
        return getattr(self, attribute)

    def _prepared(self, doc_ids, texts, registry, level, progress):
        key = (texts_key(doc_ids, texts), registry.sha256, len(registry), level)
        memo = self._memo
        if memo is None or memo[0] != key:
            self._clues = None  # set by :meth:`queries` when the queries carry clues
            prepared = self.similarities(doc_ids, texts, registry, level, progress)
            self._memo = (key, prepared, self._clues)
        return self._memo[1]

    def adopt(self, learned: dict) -> None:
        """Temperature ``auto``: the temperature the audit chose."""
        if self.temperature == AUTO and learned.get("temperature") is not None:
            self.temperature_ = float(learned["temperature"])

    def learn(self, doc_ids, texts, registry, level, identities, progress=None) -> dict:
        """Temperature ``auto``: the grid temperature that best predicts the identities of a tuning fold of the
        labelled documents (:func:`~cpa_core.attack.temperature.tuning_fold`), whose ids it returns
        (``tuning_documents``): the audit leaves them out of calibration."""
        if self.temperature != AUTO:
            return {}
        labelled = np.array([ident is not None for ident in identities], dtype=bool)
        fold = tuning_fold(doc_ids, labelled)
        column = {ident: i for i, ident in enumerate(registry.ids.tolist())}
        truth = np.array([column.get(identities[i], -1) for i in fold], dtype=np.int64)
        chosen = None
        if (truth >= 0).any():  # the fold's own queries: a few hundred rows of the registry
            _, similarities = self.similarities([doc_ids[i] for i in fold], [texts[i] for i in fold], registry,
                                                level, progress)
            chosen = fit_temperature(similarities, len(truth), truth, fit_block_rows(self.chunk_size, len(registry)))
        self.temperature_ = FALLBACK_TEMPERATURE if chosen is None else chosen
        return {"temperature": self.temperature_, "temperature_rule": TEMPERATURE_RULE,
                "labelled_documents_used": int((truth >= 0).sum()),
                "tuning_documents": [str(doc_ids[i]) for i in fold]}

    @property
    def effective_temperature(self) -> float:
        if self.temperature != AUTO:
            return float(self.temperature)
        chosen = self.temperature_
        if chosen is None:
            raise ConfigError("temperature 'auto' is chosen from the labelled documents before the attack: run the "
                              "attacker through an audit (or give a temperature)")
        return chosen

    def attack(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        queries, similarities = self._prepared(doc_ids, texts, registry, level, progress)
        clues = self._memo[2]
        candidates, weights, tail, ties, below = rank_by_similarity(similarities, len(doc_ids), len(registry),
                                                                    self.top_k, self.effective_temperature,
                                                                    self.chunk_size, progress)
        cut = self.top_k is not None and self.top_k < len(registry)
        return CandidateTable(doc_ids=np.asarray(doc_ids, dtype=object), candidates=candidates, weights=weights,
                              pool_sizes=np.full(len(doc_ids), candidates.shape[1], dtype=np.int64),
                              candidate_ids=registry.ids, queries=tuple(queries), tail_mass=tail,
                              cut_ties=ties if cut else None, cut_below=below if cut else None,
                              clues=clues if clues is not None and len(clues) == len(queries) else None)

    def clue_params(self) -> dict:
        return {"clue_extractor": self.clue_extractor.params()} if self.clue_extractor is not None else {}

    def estimate_calls(self, doc_ids, texts, registry, level) -> int:
        if level.query_mode != "direct_plus_clues" or self.clue_extractor is None:
            return 0
        return int(self.clue_extractor.estimate_calls(list(doc_ids), [str(t) for t in texts]))

    def counters(self) -> dict[str, dict]:
        counts = self.clue_extractor.counters() if self.clue_extractor is not None else None
        return {"clue_extractor": counts} if counts else {}

    def clients(self) -> list:
        return self.clue_extractor.clients() if self.clue_extractor is not None else []

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> Explainer | None:
        """The terms shared by a query and its candidates' profiles that weigh most in a TF-IDF match (a
        retrieval attacker that cannot say more; the dense attacker leaves sentences out instead)."""
        try:
            return TfidfIndex().fit(profile_texts(registry, level)).explainer()
        except ConfigError:  # profiles without words (ids, codes): nothing to explain, the audit goes on
            return None
