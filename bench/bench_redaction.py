"""Suggested redactions: what they cost and what they buy, on the sample data and a TextWash slice.

For each data set: audit (the declared configuration), suggest redactions for every flagged document
(:func:`cpa_core.redaction.suggestions.suggest_redactions`, the greedy search of ``cpa redact``; timed), apply them to the
release, and audit the redacted release again under the same declared threat model (calibrated again: a new
release). Prints a Markdown table: flagged before, flagged after (re-audited), documents whose suggestion
reaches k under the stored threshold (indicative), characters redacted per flagged document (median and
total) and their median share of the document, the number of edits, and the wall and CPU time of the
suggestions. With a learned temperature (``temperature = "auto"``) it also audits the redacted release at the
first audit's temperature, to show how much of the drop comes from choosing the temperature again.

Data sets
    sample: ``sample_data/`` with ``sample_data/audit.toml`` (1,000 documents, 400 people, TF-IDF, K2, release
    protocol).
    textwash: TextWash study 1 from ``../shared/datasets`` (the slice of ``tests/test_textwash.py``): 30 people,
    each with a profile made of 3 original descriptions, and 10 anonymised descriptions as released documents
    (300); TF-IDF over the profile, split protocol 150 / 150, seed 1, confidence 0.90 and 0.95, flag |C| < 11
    at 0.90. Skipped when the data sets are absent.

Standalone::

    .venv/bin/python bench/bench_redaction.py [--strategy placeholder] [--only sample|textwash]

Progress goes to stderr, the table to stdout. Nothing printed contains a text.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_temperature import STUDY, textwash_rows  # noqa: E402  (the same TextWash slice)
from bench_tfidf import log  # noqa: E402

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import declare_audit, load_config
from cpa_core.redaction.suggestions import REPLACEMENTS, apply_edits, suggest_redactions

SAMPLE = REPO / "sample_data"
PROFILE_DOCS, AUDIT_DOCS = 3, 10
TEXTWASH_CONFIG = """\
[knowledge.profile]
fields = ["profile"]
description = "The profile: three original descriptions of the person."

[audit]
knowledge = "profile"
attacker = "tfidf"
score = "aps"
confidence = [0.9, 0.95]
protocol = "split"
n_cal = 150
n_test = 150
seed = 1
flag_below = 11
"""


def textwash_files(folder: Path) -> dict[str, Path]:
    """Write the TextWash slice (documents.csv, registry.csv, audit.toml) to ``folder``."""
    documents, registry = textwash_rows(PROFILE_DOCS, AUDIT_DOCS)
    for row in registry:
        row["category"] = row["identity_id"].split(":")[0]
    paths = {"documents": folder / "documents.csv", "registry": folder / "registry.csv",
             "config": folder / "audit.toml"}
    pd.DataFrame(documents).to_csv(paths["documents"], index=False)
    pd.DataFrame(registry).to_csv(paths["registry"], index=False)
    paths["config"].write_text(TEXTWASH_CONFIG, encoding="utf-8")
    return paths


def n_flagged(result) -> int:
    config = result.config
    return int(config.policy.flags(result.certificate(config.policy_confidence).set_sizes).sum())


def measure(name: str, paths: dict[str, Path], strategy: str) -> dict:
    """Audit, suggest (timed), apply, audit again: the figures of one data set."""
    project = load_config(paths["config"])
    documents = project.load_documents(paths["documents"])
    registry = project.load_registry(paths["registry"])
    config, attacker = declare_audit(project, registry, documents=documents)
    log(f"{name}: audit of {len(documents.frame)} documents against {len(registry.frame)} profiles")
    start = time.perf_counter()
    result = run_audit(documents, registry, attacker, config)
    audit_s = time.perf_counter() - start
    before = n_flagged(result)
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    log(f"{name}: suggesting redactions for {before} flagged documents ({strategy})")
    wall, cpu = time.perf_counter(), time.process_time()
    suggestions = suggest_redactions(result, attacker, registry, texts, strategy=strategy)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for s in suggestions:  # the edits are the released text at their offsets
        assert all(texts[s.doc_id][e.offset:e.offset + e.length] == e.original for e in s.edits), s.doc_id
    edits = {s.doc_id: s.edits for s in suggestions}
    frame = documents.frame.copy()
    frame["text"] = [apply_edits(t, edits.get(str(d), ())) for d, t in zip(frame["doc_id"], frame["text"])]
    redacted = replace(documents, frame=frame, sha256="0" * 64)
    again, attacker_again = declare_audit(project, registry, documents=redacted)
    log(f"{name}: audit of the redacted release")
    after = run_audit(redacted, registry, attacker_again, again)  # a new release: calibrated again
    learned = result.inputs.get("learned", {}).get("temperature")
    kept = None
    if learned is not None:  # the same, with the first audit's learned temperature instead of choosing one again
        log(f"{name}: audit of the redacted release at the first audit's temperature")
        fixed, attacker_fixed = declare_audit(project, registry, documents=redacted,
                                              attacker_params={"temperature": learned})
        kept = n_flagged(run_audit(redacted, registry, attacker_fixed, fixed))
    characters = [s.characters for s in suggestions]
    shares = [s.characters / max(1, len(texts[s.doc_id])) for s in suggestions]
    return {"name": name, "documents": len(documents.frame), "people": len(registry.frame),
            "rule": config.policy.rule, "confidence": float(config.policy_confidence), "protocol": config.protocol,
            "audited": len(result.test_split), "before": before, "after": n_flagged(after), "after_kept": kept,
            "temperature": learned, "temperature_after": after.inputs.get("learned", {}).get("temperature"),
            "reach_k": sum(s.reaches_k for s in suggestions), "suggestions": len(suggestions),
            "median_chars": statistics.median(characters) if characters else 0, "total_chars": sum(characters),
            "median_share": statistics.median(shares) if shares else 0.0,
            "edits": sum(len(s.edits) for s in suggestions), "redact_s": wall, "redact_cpu_s": cpu,
            "audit_s": audit_s}


def table(rows: list[dict], strategy: str, load: tuple[float, float]) -> str:
    lines = [f"### Suggested redactions ({strategy}) — {date.today()}, {os.cpu_count()} cores, load average "
             f"(1 min) {load[0]:.2f} at start / {load[1]:.2f} at end",
             "",
             "| data | audited docs | rule | flagged before | flagged after (re-audited) "
             "| flagged after, temperature kept | documents redacted: reach k (indicative) "
             "| chars redacted per redacted doc: median / total | median share of the doc | edits "
             "| suggest: wall (CPU) | per flagged doc | audit wall |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['name']} | skipped: {r['skipped']} ||||||||||||")
            continue
        per_doc = r["redact_s"] / max(1, r["suggestions"])
        kept = "—" if r["after_kept"] is None else (f"{r['after_kept']:,} (T {r['temperature']:.3g}; "
                                                    f"re-chosen: {r['temperature_after']:.3g})")
        lines.append(
            f"| {r['name']} ({r['documents']:,} docs, {r['people']:,} people, {r['protocol']}) | {r['audited']:,} "
            f"| {r['rule'].replace('|', chr(92) + '|')} at {r['confidence']:g} | {r['before']:,} | {r['after']:,} "
            f"| {kept} "
            f"| {r['reach_k']:,} of {r['suggestions']:,} | {r['median_chars']:g} / {r['total_chars']:,} "
            f"| {r['median_share']:.1%} | {r['edits']:,} | {r['redact_s']:.1f} s ({r['redact_cpu_s']:.1f} s) "
            f"| {per_doc * 1e3:.0f} ms | {r['audit_s']:.1f} s |")
    lines += ["", ("Flagged: audited documents flagged. Documents redacted: every document of the release the "
                   "first audit's thresholds flag, audited or (split protocol) calibration document alike, so that "
                   "the redacted release is one release mechanism. Flagged after: the redacted release audited under "
                   "the same declared threat model, calibrated again. Temperature kept: the same re-audit with the attacker's temperature fixed at "
                   "the one the first audit learned (``auto`` chooses it again from the labelled documents, redacted "
                   "ones included, which moves the threshold). Reach k: the suggestion's set size under the *stored* "
                   "threshold, which is indicative only.")]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=list(REPLACEMENTS), default="placeholder")
    parser.add_argument("--only", choices=("sample", "textwash"))
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="cpa-bench-redaction-") as folder:
        if args.only in (None, "sample"):
            rows.append(measure("sample", {"documents": SAMPLE / "documents.csv", "registry": SAMPLE / "registry.csv",
                                           "config": SAMPLE / "audit.toml"}, args.strategy))
        if args.only in (None, "textwash"):
            if (STUDY / "anon").is_dir() and (STUDY / "orig").is_dir():
                rows.append(measure("TextWash study 1", textwash_files(Path(folder)), args.strategy))
            else:
                rows.append({"name": "TextWash study 1", "skipped": f"not found in {STUDY}"})
    print(table(rows, args.strategy, (load_start, os.getloadavg()[0])))


if __name__ == "__main__":
    main()
