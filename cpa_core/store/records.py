"""Per-document records, the manifest and the audit's output folder.

Records (JSONL, one object per document) hold the query, the top candidates with their weights and
scores, the true identity's rank and score, and the certified sets, so any result can be re-derived: the
widest set once (``set``, in ranked order; a set that is the entire candidate pool is the pool, not listed
again) and, at each confidence level, the set's size (the level's set is that many first members of ``set``,
or the entire pool when the size is ``pool_size``), the threshold, the leakage proxy, whether the truth is
covered and whether the set is (nearly) the whole pool (``whole_pool``: no certificate of safety). Each record
also holds the document's calibration ``stratum``, the attacker's ``certainty`` (its top-1 margin), the
``linkage_probability`` (the calibrated chance that the attacker's first guess is its subject) and whether the
attacker tells its candidates apart at all (``uninformative``: a pool tied throughout). The manifest holds the full
declared configuration, the checksums of the inputs (each input file as given and, when it is a file of this
machine, its absolute ``path``), the working directory, the seed, the split sizes and the package versions.

Evidence: the record of a document the worklist flags (at the declared flagging level, under the declared
policy) also carries that document's worklist evidence, joined by doc id, never computed again: the rule that
flagged it (``flagged_by``), ``evidence`` (spans ``{offset, length, text, term, weight}`` into the released text, see
:func:`cpa_core.report.evidence.document_evidence`), ``driving_terms`` and ``inferred_clues``, the very values of
``worklist.json``. A document that is not flagged has no such fields (nor has any calibration record: the
worklist is about the audited documents). Neither has any record when the attacker does not explain its
matches (no explainer: nothing was computed; the worklist then shows empty lists), so a present
``evidence`` field, even an empty one, always means the explainer ran for that document.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping

import numpy as np

from cpa_core.audit.stratification import certainty
from cpa_core.conformal.calibration import confidence_label
from cpa_core.conformal.scores import get_score
from cpa_core.report.diagnostics import whole_pool
from cpa_core.report.verdict import summary_document
from cpa_core.report.worklist import worklist, worklist_csv, worklist_json
from cpa_core.store.bundle import CONFIG_FILE, declared_toml, input_files, reproduce_command

if TYPE_CHECKING:
    import pandas as pd

    from cpa_core.attack.explainers import Explainer
    from cpa_core.audit.panel import PanelResult
    from cpa_core.audit.results import AuditResult, Certificate, ScoredSplit

RECORD_CANDIDATES = 20
VERSIONED_PACKAGES = ("cpa-core", "numpy", "pandas", "scikit-learn", "scipy", "pyarrow", "sentence-transformers",
                      "torch", "openai")
EVIDENCE_FIELDS = ("flagged_by", "evidence", "driving_terms", "inferred_clues")
"""The worklist's columns that a flagged document's record carries too."""
REPORT_FILE = "report.html"
"""The certificate report :func:`write_audit` writes on request (the command line's ``cpa audit``)."""


def package_versions() -> dict:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _certified_by(cert: "Certificate", row: int) -> str:
    """How a document's threshold was calibrated (the protocol, and whether its own score was left out)."""
    if cert.left_out is None:
        return "split: the calibration split's threshold"
    return ("leave-one-out: the other calibration documents" if cert.left_out[row] else
            "all calibration documents (its subject unknown, or in the temperature's tuning fold)")


def worklist_evidence(work: "pd.DataFrame") -> dict[str, dict]:
    """The evidence of each document of a worklist (:func:`~cpa_core.report.worklist.worklist`), by doc id (as text):
    its :data:`EVIDENCE_FIELDS`, as the worklist holds them."""
    return {str(row["doc_id"]): {field: row[field] for field in EVIDENCE_FIELDS}
            for row in work.to_dict(orient="records")}


def _numbers(values: np.ndarray) -> list[float | None]:
    """Finite values as floats, the others as ``None`` (strict JSON has no infinity)."""
    values = np.asarray(values, dtype=float)
    return np.where(np.isfinite(values), values, None).tolist()


def split_records(split: "ScoredSplit", certificates: list["Certificate"], split_name: str, config_id: str,
                  n_candidates: int = RECORD_CANDIDATES, evidence: Mapping[str, dict] | None = None) -> Iterator[dict]:
    """The records of a split's documents; ``evidence`` (:func:`worklist_evidence`): the evidence fields of the
    flagged ones, by doc id, added to their records.

    Every level's set is a prefix of the document's ranking, so ``set`` lists the widest of them once, in ranked
    order, and each level gives its ``set_size``: the level's set is the first ``set_size`` members of ``set``.
    A set that is the document's entire candidate pool (``set_size == pool_size``, e.g. under an infinite
    threshold) is not listed again: it is the pool. Each document costs the same whatever the number of
    documents: the per-level columns are converted once, not per record."""
    evidence = evidence or {}
    table = split.table
    n = len(split)
    ids = np.asarray(table.candidate_ids).astype(str)
    top = min(n_candidates, table.width)
    shown = np.minimum(top, table.pool_sizes).tolist()
    top_ids = ids[np.maximum(table.candidates[:, :top], 0)].tolist()
    top_weights = table.weights[:, :top].astype(float).tolist() if table.weight_kind == "probability" else None
    top_scores = _numbers(split.sorted_scores[:, :top])
    listed = np.zeros(n, dtype=np.int64)  # the widest set that is not the entire pool (that is the pool itself)
    for cert in certificates:
        listed = np.maximum(listed, np.where(cert.set_sizes < table.pool_sizes, cert.set_sizes, 0))
    levels = [(confidence_label(cert.confidence), _numbers(cert.q_hat), cert.set_sizes.tolist(), cert.leakage.tolist(),
               cert.covered.tolist(), whole_pool(cert).tolist()) for cert in certificates]
    certified_by = [_certified_by(certificates[0], row) for row in range(n)] if certificates else [None] * n
    doc_ids, truth_ids = table.doc_ids.tolist(), split.truth_ids.tolist()
    groups = [None] * n if split.groups is None else split.groups.tolist()
    strata = [None] * n if split.strata is None else split.strata.tolist()
    margins = certainty(table).tolist() if table.width else [None] * n
    linkage = [None] * n if not certificates or certificates[0].linkage is None else \
        _numbers(certificates[0].linkage)
    uninformative = split.uninformative.tolist()
    in_pool, ranks = split.in_pool.tolist(), split.truth_ranks.tolist()
    truth_scores, pool_sizes = _numbers(split.truth_scores), table.pool_sizes.tolist()
    for row in range(n):
        k = shown[row]
        record = {
            "doc_id": doc_ids[row],
            "config_id": config_id,
            "split": split_name,
            "group": groups[row],
            "query": None if table.queries is None else table.queries[row],
            "identity_id": truth_ids[row],
            "in_pool": in_pool[row],
            "true_rank": int(ranks[row]) if in_pool[row] else None,
            "true_score": truth_scores[row],
            "pool_size": int(pool_sizes[row]),
            "stratum": strata[row],
            "certainty": margins[row],
            "linkage_probability": linkage[row],
            "uninformative": uninformative[row],
            "certified_by": certified_by[row],
            "candidates": [{"id": cid, "weight": weight, "score": score} for cid, weight, score in
                           zip(top_ids[row][:k], top_weights[row][:k] if top_weights is not None else [None] * k,
                               top_scores[row][:k])],
            "set": ids[table.candidates[row, :listed[row]]].tolist(),
            "sets": {label: {"q_hat": q_hat[row], "set_size": int(sizes[row]), "leakage": leakage[row],
                             "covered": covered[row], "whole_pool": whole[row]}
                     for label, q_hat, sizes, leakage, covered, whole in levels},
        }
        found = evidence.get(str(record["doc_id"]))
        if found is not None:
            record.update(found)
        yield record


def located_inputs(inputs: Mapping) -> dict:
    """The inputs of an audit with, for each input file that is a file of this machine (relative paths read from
    the working directory), its absolute ``path`` beside its ``file`` as given: ``cpa redact`` reads the files from
    any directory. An uploaded file (a name, not a path here) has none."""
    out = {}
    for role, info in inputs.items():
        path = _local_file(info.get("file")) if isinstance(info, dict) else None
        out[role] = info if path is None else {**info, "path": path}
    return out


def _local_file(name) -> str | None:
    """The absolute path of the file ``name`` names here, or ``None`` (not a file here, or not a path at all)."""
    if not isinstance(name, str) or not name:
        return None
    try:
        return str(Path(name).resolve()) if Path(name).is_file() else None
    except (OSError, ValueError):
        return None


def manifest(result: "AuditResult") -> dict:
    """The audit's manifest: its declared configuration (and the command and file that declare it again),
    the inputs (:func:`located_inputs`), the working directory, the split, the warnings and the versions."""
    config = result.config
    split_ids = {name: hashlib.sha256("\n".join(map(str, s.table.doc_ids)).encode()).hexdigest()
                 for name, s in (("calibration", result.calibration_split), ("test", result.test_split))}
    return {
        "config_id": config.config_id,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": config.to_dict(),
        "reproduce": {"config_file": CONFIG_FILE, "command": reproduce_command(config, input_files(result))},
        "inputs": located_inputs(result.inputs),
        "working_directory": os.getcwd(),
        "knowledge_fields": list(config.knowledge.fields),
        "attacker": config.attacker.to_dict(),
        "score": config.score,
        "score_scale": f"records store scores as {get_score(config.score).stored_as}",
        "confidences": [confidence_label(c) for c in config.confidences],
        "seed": config.seed,
        "protocol": config.protocol,
        "split": {"n_cal": len(result.calibration_split), "n_test": len(result.test_split),
                  "n_cal_used": sum(result.calibration.n_.values()),
                  "n_cal_per_group": {str(k): v for k, v in result.calibration.n_.items()},
                  "doc_ids_sha256": split_ids},
        "warnings": [note.message for note in result.calibration.notes_],
        "linkage": result.linkage_model.describe(),
        "versions": package_versions(),
    }


def record_splits(result: "AuditResult") -> tuple[str, ...]:
    """The record files of an audit: every document under the release protocol, else calibration and test."""
    return ("documents",) if result.config.protocol == "release" else ("calibration", "test")


def records(result: "AuditResult", split_name: str, confidences: Iterable | None = None, *,
            work: "pd.DataFrame | None" = None) -> Iterator[dict]:
    """The per-document records of ``documents`` (release protocol), ``calibration`` or ``test`` (split),
    with each document's set at each level; ``work``: the result's worklist, whose evidence the records of its
    flagged documents then carry (see the module's docstring; calibration records never do).

    Raises :class:`ValueError` when ``work`` was made under another configuration than the result's."""
    levels = list(confidences) if confidences is not None else list(result.config.confidences)
    evidence = None
    if work is not None and split_name != "calibration":
        others = {str(c) for c in work["config_id"]} - {result.config.config_id}
        if others:
            raise ValueError(f"the worklist is of configuration {', '.join(sorted(others))}, "
                             f"not of the audit's {result.config.config_id}")
        evidence = worklist_evidence(work)
    if split_name == "calibration":
        split, certify = result.calibration_split, result.calibration_certificate
    else:
        split, certify = result.test_split, result.certificate
    return split_records(split, [certify(level) for level in levels], split_name, result.config.config_id,
                         evidence=evidence)


def jsonl_lines(items: Iterable[dict]) -> Iterator[str]:
    """One JSON object per line (text kept as written, UTF-8; strict JSON: a non-finite number would be ``null``;
    a value JSON has no type for as its text), encoded by ``orjson``."""
    import orjson

    for item in items:
        yield orjson.dumps(item, default=str, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS).decode()


def write_private(path: Path, text: str | Iterable[str]) -> None:
    """Write a file readable by its owner only: records and worklists hold document text and terms. ``text``:
    the whole text, or its pieces (written as they come: records are never held in memory at once)."""
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(handle, 0o600)  # an existing file keeps its mode otherwise
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            if isinstance(text, str):
                stream.write(text)
            else:
                stream.writelines(text)
    except OSError as error:
        if error.filename is None:  # a failed write (a full disk) says no file by itself
            raise OSError(error.errno, error.strerror, str(path)) from None
        raise


def write_audit(result: "AuditResult", out_dir: str | Path, explain: "Explainer | None" = None, *,
                report: bool = False, summary: dict | None = None,
                texts: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Write summary.json, the records (documents.jsonl; calibration.jsonl and test.jsonl under the split
    protocol), worklist.csv/json, manifest.json and audit.toml (the declared configuration: with the input
    files, ``cpa audit --config audit.toml`` runs this audit again). The evidence is computed once, for the
    worklist; the records of flagged documents carry it (with an explainer; see the module's docstring).

    ``report``: also write the certificate report, report.html (:func:`audit_report`), as private as the other
    files; the manifest does not list it, and no other file changes for it. ``summary``: the audit's
    :func:`~cpa_core.report.verdict.summary_document` when the caller has it already (computed here otherwise).
    ``texts``: the released texts by doc id, for the report's excerpts around each flagged document's evidence.

    The files are written into ``out_dir`` as they come: a run that replaces an earlier output writes into an
    :class:`~cpa_core.store.output_folder.OutputFolder`'s staging folder, put in place once complete."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    config = result.config
    splits = record_splits(result)
    paths = {name: out / name for name in ("summary.json", *(f"{s}.jsonl" for s in splits), "worklist.csv",
                                           "worklist.json", "manifest.json", CONFIG_FILE)}
    write_private(paths["summary.json"], json.dumps(summary or summary_document(result), indent=2))
    work = worklist(result.certificate(config.policy_confidence), config.policy, config.config_id, explain=explain)
    for name in splits:
        write_private(paths[f"{name}.jsonl"], jsonl_lines(records(result, name, work=work if explain is not None else None)))
    write_private(paths["worklist.csv"], worklist_csv(work))
    write_private(paths["worklist.json"], worklist_json(work))
    audit_manifest = manifest(result)
    write_private(paths["manifest.json"], json.dumps(audit_manifest, indent=2, default=str))
    write_private(paths[CONFIG_FILE], declared_toml(config))
    if report:
        paths[REPORT_FILE] = out / REPORT_FILE
        write_private(paths[REPORT_FILE], audit_report(result, work, audit_manifest, texts))
    return paths


def audit_report(result: "AuditResult", work: "pd.DataFrame", audit_manifest: dict,
                 texts: Mapping[str, str] | None = None) -> str:
    """The certificate report of an audit (:func:`cpa_core.report.html.certificate_report`, static figures, no
    script) from its worklist and its manifest as written, dated when the manifest was created (``texts``: the
    released texts, for the excerpts of its flagged documents)."""
    from cpa_core.report.html import certificate_report  # the report's own imports only when one is written
    from cpa_core.report.metrics import confidence_curve

    return certificate_report(result, curve=confidence_curve(result), worklist=work, manifest=audit_manifest,
                              generated_at=datetime.fromisoformat(audit_manifest["created_at"]), texts=texts)


PANEL_FOLDER = "members"
"""An attacker panel's folder holds each member's whole audit in ``members/<attacker>/``."""


def panel_summary(panel: "PanelResult", members: Mapping[str, dict], *, redaction: dict | None = None) -> dict:
    """``summary.json`` of an attacker panel: its verdict at the flagging level (the members side by side, the member
    that decided), and every member's summary (``members``: each one's
    :func:`~cpa_core.report.verdict.summary_document`, by attacker). ``redaction``: the release's redaction verified
    outside its search (``held_out``: the attacker the search never consulted; ``source_config_id``: the audit of the
    release before redaction; ``attackers``: each one's first-guess rate before and after, with its interval), stored
    as ``redaction``."""
    from cpa_core.report.verdict import panel_verdict

    config = panel.config
    summary = {"panel": {"config_id": panel.config_id, "attackers": list(panel.names),
                         "member_config_ids": {name: member.config.config_id
                                               for name, member in zip(panel.names, panel.members)},
                         "flag_confidence": confidence_label(config.policy_confidence), "rule": config.policy.rule},
               "verdict": panel_verdict(panel, config.policy_confidence).to_dict(),
               "members": dict(members)}
    if redaction is not None:
        summary["redaction"] = redaction
    return summary


def panel_manifest(panel: "PanelResult") -> dict:
    """``manifest.json`` of an attacker panel: its id, each member's configuration id and folder, the inputs, the
    working directory and the versions."""
    return {"config_id": panel.config_id, "kind": "panel",
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "attackers": list(panel.names),
            "members": {name: {"config_id": member.config.config_id, "folder": f"{PANEL_FOLDER}/{name}"}
                        for name, member in zip(panel.names, panel.members)},
            "inputs": located_inputs(_shared_inputs(panel)), "working_directory": os.getcwd(),
            "versions": package_versions()}


def _shared_inputs(panel: "PanelResult") -> dict:
    """What every member of a panel read alike (the files, how they were read): the first member's inputs without
    what its attacker learned or ran with (its temperature, its engine, its LLM counters); the panel's marker without
    the member's name. Each member's own are in its folder's manifest."""
    first = panel.members[0].inputs
    shared = {key: value for key, value in first.items()
              if all(member.inputs.get(key) == value for member in panel.members[1:])}
    marker = {key: value for key, value in first.get("panel", {}).items() if key != "attacker"}
    return {**shared, **({"panel": marker} if marker else {})}


def write_panel(panel: "PanelResult", out_dir: str | Path, explainers: Mapping[str, "Explainer | None"], *,
                redaction: dict | None = None, texts: Mapping[str, str] | None = None) -> dict:
    """Write an attacker panel's audit: each member's whole audit (:func:`write_audit`, report included) in
    ``members/<attacker>/``, and at the top the panel's ``summary.json`` (:func:`panel_summary`, with ``redaction``
    when given), its worklist (every document any member flags, :func:`~cpa_core.report.worklist.panel_worklist`),
    its ``manifest.json`` (:func:`panel_manifest`) and its certificate report, ``report.html``
    (:func:`~cpa_core.report.html.panel_report`: the verdict, the members side by side with links to their own
    reports, the correction for several members, the redaction). Returns the panel summary."""
    from cpa_core.report.html import panel_report
    from cpa_core.report.worklist import panel_worklist

    out = Path(out_dir)
    (out / PANEL_FOLDER).mkdir(parents=True, exist_ok=True, mode=0o700)  # its members' records hold document text
    members = {name: summary_document(member) for name, member in zip(panel.names, panel.members)}
    for name, member in zip(panel.names, panel.members):
        write_audit(member, out / PANEL_FOLDER / name, explainers.get(name), report=True, summary=members[name],
                    texts=texts)
    summary = panel_summary(panel, members, redaction=redaction)
    config = panel.config
    work = panel_worklist(panel.certificate(config.policy_confidence), config.policy, panel.config_id)
    panel_files = panel_manifest(panel)
    write_private(out / "summary.json", json.dumps(summary, indent=2))
    write_private(out / "worklist.csv", worklist_csv(work))
    write_private(out / "worklist.json", worklist_json(work))
    write_private(out / "manifest.json", json.dumps(panel_files, indent=2, default=str))
    write_private(out / REPORT_FILE, panel_report(
        panel, worklist=work, manifest=panel_files, redaction=redaction,
        member_links={name: f"{PANEL_FOLDER}/{name}/{REPORT_FILE}" for name in panel.names},
        generated_at=datetime.fromisoformat(panel_files["created_at"])))
    return summary
