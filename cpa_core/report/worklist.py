"""The redaction worklist: the flagged documents (under the release policy, :mod:`cpa_core.audit.policy`), riskiest
first (highest linkage probability, then smallest set), each with the rule that flagged it and its evidence; as CSV
(formula-like cells neutralised) and JSON."""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.report.evidence import N_CANDIDATES, document_inferred_clues, documents_evidence, driving_terms

if TYPE_CHECKING:
    from cpa_core.attack.explainers import Explainer
    from cpa_core.audit.panel import PanelCertificate
    from cpa_core.audit.results import Certificate
from cpa_core.audit.policy import ReleasePolicy

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
WORKLIST_COLUMNS = ("doc_id", "group", "flagged_by", "linkage_probability", "linkage_low", "linkage_high",
                    "first_guess", "set_size", "leakage", "top_candidates", "top_weights", "driving_terms", "evidence",
                    "inferred_clues", "config_id", "confidence")


SHOWN_DECIMALS = 6
"""The decimals a worklist shows of a probability or a weight, and orders its rows by (a reader sees the order)."""


def _riskiest_first(linkage: np.ndarray | None, set_sizes: np.ndarray, doc_ids: np.ndarray, row: int) -> tuple:
    """The sort key of a flagged document, riskiest first: highest linkage probability as shown
    (:data:`SHOWN_DECIMALS`; none: 0), then smallest set, then doc id."""
    probability = 0.0 if linkage is None else float(linkage[row])
    return (-round(probability, SHOWN_DECIMALS), int(set_sizes[row]), str(doc_ids[row]))


def risk_order(cert: Certificate, row: int) -> tuple:
    """The sort key of a flagged document of one attacker's certificate (:func:`_riskiest_first`)."""
    return _riskiest_first(cert.linkage, cert.set_sizes, cert.split.table.doc_ids, row)


def linkage_figures(cert: Certificate, row: int) -> dict:
    """A document's linkage probability and its Venn-Abers interval ``[low, high]`` (``None`` where the certificate
    has none), rounded for a table, and the attacker's first guess (the top candidate; ``None`` for an empty pool)."""
    interval = cert.linkage_interval
    table = cert.split.table
    return {
        "linkage_probability": None if cert.linkage is None else round(float(cert.linkage[row]), SHOWN_DECIMALS),
        "linkage_low": None if interval is None else round(float(interval.low[row]), SHOWN_DECIMALS),
        "linkage_high": None if interval is None else round(float(interval.high[row]), SHOWN_DECIMALS),
        "first_guess": str(table.candidate_ids[table.candidates[row, 0]]) if table.pool_sizes[row] > 0 else None,
    }


def worklist(cert: Certificate, policy: ReleasePolicy, config_id: str, *, explain: Explainer | None = None,
             n_candidates: int = N_CANDIDATES) -> pd.DataFrame:
    """The redaction worklist: flagged documents, riskiest first (:func:`risk_order`), with the rule that flagged each
    (``flagged_by``: ``set``, ``linkage`` or both), its linkage probability with its interval, the attacker's first
    guess (:func:`linkage_figures`) and the evidence of each
    (:func:`~cpa_core.report.evidence.document_evidence`: ``evidence`` as spans with offset and length in the released
    text, ``driving_terms`` as the text writes them; ``inferred_clues``: the LLM clues of a ``direct_plus_clues``
    query that the text does not write, which no span can show)."""
    split = cert.split
    reasons = cert.flag_reasons(policy)
    rows = np.array(sorted(np.flatnonzero(reasons != ""), key=lambda row: risk_order(cert, int(row))), dtype=np.int64)
    records = []
    evidence = documents_evidence(split, rows.tolist(), explain)  # one batch for every flagged document
    for row, spans in zip(rows, evidence):
        pool = min(n_candidates, int(split.table.pool_sizes[row]))
        index = split.table.candidates[row, :pool]
        records.append({
            "doc_id": split.table.doc_ids[row],
            "group": None if split.groups is None else split.groups[row],
            "flagged_by": reasons[row],
            **linkage_figures(cert, int(row)),
            "set_size": int(cert.set_sizes[row]),
            "leakage": float(cert.leakage[row]),
            "top_candidates": [str(c) for c in split.table.candidate_ids[index]],
            "top_weights": [round(float(w), SHOWN_DECIMALS) for w in split.table.weights[row, :pool]]
            if split.table.weight_kind == "probability" else [],
            "driving_terms": driving_terms(spans),
            "evidence": [span.to_dict() for span in spans],
            "inferred_clues": document_inferred_clues(split, row, explain),
            "config_id": config_id,
            "confidence": float(cert.confidence),
        })
    return pd.DataFrame(records, columns=list(WORKLIST_COLUMNS))


def neutralise_cell(value):
    """Prefix text a spreadsheet would execute as a formula with an apostrophe, and text that starts with an
    apostrophe too, so that :func:`restore_cell` can always take the prefix off again: a written cell starts with
    an apostrophe exactly when one was added."""
    if isinstance(value, str) and value.startswith((*FORMULA_PREFIXES, "'")):
        return "'" + value
    return value


def restore_cell(value):
    """The text :func:`neutralise_cell` was given: one leading apostrophe taken off. A spreadsheet that drops the
    apostrophe of a formula-like cell when it saves gives the text back as it was, which this leaves as it is."""
    if isinstance(value, str) and value.startswith("'"):
        return value[1:]
    return value


def _cell_text(value) -> str:
    """One item of a list cell: an evidence span as ``offset+length``, an edit as ``offset+length=replacement``,
    anything else as its text."""
    if not isinstance(value, dict):
        return str(value)
    where = f"{value['offset']}+{value['length']}"
    return f"{where}={value['replacement']}" if "replacement" in value else where


def worklist_csv(frame: pd.DataFrame) -> str:
    """CSV text of a worklist, lists joined by ``; `` and formula-like cells neutralised."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(frame.columns)
    for record in frame.itertuples(index=False):
        writer.writerow([neutralise_cell("; ".join(map(_cell_text, v)) if isinstance(v, list) else
                                         ("" if v is None else v)) for v in record])
    return buffer.getvalue()


def worklist_json(frame: pd.DataFrame) -> str:
    return json.dumps(frame.to_dict(orient="records"), indent=2, ensure_ascii=False, default=str)


PANEL_WORKLIST_COLUMNS = ("doc_id", "group", "flagged_by", "linkage_probability", "linkage_low", "linkage_high",
                          "linkage_by", "first_guess", "set_size", "set_size_by", "config_id", "confidence")


def panel_worklist(cert: PanelCertificate, policy: ReleasePolicy, config_id: str) -> pd.DataFrame:
    """The worklist of an attacker panel: every document any member flags, riskiest first (the largest linkage
    probability over the members, then the smallest set, then doc id), with the members that flag it
    (``flagged_by``: ``tfidf (set+linkage), learned (linkage)``), the member that gave the largest linkage probability
    (with its interval and its first guess, :func:`linkage_figures`; the first member's when no member has a linkage
    probability) and the one that gave the smallest set. Each member's own worklist, with its evidence, is in its folder."""
    reasons = np.stack([member.flag_reasons(policy) for member in cert.members], axis=1)
    flagged = np.flatnonzero((reasons != "").any(axis=1))
    linkage = cert.linkage
    split = cert.members[0].split
    records = []
    for row in sorted(flagged.tolist(), key=lambda row: _riskiest_first(linkage, cert.set_sizes,
                                                                        split.table.doc_ids, row)):
        records.append({
            "doc_id": split.table.doc_ids[row],
            "group": None if split.groups is None else split.groups[row],
            "flagged_by": ", ".join(f"{name} ({reason})" for name, reason in zip(cert.names, reasons[row]) if reason),
            **linkage_figures(cert.members[0 if linkage is None else int(cert.linkage_by[row])], row),
            "linkage_by": None if linkage is None else cert.names[int(cert.linkage_by[row])],
            "set_size": int(cert.set_sizes[row]),
            "set_size_by": cert.names[int(cert.smallest_by[row])],
            "config_id": config_id,
            "confidence": float(cert.members[0].confidence),
        })
    return pd.DataFrame(records, columns=list(PANEL_WORKLIST_COLUMNS))
