"""The attackers the threat-model page offers, each a declarative form of parameters, and the
translation of the curator's choices into the core's declared configuration.

A new attacker family (dense retrieval, LLM clue extraction, a sampling-only API model) is added by
implementing it in :mod:`cpa_core`, listing its name in ``cpa_core.config.ATTACKERS`` and adding one
:class:`AttackerForm` to :data:`FORMS` with its parameters; the page draws its widgets from the form.
Forms whose attacker the core does not provide are not shown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cpa_core.attackers.base import Attacker
from cpa_core.attackers.imported import ImportedAttacker
from cpa_core.audit import AuditConfig
from cpa_core.config import ATTACKERS, declare_audit
from cpa_core.errors import ConfigError

from .state import CUSTOM_LEVEL, DataSet, ThreatChoice


@dataclass(frozen=True)
class Param:
    """One parameter of an attacker form.

    ``kind`` is ``"float"``, ``"int"``, ``"select"``, ``"text"`` or ``"fields"`` (registry fields of the level); ``target`` says where the value goes: the
    attacker's own section of the configuration (``"attacker"``, e.g. ``[attacker.tfidf]``), the LLM
    endpoint (``"llm"``, i.e. ``[llm]``) or how an uploaded table of scores is read (``"upload"``).
    """

    name: str
    label: str
    kind: str
    default: Any
    help: str
    target: str = "attacker"
    min: float | None = None
    max: float | None = None
    step: float | None = None
    options: tuple = ()


@dataclass(frozen=True)
class AttackerForm:
    name: str
    label: str
    description: str
    params: tuple[Param, ...] = ()
    needs_scores_upload: bool = False
    sends_data_out: bool = False  # e.g. an LLM endpoint: the page says so before any run

    def defaults(self, project_section: dict | None = None, llm_section: dict | None = None) -> dict:
        """Default parameter values, taken from the attacker's and the LLM sections of the configuration file."""
        sections = {"attacker": project_section or {}, "llm": llm_section or {}}
        return {p.name: sections.get(p.target, {}).get(p.name, p.default) for p in self.params}


LLM_ENDPOINT = (
    Param("base_url", "LLM endpoint (OpenAI-compatible)", "text", "http://127.0.0.1:8080/v1",
          "The base URL of the chat-completions server. The API key is read from the environment "
          "(OPENAI_API_KEY by default), never stored.", target="llm"),
    Param("model", "LLM model", "text", "", "The model name at the endpoint.", target="llm"),
)
CLUES_ENDPOINT = tuple(replace(p, label=p.label + " (LLM clues only)",
                               help=p.help + " Used only in the clue-augmented query mode.") for p in LLM_ENDPOINT)

FORMS: dict[str, AttackerForm] = {
    "tfidf": AttackerForm(
        "tfidf", "TF-IDF retrieval",
        "Ranks every registry profile (built from the fields the attacker knows) by TF-IDF cosine similarity "
        "to the released text and turns similarities into weights with a temperature softmax. Runs locally.",
        (
            Param("temperature", "Softmax temperature T", "float", 1.0,
                  "Weights are softmax(similarity / T). Smaller T concentrates the weight on the best matches. "
                  "It changes set sizes, never the validity of the guarantee.", min=0.001, max=10.0, step=0.01),
            Param("max_features", "Vocabulary size", "int", 50_000,
                  "Largest number of terms the TF-IDF vocabulary keeps.", min=100, max=1_000_000, step=1000),
            Param("ngram_max", "Longest n-gram", "int", 1, "1: single words; 2: words and word pairs.",
                  min=1, max=3, step=1),
            Param("min_df", "Minimum document frequency", "int", 1,
                  "Ignore terms found in fewer profiles than this.", min=1, max=100, step=1),
            *CLUES_ENDPOINT,
        ),
    ),
    "dense": AttackerForm(
        "dense", "Dense retrieval (sentence embeddings)",
        "Embeds every registry profile and the released text with a sentence-embedding model (all-MiniLM-L6-v2 "
        "by default, loaded from the local package) and turns cosine similarities into weights with a "
        "temperature softmax. Runs locally; embeddings are cached on disk.",
        (
            Param("model", "Embedding model", "text", "all-MiniLM-L6-v2",
                  "A local model directory or a model name available offline."),
            Param("temperature", "Softmax temperature T", "float", 0.05,
                  "Weights are softmax(cosine / T). It changes set sizes, never the validity of the guarantee.",
                  min=0.001, max=10.0, step=0.01),
            Param("batch_size", "Batch size", "int", 32, "Texts per forward pass of the model.", min=1, max=1024,
                  step=1),
            *CLUES_ENDPOINT,
        ),
    ),
    "forced_choice": AttackerForm(
        "forced_choice", "LLM forced choice (sampling-only)",
        "A TF-IDF shortlist of the top K profiles is shown to an LLM as labelled options (in a shuffled order per "
        "sample); the LLM must pick one, m times per document with distinct seeds, and the pick frequencies are "
        "the weights. With 'logprobs', the option labels' log-probabilities give the weights instead.",
        (
            *LLM_ENDPOINT,
            Param("m", "Samples per document m", "int", 5,
                  "More samples give finer weights and smaller sets, not more validity.", min=1, max=50, step=1),
            Param("shortlist_k", "Shortlist size K", "int", 10, "Options shown to the LLM (the candidate pool).",
                  min=2, max=26, step=1),
            Param("mode", "Access", "select", "sampling", "sampling: pick frequencies; logprobs: the option "
                  "labels' log-probabilities, when the endpoint exposes them.", options=("sampling", "logprobs")),
        ),
        sends_data_out=True,
    ),
    "profile": AttackerForm(
        "profile", "Profile-CPA (LLM attribute prediction)",
        "The LLM does not see the candidates: it predicts each attribute (age band, gender, occupation, city, ...) "
        "m times; each attribute is certified on the calibration split and the identity set is the registry "
        "rows consistent with every certified attribute set.",
        (
            *LLM_ENDPOINT,
            Param("m", "Samples per attribute m", "int", 5,
                  "More samples give finer attribute distributions.", min=1, max=50, step=1),
            Param("attributes", "Attributes to predict", "fields", (),
                  "Registry fields the LLM predicts (among those the attacker knows); empty: every field of the "
                  "knowledge level with at most 50 distinct values."),
        ),
        sends_data_out=True,
    ),
    "imported": AttackerForm(
        "imported", "Imported scores (bring your own attacker)",
        "Certifies candidate scores computed by any external pipeline: upload a table with one row per "
        "(doc_id, candidate_id, score). Nothing is computed or sent anywhere.",
        (
            Param("kind", "What the score column holds", "select", "probability",
                  "probability: a weight per candidate; score: a similarity (larger is more likely), turned into "
                  "weights with a softmax; rank: 1 for the top candidate (use the 'rank' nonconformity score).",
                  target="upload", options=("probability", "score", "rank")),
            Param("temperature", "Softmax temperature (kind 'score')", "float", 1.0,
                  "Only used when the table holds similarity scores.", target="upload", min=0.001, max=10.0,
                  step=0.01),
        ),
        needs_scores_upload=True,
    ),
}


def available_forms() -> list[AttackerForm]:
    """The forms of the attackers the core provides, in display order."""
    return [form for name, form in FORMS.items() if name in ATTACKERS]


def declare(data: DataSet, threat: ThreatChoice, imported: ImportedAttacker | None = None
            ) -> tuple[AuditConfig, Attacker]:
    """The core's configuration and attacker for the curator's choices.

    Raises :class:`~cpa_core.errors.ConfigError` (shown on the page) when the choices are inconsistent.
    """
    form = FORMS.get(threat.attacker)
    if form is None or threat.attacker not in ATTACKERS:
        raise ConfigError(f"unknown attacker '{threat.attacker}'; expected one of "
                          f"{', '.join(f.name for f in available_forms())}")
    params = threat.params
    project = data.project
    section = {**project.attackers.get(form.name, {}),
               **{p.name: list(params[p.name]) if p.kind == "fields" else params[p.name]
                  for p in form.params if p.target == "attacker" and p.name in params
                  and not (p.kind == "fields" and not params[p.name])}}
    audit = {
        "score": threat.score, "confidence": list(threat.confidences), "n_cal": threat.n_cal,
        "n_test": threat.n_test, "seed": threat.seed, "top_k": threat.top_k, "miss_policy": threat.miss_policy,
        # the release policy is declared once; the pages' sliders explore it without a new configuration
        "flag_below": project.audit.get("flag_below", 11),
        "leakage_threshold": project.audit.get("leakage_threshold"),
        "group_column": (data.group_column or "group") if threat.per_group else None,
        "query_mode": threat.query_mode,
    }
    llm = {**project.llm, **{p.name: params[p.name] for p in form.params if p.target == "llm" and params.get(p.name)}}
    project = replace(project, attackers={**project.attackers, form.name: section}, llm=llm,
                      audit={k: v for k, v in audit.items() if v is not None})
    if form.needs_scores_upload and imported is None:
        raise ConfigError("the imported-scores attacker needs a table of candidate scores: upload one above")
    custom = threat.knowledge == CUSTOM_LEVEL
    if custom and not threat.custom_fields:
        raise ConfigError("a custom knowledge level needs at least one registry field")
    return declare_audit(project, data.registry, knowledge=None if custom else threat.knowledge,
                         fields=list(threat.custom_fields) if custom else None, attacker=form.name,
                         imported=imported if form.needs_scores_upload else None)


def usable_levels(data: DataSet) -> list[str]:
    """The declared knowledge levels whose fields the loaded registry has."""
    fields = set(data.registry.fields)
    return [name for name, level in data.project.levels.items() if set(level.fields) <= fields]


def default_threat(data: DataSet) -> ThreatChoice:
    """The configuration file's defaults, adjusted to what the loaded data allows."""
    project, audit = data.project, data.project.audit
    usable = usable_levels(data)
    knowledge = audit.get("knowledge") if audit.get("knowledge") in usable else (usable[0] if usable else CUSTOM_LEVEL)
    form = FORMS["tfidf"]
    n_docs = len(data.documents)
    n_cal, n_test = audit.get("n_cal"), audit.get("n_test")
    if (n_cal or 0) + (n_test or 0) > n_docs:
        n_cal = n_test = None
    return ThreatChoice(
        attacker=form.name,
        attacker_params=tuple(form.defaults(project.attackers.get(form.name), project.llm).items()),
        knowledge=knowledge,
        custom_fields=tuple(data.registry.fields),
        score=audit.get("score", "aps"),
        top_k=audit.get("top_k"),
        n_cal=n_cal, n_test=n_test, seed=int(audit.get("seed", 0)),
        per_group=bool(audit.get("group_column")) and data.documents.has_groups,
        miss_policy=audit.get("miss_policy", "infinite"),
        confidences=tuple(float(c) for c in audit.get("confidence", (0.90, 0.95, 0.99))),
    )
