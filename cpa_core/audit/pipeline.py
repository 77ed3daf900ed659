"""The audit pipeline: split, attack, score, calibrate, certify.

:func:`run_audit` attacks the documents of its protocol once (every document under the release protocol; the
calibration and test documents under the split protocol), saying each step in its terms. The resulting
:class:`~cpa_core.audit.results.AuditResult` keeps, per document, the scores of its ranked candidates (non-decreasing), so
certifying at any other confidence level recomputes one quantile and one count per document; the
attack is never re-run.

Calibration documents whose true identity is outside the pool get the score ``+inf`` by default
(``miss_policy="infinite"``, conservative: the threshold then guards unconditional coverage);
``miss_policy="exclude"`` calibrates on the documents whose truth is in the pool, which certifies
coverage conditional on inclusion.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from cpa_core.attack.base import Attacker, RetrievalAttacker
from cpa_core.attack.budget import check_pool_fits
from cpa_core.attack.candidates import CandidateTable
from cpa_core.common.errors import ConfigError
from cpa_core.common.progress import Progress
from cpa_core.conformal.calibration import calibrate
from cpa_core.io.columns import ROW_NUMBERING, ROW_NUMBERS
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.split import split_indices
from cpa_core.io.tables import Documents, Registry, registry_share

if TYPE_CHECKING:
    from cpa_core.attack.engine import DaskEngine
    from cpa_core.io.candidate_scores import CandidateScores
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.results import AuditResult, ScoredSplit, score_table
from cpa_core.audit.stratification import Stratum, certainty, minimum_members, stratify


def input_facts(documents: Documents | None, registry: Registry, scores: CandidateScores | None = None) -> dict:
    """What the declared configuration records of each input: file, SHA-256, the rows kept (a release may be a
    subset of a file: invalid rows dropped, one group) and how it was read (a column mapping, a non-UTF-8
    encoding)."""
    out = {}
    for role, table in (("documents", documents), ("registry", registry)):
        if table is None:
            continue
        info = {"file": table.file, "sha256": table.sha256, "rows": len(table)}
        if table.report.rejected:
            info["dropped_rows"] = len(table.report.rejected)
        if table.columns:
            info["columns"] = dict(table.columns)
        if ROW_NUMBERS in table.columns.values():  # the ids are no column of the file: say what they are
            info["doc_ids"] = ROW_NUMBERING
        if table.encoding != "utf-8":
            info["encoding"] = table.encoding
        out[role] = info
    if scores is not None:
        out["scores"] = {"file": scores.file, "sha256": scores.sha256, "rows": len(scores.frame)}
    return out


def attack_documents(documents: Documents, registry: Registry, attacker: Attacker, level: KnowledgeLevel,
                     rows: np.ndarray | None = None, progress: Progress | None = None,
                     engine: DaskEngine | None = None, labels_from: np.ndarray | None = None
                     ) -> tuple[CandidateTable, dict]:
    """Let the attacker learn from the given rows (all when ``None``), reading the identities of the rows
    ``labels_from`` only (default: all; the split protocol's test documents are never learned from), and attack
    them, in this process or on ``engine`` (:class:`~cpa_core.attack.engine.DaskEngine`: the same results); returns
    the table and what the attacker chose (e.g. a temperature ``auto`` and the tuning fold it was fitted on)."""
    frame = documents.frame if rows is None else documents.frame.iloc[rows]
    doc_ids, texts = frame["doc_id"].tolist(), frame["text"].tolist()
    identities = frame["identity_id"].tolist()
    if labels_from is not None:
        readable = np.isin(np.arange(len(documents)) if rows is None else np.asarray(rows), labels_from)
        identities = [ident if ok else None for ident, ok in zip(identities, readable)]
    identities = [None if ident is None or ident != ident else ident for ident in identities]  # NaN: no label
    learned = attacker.learn(doc_ids, texts, registry, level, identities, progress)
    if engine is not None:
        return engine.attack(attacker, learned, doc_ids, texts, registry, level, progress), learned
    return attacker.attack(doc_ids, texts, registry, level, progress), learned


def document_groups(documents: Documents, config: AuditConfig) -> np.ndarray | None:
    if not config.group_column:
        return None
    if "group" not in documents.frame.columns:
        raise ConfigError(f"per-group calibration needs the column '{config.group_column}' in {documents.file}, "
                          f"which has columns {list(documents.frame.columns)}")
    return documents.frame["group"].to_numpy(dtype=object)


def _split(documents: Documents, config: AuditConfig):
    """Groups, calibration rows and audited rows: under the release protocol every labelled document
    calibrates and every document is audited; under the split protocol labelled documents are split."""
    groups = document_groups(documents, config)
    labelled = np.flatnonzero(documents.frame["identity_id"].notna().to_numpy())
    if config.protocol == "release":
        return groups, labelled, np.arange(len(documents))
    cal, test = split_indices(len(labelled), config.n_cal, config.n_test, config.seed,
                              None if groups is None else groups[labelled])
    return groups, labelled[cal], labelled[test]


def check_split(documents: Documents, config: AuditConfig) -> None:
    """Refuse, before any attack, a split the release cannot give (e.g. more calibration and test documents than it
    labels)."""
    _split(documents, config)


STEPS = {
    "release": {"attack": "preparing the attack on every document (the labelled ones calibrate each other)",
                "calibrate": "calibrating on the labelled documents, each leaving its own score out"},
    "split": {"attack": "preparing the attack on the calibration and test documents",
              "calibrate": "calibrating on the calibration documents"},
}
"""What :func:`run_audit` says it is doing, per protocol, around the attacker's own steps (the attacker reports its
ranking; what comes before it, such as choosing a temperature, may take most of the time)."""


def stratified(test_split: ScoredSplit, cal_split: ScoredSplit, config: AuditConfig
               ) -> tuple[ScoredSplit, ScoredSplit, tuple[Stratum, ...]]:
    """The splits with their calibration strata (:func:`~cpa_core.audit.stratification.stratify`: declared groups
    crossed with bins of the attacker's certainty over every attacked document) and the strata; the strata are empty
    when there is one."""
    exclude = config.miss_policy == "exclude"
    if config.protocol == "release":  # every document is audited; the calibration documents are among them
        # the calibration documents are the audited ones of the calibration split, in file order
        calibrating = test_split.labelled & test_split.among(cal_split)
        members = calibrating & (test_split.in_pool if exclude else True)
        labels, strata = stratify(certainty(test_split.table), test_split.groups, members, config.certainty_bins,
                                  minimum_members(config.confidences, "release"))
        if labels is None:
            return test_split, cal_split, ()
        return replace(test_split, strata=labels), replace(cal_split, strata=labels[calibrating]), strata
    n_cal = len(cal_split)
    margin = np.concatenate([certainty(cal_split.table), certainty(test_split.table)])
    groups = None if cal_split.groups is None else np.concatenate([cal_split.groups, test_split.groups])
    members = np.concatenate([cal_split.in_pool if exclude else np.ones(n_cal, dtype=bool),
                              np.zeros(len(test_split), dtype=bool)])
    labels, strata = stratify(margin, groups, members, config.certainty_bins, minimum_members(config.confidences, "split"))
    if labels is None:
        return test_split, cal_split, ()
    return replace(test_split, strata=labels[n_cal:]), replace(cal_split, strata=labels[:n_cal]), strata


def estimate_llm_calls(documents: Documents, registry: Registry, attacker: Attacker, config: AuditConfig) -> int:
    """The dry run: LLM calls :func:`run_audit` would make (answers already cached cost none)."""
    _, cal, test = _split(documents, config)
    frame = documents.frame.iloc[np.union1d(cal, test)]
    return int(attacker.estimate_calls(frame["doc_id"].tolist(), frame["text"].tolist(), registry, config.knowledge))


def run_audit(documents: Documents, registry: Registry, attacker: Attacker, config: AuditConfig,
              progress: Progress | None = None, table: CandidateTable | None = None,
              engine: DaskEngine | None = None) -> AuditResult:
    """Attack, score, calibrate: every document (release protocol) or a disjoint split (split protocol).

    Parameters
    ----------
    table : CandidateTable over all documents (in file order), optional
        A precomputed attack (e.g. shared by several audits on matched splits); the attacker is
        not called when it is given.
    engine : where the attack runs (:class:`~cpa_core.attack.engine.DaskEngine`; default this process); the results
        do not depend on it, and the result's inputs record it.

    An attack run in this process records the attacker's counters (``attacker.counters()``: its LLM requests, invalid
    picks and failed answers, counts only) in the result's inputs as ``llm_counters``, for the manifest and the
    verdict's "LLM answers" check.
    """
    config = config.with_data({**config.data, **input_facts(documents, registry)})  # refuses other files
    groups, cal, test = _split(documents, config)
    release = config.protocol == "release"
    # each document attacked once, in an order where each split is a run of rows (views, not copies): every
    # document in file order (release: the audited documents are all of them, the calibrating ones among them),
    # or the calibration documents then the audited ones (split)
    order = test if release else np.concatenate([cal, test])
    steps = STEPS[config.protocol]
    if table is None:
        if progress:
            progress(0, len(order), steps["attack"])
        if isinstance(attacker, RetrievalAttacker):  # it ranks the whole registry, or its shortlist
            check_pool_fits(len(order), len(registry), attacker.top_k)
        attacked, learned = attack_documents(documents, registry, attacker, config.knowledge, order, progress, engine,
                                             labels_from=cal)
    else:
        attacked, learned = table.rows(order), {}
    truth = documents.frame["identity_id"].to_numpy(dtype=object)
    tuning = learned.get("tuning_documents")
    if tuning:  # the fold a temperature was fitted on never calibrates (it is audited like an unlabelled document)
        tuned = np.isin(documents.frame["doc_id"].to_numpy(dtype=object)[cal].astype(str), np.asarray(tuning, dtype=str))
        kept_cal = np.flatnonzero(~tuned)
    else:
        kept_cal = np.arange(len(cal))
    if release:  # the calibration documents' scores are their rows of the audited split's (not copied again)
        test_split = score_table(attacked, truth[test], None if groups is None else groups[test], config)
        cal_split = test_split.documents(cal[kept_cal])
    else:
        cal_split = score_table(attacked.rows(kept_cal), truth[cal[kept_cal]],
                                None if groups is None else groups[cal[kept_cal]], config)
        test_split = score_table(attacked.rows(np.arange(len(cal), len(order))), truth[test],
                                 None if groups is None else groups[test], config)
    if progress:
        progress(len(order), len(order), steps["calibrate"])
    test_split, cal_split, strata = stratified(test_split, cal_split, config)
    scores, labels = cal_split.calibration_scores(config.miss_policy)
    calibration = calibrate(scores, config.confidences, labels)
    inputs = {"documents": {"file": documents.file, "sha256": documents.sha256, "rows": len(documents),
                            "share_in_registry": registry_share(documents, registry)},
              "registry": {"file": registry.file, "sha256": registry.sha256, "rows": len(registry)}}
    if strata:
        inputs["strata"] = [stratum.to_dict() for stratum in strata]
    if learned:
        inputs["learned"] = learned  # what the attacker chose, and from which labelled documents
    if table is None and (trained := attacker.trained() if hasattr(attacker, "trained") else {}):
        inputs["trained"] = trained  # what the attacker trained on the registry alone (a classifier's penalty)
    if engine is not None and table is None:
        inputs["engine"] = engine.describe()
    elif table is None and (counters := attacker.counters()):
        inputs["llm_counters"] = counters  # invalid picks, failed answers, ...: the verdict reads them
    return AuditResult(config, cal_split, test_split, calibration, inputs)
