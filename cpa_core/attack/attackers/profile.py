"""Profile-CPA: the LLM predicts attributes of the document's subject, never seeing the candidates.

For each document and each configured attribute (gender, age band, occupation, city, ...), the LLM is asked
``m`` times (prompt :data:`~cpa_core.llm.prompts.ATTRIBUTE_V1`, one seed per sample); the answers, normalised
(:func:`~cpa_core.llm.prompts.normalise_value`), give an empirical distribution ``p_j(v|x)`` per attribute
``j``. An answer naming no value (or no allowed value) is invalid: it is counted and left out of the
distribution; a distribution without any valid answer is empty.

Per-attribute score (mass above a value): ``s_j(x, v)`` is the share of the valid answers that name a
value strictly more frequent than ``v``. The most frequent answer(s) score 0; a value never answered scores
1.0 (every answer lies above it: the last tie group); when no answer is valid every value scores 0 (the
attribute constrains nothing). Counting the mass strictly above, rather than "at least as frequent", keeps a
unanimous answer (``m`` of ``m``, score 0) apart from the values never answered (1.0): with the inclusive
mass both would score 1.0, and a confident prediction would carry no information. The score of a registry
candidate ``y`` is the largest over the attributes of the score of its registry value,

    s(x, y) = max_j s_j(x, attr_j(y))      (a missing registry value counts as a value never answered),

so that for any threshold ``q``

    { y : s(x, y) <= q } = { y : attr_j(y) in C_j(x) for every j },   C_j(x) = { v : s_j(x, v) <= q },

the registry rows consistent with every certified attribute set, and one conformal threshold calibrated on
the max-score (against the registry's true values) gives the combined set coverage >= 1 - alpha.

To use the calibration layer unchanged, the attacker ranks the whole registry by increasing score and
stores ``weight = -score`` (``weight_kind="score"``); its params declare ``"score": "given"``, the
nonconformity score that reads ``s = -weight``. :func:`certified_attribute_sets` turns a certificate back
into the certified value set of every attribute, per document.

Seeds are ``sample_seed(seed, doc_id, attribute name, j)``; requests do not depend on ``m`` beyond their
count, so the first ``m`` samples of a larger budget are those of a smaller one.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cpa_core.attack.attackers.forced_choice import SAMPLES
from cpa_core.attack.base import AttackerBase
from cpa_core.attack.candidates import CandidateTable
from cpa_core.attack.clues import check_call_budget
from cpa_core.attack.spec import AttackerSpec
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.common.progress import Progress
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry
from cpa_core.llm.client import LLMRequest, sample_seed
from cpa_core.llm.prompts import ATTRIBUTE_V1, PromptTemplate, attribute_choices, normalise_value, parse_attribute

log = logging.getLogger(__name__)

MAX_ALLOWED_VALUES = 50
UNSEEN_SCORE = 1.0
SCORE_DECIMALS = 12  # shares such as 2/6 and 1/3 computed apart compare equal


@dataclass(frozen=True)
class Attribute:
    """An attribute to predict: ``name`` (also the prompt's wording unless ``label`` is given), the registry
    ``column`` holding its true values, and its ``allowed_values`` (``None``: free text)."""

    name: str
    column: str
    allowed_values: tuple[str, ...] | None = None
    label: str | None = None

    def __post_init__(self):
        if not self.name or not self.column:
            raise ConfigError("an attribute needs a name and a registry column")
        if self.allowed_values is not None:
            values = tuple(dict.fromkeys(str(v) for v in self.allowed_values if str(v).strip()))
            if not values:
                raise ConfigError(f"attribute '{self.name}': the list of allowed values is empty")
            object.__setattr__(self, "allowed_values", values)

    @property
    def wording(self) -> str:
        return self.label or self.name.replace("_", " ")

    def params(self) -> dict:
        return {"name": self.name, "column": self.column, "label": self.wording,
                "allowed_values": None if self.allowed_values is None else list(self.allowed_values)}


def _registry_value(value) -> str:
    """The normalised form of a registry cell ("" for a missing value)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return normalise_value(str(value))


def attributes_from_registry(registry: Registry, columns: Sequence[str], *, free_text: Sequence[str] = (),
                             max_allowed_values: int = MAX_ALLOWED_VALUES,
                             labels: dict[str, str] | None = None) -> list[Attribute]:
    """One attribute per registry column; its allowed values are the column's distinct values when there
    are at most ``max_allowed_values`` of them (and the column is not listed in ``free_text``), else free text.
    """
    out = []
    for column in columns:
        if column not in registry.frame.columns:
            raise ConfigError(f"attribute '{column}' is not a column of {registry.file}; expected one of "
                              f"{registry.fields}")
        allowed = None
        if column not in free_text:
            values = [str(v).strip() for v in registry.frame[column].tolist() if _registry_value(v)]
            distinct = sorted(dict.fromkeys(values), key=lambda v: (normalise_value(v), v))
            if 0 < len(distinct) <= max_allowed_values:
                allowed = tuple(distinct)
        out.append(Attribute(column, column, allowed, (labels or {}).get(column)))
    return out


def categorical_columns(registry: Registry, fields: Sequence[str],
                        max_values: int = MAX_ALLOWED_VALUES) -> list[str]:
    """The fields (in order) whose registry column has between 1 and ``max_values`` distinct values: the
    default attributes of Profile-CPA at a knowledge level (age band, gender, occupation, city, ...)."""
    out = []
    for name in fields:
        values = {_registry_value(v) for v in registry.frame[name].tolist()} - {""}
        if 0 < len(values) <= max_values:
            out.append(name)
    if not out:
        raise ConfigError(f"no field among {list(fields)} has at most {max_values} distinct values: declare the "
                          "Profile-CPA attributes (and free_text ones) explicitly")
    return out


def value_scores(counts: dict[str, int]) -> dict[str, float]:
    """Score of each answered value: the share of the answers naming a strictly more frequent value.

    A value not in ``counts`` scores :func:`unseen_score` (1.0, or 0 when there is no answer at all).
    """
    total = sum(counts.values())
    if total == 0:
        return {}
    return {value: round(sum(c for c in counts.values() if c > count) / total, SCORE_DECIMALS)
            for value, count in counts.items()}


def unseen_score(counts: dict[str, int]) -> float:
    """Score of a value never answered: 1.0 (all the answers lie above it); 0 without any valid answer."""
    return UNSEEN_SCORE if sum(counts.values()) > 0 else 0.0


@dataclass(frozen=True)
class AttributeSet:
    """A certified attribute value set: ``values`` (display forms), or any value when ``any_value``."""

    values: tuple[str, ...]
    any_value: bool

    def contains(self, value) -> bool:
        norm = _registry_value(value)
        return self.any_value or (bool(norm) and norm in {normalise_value(v) for v in self.values})


@dataclass
class ProfileAttacker(AttackerBase):
    """Profile-CPA over a list of attributes, ``m`` LLM samples per attribute and document.

    Parameters
    ----------
    client : :class:`~cpa_core.llm.client.LLMClient`
    attributes : the attributes to predict (:func:`attributes_from_registry` builds them from columns)
    m : samples per document and attribute
    seed : base seed of the per-sample seeds
    template : prompt with fields ``text``, ``attribute`` and ``choices``
    max_tokens : answer length limit (``None``: the client's setting)

    Attributes (about the last attack)
    ----------
    distributions_ : dict doc_id -> {attribute name -> {normalised value -> count}}
    display_ : dict attribute name -> {normalised value -> the value as first written}
    invalid_samples_ : dict attribute name -> answers naming no (allowed) value (failed answers included)
    failed_answers_ : answers the LLM client returned as failed (never cached; see :mod:`cpa_core.llm.client`)
    empty_documents_ : dict attribute name -> documents without any valid answer
    """

    costly_rescoring = True  # an LLM reads every edited text

    client: Any = field(repr=False)
    attributes: Sequence[Attribute] = ()
    m: int = 5
    seed: int = 0
    template: PromptTemplate = ATTRIBUTE_V1
    max_tokens: int | None = 16
    name: str = "profile"
    required_score = "given"  # the attacker scores candidates itself (class attributes, not fields)
    weight_kind = "score"

    def __post_init__(self):
        self.attributes = tuple(self.attributes)
        if not self.attributes:
            raise ConfigError("Profile-CPA needs at least one attribute to predict")
        names = [a.name for a in self.attributes]
        if len(set(names)) != len(names):
            raise ConfigError(f"Profile-CPA attributes must have distinct names, found {names}")
        if self.m < 1:
            raise ConfigError(f"the sampling budget m must be at least 1, found {self.m}")
        missing = {"text", "attribute", "choices"} - set(self.template.fields)
        if missing:
            raise ConfigError(f"the attribute prompt {self.template.id} lacks the field(s) "
                              f"{', '.join(sorted(missing))}")
        self._reset()

    def _reset(self) -> None:
        self.distributions_: dict = {}
        self.display_: dict = {a.name: {} for a in self.attributes}
        self.invalid_samples_ = {a.name: 0 for a in self.attributes}
        self.empty_documents_ = {a.name: 0 for a in self.attributes}
        self.documents_ = self.calls_planned_ = self.failed_answers_ = 0
        self._ran = False

    # -- requests ------------------------------------------------------------------------------------

    def _check(self, registry: Registry, level: KnowledgeLevel) -> None:
        for attribute in self.attributes:
            if attribute.column not in registry.frame.columns:
                raise ConfigError(f"attribute '{attribute.name}': column '{attribute.column}' is not in "
                                  f"{registry.file}; expected one of {registry.fields}")
            if attribute.column not in level.fields:
                raise ConfigError(f"attribute '{attribute.name}': column '{attribute.column}' is not a field of "
                                  f"knowledge level '{level.name}' ({', '.join(level.fields)}): the attacker "
                                  "may not use it")

    def _requests(self, doc_ids: Sequence, texts: Sequence[str]) -> list[LLMRequest]:
        """Every request, document-major, then attribute, then sample (consecutive requests share prefixes)."""
        requests = []
        for doc_id, text in zip(doc_ids, texts):
            for attribute in self.attributes:
                messages = self.template.render(text=str(text), attribute=attribute.wording,
                                                choices=attribute_choices(attribute.allowed_values))
                for j in range(self.m):
                    requests.append(LLMRequest(messages=messages, sample_index=j,
                                               seed=sample_seed(self.seed, doc_id, attribute.name, j),
                                               max_tokens=self.max_tokens))
        return requests

    def estimate_calls(self, doc_ids: Sequence, texts: Sequence[str], registry: Registry | None = None,
                       level: KnowledgeLevel | None = None) -> int:
        """Dry run: the LLM calls of an attack (no call is made)."""
        return self.client.estimate_calls(self._requests(list(doc_ids), [str(t) for t in texts]))

    # -- scoring -------------------------------------------------------------------------------------

    def attribute_scores(self, doc_id, attribute: Attribute | str) -> dict[str, float]:
        """``s_j(x, v)`` of every answered (normalised) value ``v``; any other value scores
        :meth:`unseen_score` (1.0, or 0 when the document has no valid answer for the attribute)."""
        name = attribute if isinstance(attribute, str) else attribute.name
        return value_scores(self.distributions_[doc_id][name])

    def unseen_score(self, doc_id, attribute: Attribute | str) -> float:
        name = attribute if isinstance(attribute, str) else attribute.name
        return unseen_score(self.distributions_[doc_id][name])

    def attack(self, doc_ids: Sequence, texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        doc_ids, texts = list(doc_ids), [str(t) for t in texts]
        self._check(registry, level)
        self._reset()
        requests = self._requests(doc_ids, texts)
        need = self.client.estimate_calls(requests)
        check_call_budget([(self.client, need)], "Profile-CPA")
        answers = self.client.complete(requests, progress, "predicting attributes")
        self.failed_answers_ = sum(getattr(answer, "failure", None) is not None for answer in answers)

        position = 0
        for doc_id in doc_ids:
            per_attribute = {}
            for attribute in self.attributes:
                counts: Counter = Counter()
                for answer in answers[position:position + self.m]:
                    value = parse_attribute(answer.text, attribute.allowed_values)
                    norm = normalise_value(value) if value is not None else ""
                    if not norm:
                        self.invalid_samples_[attribute.name] += 1
                        continue
                    counts[norm] += 1
                    self.display_[attribute.name].setdefault(norm, value)
                position += self.m
                if not counts:
                    self.empty_documents_[attribute.name] += 1
                per_attribute[attribute.name] = dict(counts)
            self.distributions_[doc_id] = per_attribute

        # registry values, normalised, coded per attribute
        codes, uniques = [], []
        for attribute in self.attributes:
            code, unique = pd.factorize(pd.Series([_registry_value(v) for v in registry.frame[attribute.column]],
                                                  dtype=object))
            codes.append(code)
            uniques.append(list(unique))
        n, size = len(doc_ids), len(registry)
        scores = np.zeros((n, size))
        for row, doc_id in enumerate(doc_ids):
            for attribute, code, unique in zip(self.attributes, codes, uniques):
                table = self.attribute_scores(doc_id, attribute)
                unseen = self.unseen_score(doc_id, attribute)
                per_value = np.array([table.get(v, unseen) if v else unseen for v in unique], dtype=float)
                np.maximum(scores[row], per_value[code], out=scores[row])
        order = np.argsort(scores, axis=1, kind="stable")
        sorted_scores = np.take_along_axis(scores, order, axis=1)
        self.documents_, self.calls_planned_ = n, int(need)
        self._ran = True
        log.info("Profile-CPA: %d documents x %d attributes x %d samples, %d invalid answers", n,
                 len(self.attributes), self.m, sum(self.invalid_samples_.values()))
        return CandidateTable(doc_ids=np.asarray(doc_ids, dtype=object), candidates=order.astype(np.int64),
                              weights=-sorted_scores, pool_sizes=np.full(n, size, dtype=np.int64),
                              candidate_ids=registry.ids, queries=tuple(texts), weight_kind="score")

    # -- certified attribute sets -------------------------------------------------------------------

    def attribute_set(self, doc_id, attribute: Attribute, q_hat: float) -> AttributeSet:
        """``{v : s_j(x, v) <= q_hat}`` for one document and attribute."""
        scores = self.attribute_scores(doc_id, attribute)
        unseen = self.unseen_score(doc_id, attribute)
        any_value = q_hat >= unseen
        if attribute.allowed_values is not None:
            values = tuple(v for v in attribute.allowed_values if scores.get(normalise_value(v), unseen) <= q_hat)
            return AttributeSet(values, any_value)
        shown = self.display_.get(attribute.name, {})
        ranked = sorted(scores.items(), key=lambda item: (item[1], item[0]))
        return AttributeSet(tuple(shown.get(v, v) for v, s in ranked if s <= q_hat), any_value)

    def counters(self) -> dict[str, dict]:
        """The last attack's counts; ``requests`` (every sample of every attribute) and ``invalid_answers`` (those
        naming no allowed value) are what the verdict reads (:data:`~cpa_core.attack.base.LLM_COUNTS`)."""
        if not self._ran:
            return {}
        samples = self.documents_ * self.m
        return {"attacker": {"documents": self.documents_, "samples_per_attribute": samples,
                             "invalid_samples": dict(self.invalid_samples_),
                             "invalid_rate": {k: v / samples if samples else None
                                              for k, v in self.invalid_samples_.items()},
                             "empty_documents": dict(self.empty_documents_), "calls": self.calls_planned_,
                             "requests": samples * len(self.attributes),
                             "invalid_answers": sum(self.invalid_samples_.values()),
                             "failed_answers": self.failed_answers_}}

    def clients(self) -> list:
        return [self.client]

    def params(self) -> dict:
        return {"attacker": self.name, "score": "given", "m": self.m, "seed": self.seed,
                "seeds": "sample_seed(seed, doc_id, attribute, j)", "max_tokens": self.max_tokens,
                "attributes": [a.params() for a in self.attributes], "combination": "max over attributes",
                "attribute_score": "share of answers strictly more frequent (unseen 1.0)",
                "prompt": self.template.params(), "llm": self.client.params()}


def _build(params: dict, context) -> ProfileAttacker:
    registry, level = context.registry, context.level
    columns = params["attributes"] or categorical_columns(registry, level.fields, params["max_allowed_values"])
    outside = [c for c in columns if c not in level.fields]
    if outside:
        raise ConfigError(f"Profile-CPA attribute '{outside[0]}' is not a field of knowledge level "
                          f"'{level.name}' ({list(level.fields)})")
    attributes = attributes_from_registry(registry, columns, free_text=params["free_text"],
                                          max_allowed_values=params["max_allowed_values"])
    return ProfileAttacker(context.llm_client(), attributes, m=params["m"], seed=params["seed"],
                           max_tokens=params["max_tokens"])


SPEC = AttackerSpec(
    name="profile", label="Profile-CPA (LLM attribute prediction)",
    description="does not show the candidates to the LLM: it predicts each attribute (age band, gender, "
                "occupation, city, ...) m times; each attribute is certified on the calibration documents and the "
                "identity set is the registry rows consistent with every certified attribute set",
    params=(
        SAMPLES,
        Param("attributes", "fields", (), "Attributes to predict",
              "Registry fields the LLM predicts (among those the attacker knows); empty: every field of the "
              "knowledge level with at most max_allowed_values distinct values."),
        Param("free_text", "fields", (), "Free-text attributes",
              "Attributes answered in free text rather than chosen from the registry's values."),
        Param("max_allowed_values", "int", MAX_ALLOWED_VALUES, "Most values of a categorical attribute",
              "An attribute with more distinct registry values is answered in free text.", min=1),
        Param("seed", "int", 0, "Seed", "Base seed of the per-sample seeds.", min=0),
        Param("max_tokens", "int", 16, "Answer length limit", "Tokens per answer.", min=1, optional=True),
    ),
    build=_build,
    sends_text=True,
    required_score="given",
)


def certified_attribute_sets(certificate, attacker: ProfileAttacker) -> list[dict[str, AttributeSet]]:
    """The certified value set of every attribute, per document of a certificate (in its row order).

    A document's identity set (``certificate.members(row)``) is exactly the registry rows whose values lie
    in every one of its attribute sets. Needs the attacker that produced the certificate's table.
    """
    table = certificate.split.table
    out = []
    for row, doc_id in enumerate(table.doc_ids.tolist()):
        if doc_id not in attacker.distributions_:
            raise ConfigError(f"document '{doc_id}' was not attacked by this Profile-CPA attacker")
        q_hat = float(certificate.q_hat[row])
        out.append({a.name: attacker.attribute_set(doc_id, a, q_hat) for a in attacker.attributes})
    return out
