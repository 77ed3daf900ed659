"""LLM clue extraction: the ``direct_plus_clues`` query mode of the retrieval attackers.

:class:`LLMClueExtractor` is a :data:`~cpa_core.attack.base.ClueExtractor`: an LLM reads each released
document and answers a short list of identifying clues (prompt :data:`~cpa_core.llm.prompts.CLUES_V1`, a
versioned template whose sha256 goes into the manifest). The TF-IDF and dense attackers append the clues to
the document's retrieval query (:func:`~cpa_core.attack.base.build_queries`).

An answer that yields no clue (empty, refused, not parseable) is asked again with the next sample index and
a new seed, up to ``retries`` times; a document whose every answer is unusable gets no clue (its query is the
released text alone) and is counted in ``no_clue_documents_``. Nothing here raises on a malformed answer.

Seeds are ``sample_seed(seed, doc_id, "clues", attempt)``: they depend on the document id and the attempt
only, never on a label. Every answer is cached by the client, so a second run makes no call.

The module also holds the call-budget helpers shared by the LLM attackers: an attacker estimates every
call of its run (``estimate_calls``, a dry run through :meth:`~cpa_core.llm.client.LLMClient.estimate_calls`)
and refuses to start when the total exceeds the client's ``call_budget``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from cpa_core.common.errors import ConfigError, LLMBudgetError
from cpa_core.common.params import Param
from cpa_core.common.progress import Progress
from cpa_core.llm.client import LLMRequest, LLMResponse, sample_seed
from cpa_core.llm.prompts import CLUES_V1, PromptTemplate, parse_clues

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------
# shared by the LLM attackers


def check_call_budget(parts: Sequence[tuple[Any, int]], what: str) -> None:
    """Refuse a run, before any call, whose estimated calls exceed a client's budget.

    ``parts`` holds (client, calls) pairs; calls through the same client object are added up.
    """
    totals: dict[int, list] = {}
    for client, calls in parts:
        entry = totals.setdefault(id(client), [client, 0])
        entry[1] += int(calls)
    for client, calls in totals.values():
        budget = client.call_budget
        if budget is not None and calls > budget:
            raise LLMBudgetError(f"{what} needs {calls} LLM calls (uncached requests) but the call budget is {budget}: "
                                 "raise the budget or attack fewer documents/samples")


def split_cached(client: Any, requests: Sequence[LLMRequest]) -> tuple[list[int], list[int]]:
    """Positions of the requests already answered in the client's cache, and of the others (no call)."""
    cached, uncached = [], []
    for i, request in enumerate(requests):
        (uncached if client.estimate_calls([request]) else cached).append(i)
    return cached, uncached


# ------------------------------------------------------------------------------------------------
# the clue extractor


@dataclass
class LLMClueExtractor:
    """Extract identifying clues from each document with an LLM (the ``direct_plus_clues`` query mode).

    Parameters
    ----------
    client : :class:`~cpa_core.llm.client.LLMClient` (or an object with ``complete``, ``estimate_calls``,
        ``params`` and ``settings.call_budget``)
    template : the prompt (fields ``text`` and ``max_clues``)
    max_clues : clues kept per document
    retries : further attempts, each with a new sample index and seed, after an answer without clues
    seed : base seed of the per-document sample seeds
    max_tokens : answer length limit (``None``: the client's setting)

    Attributes (about the last call)
    ----------
    clues_ : dict doc_id -> list of clues
    attempts_ : dict doc_id -> number of answers asked
    no_clue_documents_ : documents left without a clue after every retry
    retried_documents_ : documents whose first answer had no clue
    malformed_answers_ : answers without a usable clue
    failed_answers_ : answers the LLM client returned as failed (empty, truncated, filtered, over-long: never cached)
    calls_planned_ : uncached requests of the call (the calls it made, retries of failed HTTP requests aside)
    """

    client: Any = field(repr=False)
    template: PromptTemplate = CLUES_V1
    max_clues: int = 5
    retries: int = 2
    seed: int = 0
    max_tokens: int | None = None
    name: str = "llm_clues"

    def __post_init__(self):
        if self.max_clues < 1:
            raise ConfigError(f"max_clues must be at least 1, found {self.max_clues}")
        if self.retries < 0:
            raise ConfigError(f"retries must be non-negative, found {self.retries}")
        missing = {"text", "max_clues"} - set(self.template.fields)
        if missing:
            raise ConfigError(f"the clue prompt {self.template.id} lacks the field(s) {', '.join(sorted(missing))}")
        self.clues_: dict = {}
        self.attempts_: dict = {}
        self.no_clue_documents_ = self.retried_documents_ = self.malformed_answers_ = self.failed_answers_ = 0
        self.calls_planned_ = 0
        self._ran = False

    # -- requests ------------------------------------------------------------------------------------

    def request(self, doc_id, text: str, attempt: int) -> LLMRequest:
        """The request of one document's ``attempt``-th answer (0 = first)."""
        return LLMRequest(messages=self.template.render(text=text, max_clues=self.max_clues), sample_index=attempt,
                          seed=sample_seed(self.seed, doc_id, "clues", attempt), max_tokens=self.max_tokens)

    def parse(self, response: LLMResponse) -> list[str] | None:
        return parse_clues(response.text, self.max_clues)

    def estimate_calls(self, doc_ids: Sequence, texts: Sequence[str]) -> int:
        """Dry run: the calls a run would make (no call is made).

        Exact when every answer it needs is cached; otherwise an uncached first answer is assumed usable,
        so retries of answers not seen yet are not counted (they are checked against the budget as they
        arise).
        """
        pending = list(range(len(doc_ids)))
        calls = 0
        for attempt in range(self.retries + 1):
            if not pending:
                break
            requests = [self.request(doc_ids[i], texts[i], attempt) for i in pending]
            cached, uncached = split_cached(self.client, requests)
            calls += len(uncached)
            answers = self.client.complete([requests[j] for j in cached]) if cached else []
            pending = [pending[j] for j, answer in zip(cached, answers) if self.parse(answer) is None]
        return calls

    # -- running -------------------------------------------------------------------------------------

    def __call__(self, doc_ids: Sequence, texts: Sequence[str], progress: Progress | None = None) -> list[list[str]]:
        doc_ids, texts = list(doc_ids), [str(t) for t in texts]
        if len(doc_ids) != len(texts):
            raise ConfigError(f"{len(doc_ids)} document ids for {len(texts)} texts")
        check_call_budget([(self.client, self.estimate_calls(doc_ids, texts))], "clue extraction")
        budget = self.client.call_budget
        clues: list[list[str] | None] = [None] * len(doc_ids)
        attempts = [0] * len(doc_ids)
        pending = list(range(len(doc_ids)))
        planned = malformed = failed = 0
        for attempt in range(self.retries + 1):
            if not pending:
                break
            requests = [self.request(doc_ids[i], texts[i], attempt) for i in pending]
            need = self.client.estimate_calls(requests)
            if budget is not None and planned + need > budget:
                raise LLMBudgetError(
                    f"clue extraction: retrying {len(pending)} answers without clues needs {need} more LLM calls, "
                    f"{planned + need} in all, but the call budget is {budget}; the answers received are cached: "
                    "raise the budget and run again")
            planned += need
            step = "extracting clues" if attempt == 0 else f"extracting clues (retry {attempt})"
            answers = self.client.complete(requests, progress, step)
            still = []
            for i, answer in zip(pending, answers):
                attempts[i] += 1
                failed += getattr(answer, "failure", None) is not None
                parsed = self.parse(answer)
                if parsed is None:
                    malformed += 1
                    still.append(i)
                else:
                    clues[i] = parsed
            pending = still
        out = [c or [] for c in clues]
        self.clues_ = dict(zip(doc_ids, out))
        self.attempts_ = dict(zip(doc_ids, attempts))
        self.no_clue_documents_ = sum(1 for c in out if not c)
        self.retried_documents_ = sum(1 for a in attempts if a > 1)
        self.malformed_answers_ = malformed
        self.failed_answers_ = failed
        self.calls_planned_ = planned
        self._ran = True
        log.info("clue extraction: %d documents, %d without clues, %d retried, %d unusable answers, %d calls",
                 len(doc_ids), self.no_clue_documents_, self.retried_documents_, malformed, planned)
        return out

    def counters(self) -> dict | None:
        """The last run's counts (``None`` before a run). ``requests`` (every answer asked, retries included) and
        ``invalid_answers`` are what the verdict reads (:data:`~cpa_core.attack.base.LLM_COUNTS`); an answer
        without clues may be right (a text may hold none), so only the failed answers count as invalid."""
        if not self._ran:
            return None
        return {"documents": len(self.clues_), "no_clue_documents": self.no_clue_documents_,
                "retried_documents": self.retried_documents_, "malformed_answers": self.malformed_answers_,
                "calls": self.calls_planned_, "requests": sum(self.attempts_.values()),
                "invalid_answers": self.failed_answers_, "failed_answers": self.failed_answers_}

    def params(self) -> dict:
        out = {"clue_extractor": self.name, "prompt": self.template.params(), "max_clues": self.max_clues,
               "retries": self.retries, "seed": self.seed, "max_tokens": self.max_tokens,
               "seeds": "sample_seed(seed, doc_id, 'clues', attempt)", "llm": self.client.params()}
        return out

    def clients(self) -> list:
        return [self.client]


CLUE_PARAMS = (
    Param("max_clues", "int", 5, "Clues per document", "Clues kept from each answer.", min=1, max=50),
    Param("retries", "int", 2, "Retries", "Further answers asked after an answer without clues.", min=0, max=10),
    Param("seed", "int", 0, "Seed", "Base seed of the per-document sample seeds.", min=0),
    Param("max_tokens", "int", None, "Answer length limit", "Tokens per answer (default: the [llm] setting).",
          min=1, optional=True),
)
"""The ``[attacker.clues]`` table: how clues are extracted in the ``direct_plus_clues`` query mode."""
