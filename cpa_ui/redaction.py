"""The dashboard's side of redaction: suggestions for one document or for the whole release (cached per run,
level, policy and strategy), an edited text re-scored against the stored calibration, the redacted release as a
data set of its own, and the before/after table of a re-audit.

Everything computed here comes from :mod:`cpa_core.redaction` and :mod:`cpa_core.attack.explainers`; set sizes of edited
texts are indicative (an edited release is a new release mechanism, and only a new calibration certifies it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import streamlit as st

from cpa_core.attack.base import Attacker
from cpa_core.attack.explainers import Span
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.results import Certificate
from cpa_core.common.errors import CPAError
from cpa_core.io.tables import Documents
from cpa_core.audit.rescoring import StoredRisk
from cpa_core.redaction.suggestions import REPLACEMENTS, Suggestion, apply_edits, suggest_redactions
from cpa_core.store.reopen import declared_attacker
from cpa_ui.analysis import row_of
from cpa_ui.attackers import declare
from cpa_ui.state import AuditRun, DataSet

STRATEGY_LABELS = {"placeholder": "a placeholder ([REDACTED], or its category where the registry says)",
                   "generalize": "a generalisation where the data allows (city → region, year → decade)",
                   "delete": "nothing (delete the words)"}
STRATEGIES = tuple(sorted(REPLACEMENTS, key=lambda s: (list(STRATEGY_LABELS).index(s) if s in STRATEGY_LABELS
                                                         else len(STRATEGY_LABELS), s)))


@dataclass(frozen=True)
class Rescored:
    """An edited text's set size under the document's stored threshold (indicative) and its remaining evidence
    (offsets into the edited text)."""

    set_size: int
    evidence: tuple[Span, ...]


def reaudit_attacker(run: AuditRun, data: DataSet, threat, scores) -> Attacker:
    """A fresh attacker of the run's declared threat model for the re-audit (the run's own keeps what it learned
    from the release it audited): the one declared on the Threat model page when it still declares the run's
    configuration (its LLM endpoint included), else the run's attacker rebuilt from its parameters."""
    if threat is not None:
        try:
            config, attacker = declare(data, threat, scores)
        except CPAError:
            config = None
        if config is not None and config.config_id == run.result.config.config_id:
            return attacker
    return declared_attacker(run.result.config, data.registry)


def texts_of(documents: Documents) -> dict[str, str]:
    return dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"].astype(str)))


@st.cache_data(show_spinner="Finding the smallest redaction that lifts this document's set to k…", max_entries=256)
def document_suggestion(key: str, doc_id: str, strategy: str, confidence: float, flag_below: int,
                        _run: AuditRun, _data: DataSet) -> Suggestion | None:
    """The suggested redaction of one document (``None`` when the attacker cannot explain its matches)."""
    found = suggest_redactions(_run.result, _run.attacker, _data.registry, texts_of(_data.documents),
                               policy=ReleasePolicy(flag_below), confidence=confidence, strategy=strategy,
                               doc_ids=[doc_id])
    return found[0] if found else None


@st.cache_data(show_spinner=False, max_entries=8)
def release_suggestions(key: str, strategy: str, confidence: float, flag_below: int, _run: AuditRun,
                        _data: DataSet) -> tuple[Suggestion, ...]:
    """A suggested redaction for every document flagged at ``confidence`` under ``k = flag_below``."""
    return tuple(suggest_redactions(_run.result, _run.attacker, _data.registry, texts_of(_data.documents),
                                    policy=ReleasePolicy(flag_below), confidence=confidence, strategy=strategy))


def edits_table(suggestion: Suggestion) -> pd.DataFrame:
    """The edits of a suggestion, each to accept or not (all accepted to start with)."""
    return pd.DataFrame({"accept": True, "offset": [e.offset for e in suggestion.edits],
                         "original": [e.original for e in suggestion.edits],
                         "replacement": [e.replacement for e in suggestion.edits],
                         "evidence": [e.term for e in suggestion.edits]},
                        columns=["accept", "offset", "original", "replacement", "evidence"])


def suggestions_table(suggestions) -> pd.DataFrame:
    """One row per suggestion: |C| before and after (indicative), whether k is reached, its cost."""
    return pd.DataFrame([{"doc_id": s.doc_id, "set_size_before": s.set_size_before,
                          "indicative_after": s.set_size_after, "reaches_k": s.reaches_k, "characters": s.characters,
                          "edits": len(s.edits), "words": ", ".join(dict.fromkeys(e.original for e in s.edits))}
                         for s in suggestions],
                        columns=["doc_id", "set_size_before", "indicative_after", "reaches_k", "characters", "edits",
                                 "words"])


def rescore(run: AuditRun, data: DataSet, confidence: float, doc_id: str, text: str,
            explain) -> Rescored:
    """Attack an edited text of a document again and count its set under the stored calibration."""
    cert = run.result.certificate(confidence)
    found = StoredRisk(run.result, run.attacker, data.registry, confidence).of([(cert, row_of(cert, doc_id))], [text])[0]
    return Rescored(found.risk.set_size, tuple(explain.spans(text, list(found.rows))) if explain is not None else ())


def redacted_documents(documents: Documents, suggestions) -> Documents:
    """The release with every suggestion applied, as documents of their own (checksum of the edited texts)."""
    edits = {s.doc_id: s.edits for s in suggestions}
    frame = documents.frame.copy()
    frame["text"] = [apply_edits(text, edits[d]) if d in edits else text
                     for d, text in zip(frame["doc_id"].astype(str), frame["text"])]
    digest = hashlib.sha256()
    for doc_id, text in zip(frame["doc_id"].astype(str), frame["text"]):
        digest.update(doc_id.encode("utf-8", "surrogatepass") + b"\x00" + text.encode("utf-8", "surrogatepass") + b"\x00")
    name = f"{documents.file} (redacted)"
    return replace(documents, frame=frame, file=name, sha256=digest.hexdigest(),
                   report=replace(documents.report, file=name))


def before_after(before: Certificate, after: Certificate, policy: ReleasePolicy,
                 suggestions=()) -> pd.DataFrame:
    """Per document: certified |C| before and after (each under its own calibration), the indicative |C| the
    suggestion predicted, and whether it is still flagged; flagged-before documents first."""
    indicative = {s.doc_id: s.set_size_after for s in suggestions}
    ids_before = before.split.table.doc_ids.astype(str)
    ids_after = after.split.table.doc_ids.astype(str)
    after_size = dict(zip(ids_after, after.set_sizes.tolist()))
    after_flag = dict(zip(ids_after, policy.flags_by_set(after.set_sizes).tolist()))
    flagged_before = policy.flags_by_set(before.set_sizes)
    frame = pd.DataFrame({
        "doc_id": ids_before,
        "set_size_before": before.set_sizes.astype(np.int64),
        "flagged_before": flagged_before,
        "redacted": [d in indicative for d in ids_before],
        "indicative_after": [indicative.get(d) for d in ids_before],
        "set_size_after": [after_size.get(d) for d in ids_before],
        "flagged_after": [bool(after_flag.get(d, False)) for d in ids_before],
    })
    frame["indicative_after"] = frame["indicative_after"].astype("Int64")
    frame["set_size_after"] = frame["set_size_after"].astype("Int64")
    order = np.lexsort((frame["doc_id"].to_numpy(), frame["set_size_before"].to_numpy(),
                        ~frame["flagged_after"].to_numpy(), ~frame["flagged_before"].to_numpy()))
    return frame.iloc[order].reset_index(drop=True)
