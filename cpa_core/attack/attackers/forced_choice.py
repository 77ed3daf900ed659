"""Forced-choice attacker: an LLM picks the document's subject among a retrieval shortlist.

A retrieval attacker (TF-IDF by default) shortlists the top ``shortlist_k`` registry rows of each document.
The LLM sees the released text and the shortlisted profiles (the fields the knowledge level allows, as
labelled options ``A``, ``B``, ...; prompt :data:`~cpa_core.llm.prompts.FORCED_CHOICE_V1`) and must pick one.

- ``mode="sampling"`` (API models without probabilities): ``m`` samples per document, each with its own
  seed and its own order of the options (a seeded shuffle, so that the model's position bias does not
  favour the retrieval top-1); every pick is mapped back to its candidate and the weights are the empirical
  frequencies ``p_m(y|x) = #{samples picking y} / m`` over the shortlist. A pick that names no option is
  invalid: it counts toward no candidate (so the weights may sum to less than one) and is counted in
  ``invalid_picks_``; a document whose ``m`` picks are all invalid gets uniform weights over its shortlist.
- ``mode="logprobs"`` (endpoints exposing log-probabilities): one request per document asks for the
  ``top_logprobs`` alternatives of the answer tokens; the weights are the softmax over the option labels'
  log-probabilities at the first answer position where a label appears (labels absent from the
  alternatives get weight 0; uniform when no label appears, counted in ``logprob_fallbacks_``).

The pool is the shortlist (a truth outside it is a candidate miss), the weights are probabilities and the
``aps``, ``rank`` and ``probability`` scores apply unchanged. Seeds are ``sample_seed(seed, doc_id,
"forced_choice", j)`` for the request and ``sample_seed(seed, doc_id, "order", j)`` for the shuffle: they
depend on the document id and the sample index only. A request does not depend on ``m``, so the first
``m`` samples of a larger budget are those of a smaller one (a budget ablation costs ``max(m)`` samples).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import math
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from cpa_core.attack.base import AttackerBase, RetrievalAttacker
from cpa_core.attack.candidates import CandidateTable
from cpa_core.attack.clues import check_call_budget
from cpa_core.attack.explainers import Explainer
from cpa_core.attack.spec import AttackerSpec
from cpa_core.attack.temperature import AUTO, FALLBACK_TEMPERATURE
from cpa_core.common.errors import ConfigError, LLMError
from cpa_core.common.params import Param
from cpa_core.common.progress import Progress
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.io.tables import Registry
from cpa_core.llm.client import LLMRequest, LLMResponse, sample_seed
from cpa_core.llm.prompts import FORCED_CHOICE_V1, PromptTemplate, format_options, option_labels, parse_choice

log = logging.getLogger(__name__)

MODES = ("sampling", "logprobs")
_LABEL_STRIP = " \t\n\r([{*\"'`.:)]}"


def option_order(seed: int, doc_id, sample_index: int, k: int, shuffle: bool = True) -> list[int]:
    """Shortlist position shown as each label, for one sample: ``order[p]`` is the candidate at label ``p``."""
    order = list(range(k))
    if shuffle:
        random.Random(sample_seed(seed, doc_id, "order", sample_index)).shuffle(order)
    return order


def label_distribution(response: LLMResponse, labels: Sequence[str], positions: int = 3) -> tuple[np.ndarray, int]:
    """Probabilities of the labels from an answer's token log-probabilities.

    The first of the first ``positions`` answer positions whose alternatives (or generated token) include
    a label is used: each label's probability is the sum over the tokens that spell it (``"B"``, ``" B"``,
    ``"(B"``), renormalised over the labels. Returns (probabilities, position), or (zeros, -1) when no
    label appears.
    """
    index = {label: i for i, label in enumerate(labels)}
    for position in range(min(positions, len(response.logprobs or ()))):
        mass: dict[int, list[float]] = {}
        for token, logprob in response.top_logprobs(position).items():
            label = token.strip(_LABEL_STRIP)
            if label in index and math.isfinite(logprob):
                mass.setdefault(index[label], []).append(float(logprob))
        if mass:
            top = max(max(v) for v in mass.values())
            out = np.zeros(len(labels))
            for i, values in mass.items():
                out[i] = sum(math.exp(v - top) for v in values)
            return out / out.sum(), position
    return np.zeros(len(labels)), -1


@dataclass
class ForcedChoiceAttacker(AttackerBase):
    """An LLM picks among a retrieval shortlist; weights from sampled picks or from label log-probabilities.

    Parameters
    ----------
    shortlister : a retrieval attacker (``top_k`` is set to ``shortlist_k`` on a copy); ``None``: TF-IDF
    client : :class:`~cpa_core.llm.client.LLMClient`
    m : samples per document (``sampling`` mode)
    shortlist_k : options shown to the LLM
    mode : ``"sampling"`` or ``"logprobs"``
    seed : base seed of the per-document sample seeds and option orders
    template : prompt with fields ``text``, ``options`` and ``labels``
    shuffle : shuffle the options of each sample (default True)
    option_chars : each option's profile text is cut to this many characters
    max_tokens : answer length limit (``None``: the client's setting)
    top_logprobs : alternatives asked per answer position (``logprobs`` mode; OpenAI allows at most 20)
    label_positions : answer positions searched for a label (``logprobs`` mode)

    Attributes (about the last attack)
    ----------
    invalid_picks_ : samples naming no option (failed answers included: empty, truncated, filtered, over-long)
    failed_answers_ : answers the LLM client returned as failed (never cached; see :mod:`cpa_core.llm.client`)
    all_invalid_documents_ : documents whose every sample was invalid (uniform weights)
    logprob_fallbacks_ : ``logprobs`` mode, documents without any label in the alternatives (uniform weights)
    per_document_ : dict doc_id -> {"samples", "invalid_picks", "uniform", "label_position"}
    """

    costly_rescoring = True  # an LLM reads every edited text

    shortlister: Any = None
    client: Any = field(default=None, repr=False)
    m: int = 5
    shortlist_k: int = 10
    mode: str = "sampling"
    seed: int = 0
    template: PromptTemplate = FORCED_CHOICE_V1
    shuffle: bool = True
    option_chars: int = 300
    max_tokens: int | None = 16
    top_logprobs: int = 20
    label_positions: int = 3
    name: str = "forced_choice"

    def __post_init__(self):
        if self.client is None:
            raise ConfigError("the forced-choice attacker needs an LLM client")
        if self.mode not in MODES:
            raise ConfigError(f"unknown forced-choice mode '{self.mode}'; expected one of {', '.join(MODES)}")
        if self.m < 1:
            raise ConfigError(f"the sampling budget m must be at least 1, found {self.m}")
        if self.shortlist_k < 2:
            raise ConfigError(f"the shortlist needs at least 2 options, found shortlist_k={self.shortlist_k}")
        if self.top_logprobs < 1 or self.label_positions < 1 or self.option_chars < 1:
            raise ConfigError("top_logprobs, label_positions and option_chars must be at least 1")
        missing = {"text", "options", "labels"} - set(self.template.fields)
        if missing:
            raise ConfigError(f"the forced-choice prompt {self.template.id} lacks the field(s) "
                              f"{', '.join(sorted(missing))}")
        if self.shortlister is None:
            from cpa_core.attack.attackers.tfidf import TfidfAttacker
            self.shortlister = TfidfAttacker(top_k=self.shortlist_k, temperature=FALLBACK_TEMPERATURE)
        else:
            self.shortlister = copy.copy(self.shortlister)
            self.shortlister.top_k = self.shortlist_k
        if isinstance(self.shortlister, RetrievalAttacker) and self.shortlister.temperature == AUTO:
            # the shortlist is the top of the ranking, which no temperature changes; its weights are never used
            self.shortlister.temperature = FALLBACK_TEMPERATURE
        self._shortlist_memo: tuple | None = None
        self._reset()

    def _reset(self) -> None:
        self.invalid_picks_ = self.all_invalid_documents_ = self.logprob_fallbacks_ = self.failed_answers_ = 0
        self.samples_ = self.documents_ = self.calls_planned_ = 0
        self.per_document_: dict = {}
        self._ran = False

    # -- shortlist and requests ---------------------------------------------------------------------

    @property
    def samples_per_document(self) -> int:
        return 1 if self.mode == "logprobs" else self.m

    def shortlist(self, doc_ids: Sequence, texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
                  progress: Progress | None = None) -> CandidateTable:
        """The shortlister's top-``shortlist_k`` table (remembered for the same inputs)."""
        digest = hashlib.sha256("\x00".join(map(str, [*doc_ids, "\x01", *texts])).encode("utf-8")).hexdigest()
        key = (digest, registry.sha256, len(registry), level)
        if self._shortlist_memo is not None and self._shortlist_memo[0] == key:
            return self._shortlist_memo[1]
        table = self.shortlister.attack(list(doc_ids), list(texts), registry, level, progress)
        if table.width and int(table.candidates.max(initial=-1)) >= len(registry):
            raise ConfigError("the forced-choice shortlist names candidates outside the registry: their profiles "
                              "cannot be shown to the LLM")
        self._shortlist_memo = (key, table)
        return table

    def _requests(self, doc_ids: Sequence, texts: Sequence[str], table: CandidateTable,
                  options: Sequence[str]) -> tuple[list[LLMRequest], list[tuple[int, int, list[int]]]]:
        """Every request, and for each its (document row, sample index, option order)."""
        requests, plan = [], []
        logprobs = self.mode == "logprobs"
        for row, (doc_id, text) in enumerate(zip(doc_ids, texts)):
            k = int(table.pool_sizes[row])
            if k == 0:
                continue
            shortlist = table.candidates[row, :k]
            labels = option_labels(k)
            for j in range(self.samples_per_document):
                order = option_order(self.seed, doc_id, j, k, self.shuffle)
                shown = [options[int(shortlist[p])][: self.option_chars] for p in order]
                messages = self.template.render(text=str(text), options=format_options(shown, labels),
                                                labels=", ".join(labels))
                requests.append(LLMRequest(
                    messages=messages, sample_index=j, seed=sample_seed(self.seed, doc_id, "forced_choice", j),
                    max_tokens=self.max_tokens, logprobs=logprobs,
                    top_logprobs=min(self.top_logprobs, 20) if logprobs else None))
                plan.append((row, j, order))
        return requests, plan

    def estimate_calls(self, doc_ids: Sequence, texts: Sequence[str], registry: Registry,
                       level: KnowledgeLevel) -> int:
        """Dry run: the LLM calls of an attack (the shortlister's clue extraction included); no call is made.

        When the shortlist itself needs uncached clue extractions, the forced-choice requests cannot be
        built without calls, and every one of them is counted (an upper bound).
        """
        doc_ids, texts = list(doc_ids), [str(t) for t in texts]
        return sum(calls for _, calls in self._estimate_parts(doc_ids, texts, registry, level))

    def _estimate_parts(self, doc_ids, texts, registry, level) -> list[tuple[Any, int]]:
        clue_calls = self.shortlister.estimate_calls(doc_ids, texts, registry, level)
        if clue_calls:  # the shortlist depends on clues not extracted yet: every request counts
            return [(self.shortlister.clients()[0], clue_calls),
                    (self.client, len(doc_ids) * self.samples_per_document)]
        table = self.shortlist(doc_ids, texts, registry, level)
        requests, _ = self._requests(doc_ids, texts, table, profile_texts(registry, level))
        return [(self.client, self.client.estimate_calls(requests))]

    # -- attack ---------------------------------------------------------------------------------------

    def attack(self, doc_ids: Sequence, texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        doc_ids, texts = list(doc_ids), [str(t) for t in texts]
        self._reset()
        check_call_budget(self._estimate_parts(doc_ids, texts, registry, level), "the forced-choice attack")
        table = self.shortlist(doc_ids, texts, registry, level, progress)
        requests, plan = self._requests(doc_ids, texts, table, profile_texts(registry, level))
        need = self.client.estimate_calls(requests)
        shares_client = any(client is self.client for client in self.shortlister.clients())
        spent = sum(counts.get("calls", 0) for counts in self.shortlister.counters().values()) \
            if shares_client and level.query_mode == "direct_plus_clues" else 0
        check_call_budget([(self.client, spent + need)], "the forced-choice attack (with its clue extraction)")
        step = "forced choice" if self.mode == "sampling" else "forced choice (logprobs)"
        answers = self.client.complete(requests, progress, step)

        n, width = len(doc_ids), table.width
        counts = np.zeros((n, width))
        invalid = np.zeros(n, dtype=np.int64)
        positions = np.full(n, -1, dtype=np.int64)
        with_logprobs = 0
        for (row, _, order), answer in zip(plan, answers):
            k = int(table.pool_sizes[row])
            labels = option_labels(k)
            picked = parse_choice(answer.text, labels)
            if picked is None:
                invalid[row] += 1
            if self.mode == "sampling":
                if picked is not None:
                    counts[row, order[labels.index(picked)]] += 1
                continue
            with_logprobs += bool(answer.logprobs)
            probabilities, position = label_distribution(answer, labels, self.label_positions)
            positions[row] = position
            if position >= 0:
                for p, probability in enumerate(probabilities):
                    counts[row, order[p]] += probability
        if self.mode == "logprobs" and answers and with_logprobs == 0:
            raise LLMError(f"the endpoint returned no log-probabilities for any of {len(answers)} requests: it does "
                           "not support logprobs; use the forced-choice mode 'sampling'")

        pool_sizes = table.pool_sizes.astype(np.int64)
        valid = np.arange(width)[None, :] < pool_sizes[:, None]
        if self.mode == "sampling":
            weights = counts / self.m
            uniform = (counts.sum(axis=1) == 0) & (pool_sizes > 0)
        else:
            weights = counts
            uniform = (positions < 0) & (pool_sizes > 0)
        weights[uniform] = np.where(valid[uniform], 1.0 / np.maximum(pool_sizes[uniform, None], 1), 0.0)
        weights = np.where(valid, weights, 0.0)
        # re-rank each shortlist by decreasing weight; ties keep the retrieval order
        order = np.argsort(-np.where(valid, weights, -np.inf), axis=1, kind="stable")
        candidates = np.take_along_axis(table.candidates, order, axis=1)
        weights = np.take_along_axis(weights, order, axis=1)
        candidates = np.where(valid, candidates, -1)

        samples = np.array([self.samples_per_document if k > 0 else 0 for k in pool_sizes])
        self.invalid_picks_ = int(invalid.sum())
        self.failed_answers_ = sum(getattr(answer, "failure", None) is not None for answer in answers)
        self.samples_ = int(samples.sum())
        self.documents_ = n
        self.calls_planned_ = int(need)
        if self.mode == "sampling":
            self.all_invalid_documents_ = int(uniform.sum())
        else:
            self.logprob_fallbacks_ = int(uniform.sum())
        self.per_document_ = {
            doc: {"samples": int(samples[i]), "invalid_picks": int(invalid[i]), "uniform": bool(uniform[i]),
                  **({"label_position": int(positions[i])} if self.mode == "logprobs" else {})}
            for i, doc in enumerate(doc_ids)}
        self._ran = True
        log.info("forced choice (%s): %d documents, %d samples, %d invalid picks, %d uniform documents", self.mode,
                 n, self.samples_, self.invalid_picks_, int(uniform.sum()))
        # invalid picks name no candidate: their share is mass below every option (APS of a pick counts it)
        invalid_share = np.where(uniform | (pool_sizes == 0), 0.0, invalid / self.m) if self.mode == "sampling" \
            else np.zeros(n)
        return CandidateTable(doc_ids=np.asarray(doc_ids, dtype=object), candidates=candidates, weights=weights,
                              pool_sizes=pool_sizes, candidate_ids=table.candidate_ids, queries=table.queries,
                              weight_kind="probability", tail_mass=invalid_share, clues=table.clues)

    # -- manifest -------------------------------------------------------------------------------------

    def counters(self) -> dict[str, dict]:
        """The last attack's counts (``attacker``) and its shortlister's (``shortlister.*``); ``{}`` before.

        ``requests`` and ``invalid_answers`` are what the verdict reads (:data:`~cpa_core.attack.base.LLM_COUNTS`):
        the samples, and those that gave no pick (sampling: invalid picks; logprobs: documents without any label
        among the alternatives); ``failed_answers`` of them the client returned as failed.
        """
        if not self._ran:
            return {}
        invalid = self.invalid_picks_ if self.mode == "sampling" else self.logprob_fallbacks_
        out = {"documents": self.documents_, "samples": self.samples_, "invalid_picks": self.invalid_picks_,
               "invalid_pick_rate": self.invalid_picks_ / self.samples_ if self.samples_ else None,
               "calls": self.calls_planned_, "requests": self.samples_, "invalid_answers": invalid,
               "failed_answers": self.failed_answers_}
        if self.mode == "sampling":
            out["all_invalid_documents"] = self.all_invalid_documents_
        else:
            out["logprob_fallbacks"] = self.logprob_fallbacks_
        return {"attacker": out, **{f"shortlister.{where}": counts
                                    for where, counts in self.shortlister.counters().items()}}

    def clients(self) -> list:
        return [self.client, *self.shortlister.clients()]

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> Explainer | None:
        return self.shortlister.explainer(registry, level)

    def params(self) -> dict:
        out = {"attacker": self.name, "mode": self.mode, "interface": "logprobs" if self.mode == "logprobs"
               else "sampling-only", "m": self.samples_per_document, "shortlist_k": self.shortlist_k,
               "seed": self.seed, "seeds": "sample_seed(seed, doc_id, 'forced_choice'|'order', j)",
               "shuffle_options": self.shuffle, "option_chars": self.option_chars, "max_tokens": self.max_tokens,
               "prompt": self.template.params(), "shortlister": self.shortlister.params(),
               "llm": self.client.params()}
        if self.mode == "logprobs":
            out.update(top_logprobs=min(self.top_logprobs, 20), label_positions=self.label_positions)
        return out


def _build(params: dict, context) -> ForcedChoiceAttacker:
    own = {name: value for name, value in params.items() if name != "shortlister"}
    return ForcedChoiceAttacker(context.attacker(params["shortlister"]), context.llm_client(), **own)


SAMPLES = Param("m", "int", 5, "Samples per document m",
                "More samples give finer weights and smaller sets, not more validity.", min=1, max=1000,
                option="--samples")

SPEC = AttackerSpec(
    name="forced_choice", label="LLM forced choice (sampling-only)",
    description="shows a retrieval shortlist of the top K profiles to an LLM as labelled options (shuffled per "
                "sample) and makes it pick one, m times per document with distinct seeds; the pick frequencies "
                "are the weights (with 'logprobs', the option labels' log-probabilities)",
    params=(
        SAMPLES,
        Param("shortlist_k", "int", 10, "Shortlist size K", "Options shown to the LLM (the candidate pool).",
              min=2, max=26, option="--shortlist-k"),
        Param("mode", "choice", "sampling", "Access", "sampling: pick frequencies; logprobs: the option labels' "
              "log-probabilities, when the endpoint exposes them.", choices=MODES, option="--logprobs",
              flag="logprobs"),
        Param("shortlister", "choice", "tfidf", "Shortlister", "The retrieval attacker that builds the shortlist "
              "(its own parameters come from its section).", choices=("tfidf", "dense")),
        Param("seed", "int", 0, "Seed", "Base seed of the per-document sample seeds and option orders.", min=0),
        Param("shuffle", "bool", True, "Shuffle the options", "A new option order per sample, so that the model's "
              "position bias does not favour the retrieval top-1."),
        Param("option_chars", "int", 300, "Characters per option", "Each option's profile text is cut to this.",
              min=1),
        Param("max_tokens", "int", 16, "Answer length limit", "Tokens per answer.", min=1, optional=True),
        Param("top_logprobs", "int", 20, "Alternatives per position (logprobs)",
              "Log-probabilities asked per answer position (OpenAI allows at most 20).", min=1, max=20),
        Param("label_positions", "int", 3, "Answer positions searched (logprobs)",
              "Answer positions searched for an option label.", min=1),
    ),
    build=lambda params, context: _build(params, context),
    sends_text=True,
)
