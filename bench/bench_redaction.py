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

    blog: the Blog Authorship slice from ``../shared/datasets`` (``tests/real_releases.py``: 1,000 authors, each
    profile ten of their posts, 1 to 3 other posts released), TF-IDF over the profile, release protocol, the
    default policy (k = 11, linkage 1/k) at 0.9; the search of the flagged posts of 100 to 1,000 words (at most
    1,000), timed, beside the same search one document at a time on the first 100 of them (the search without
    lockstep batches).

Standalone::

    .venv/bin/python bench/bench_redaction.py [--strategy placeholder] [--only sample|textwash|blog]

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
sys.path.insert(0, str(REPO / "tests"))

from bench_temperature import STUDY, textwash_rows  # noqa: E402  (the same TextWash slice)
from bench_tfidf import log  # noqa: E402

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import declare_audit, load_config
from cpa_core.redaction.decisions import accepted, proposed_decisions, redacted_config
from cpa_core.redaction.suggestions import REPLACEMENTS, WITHHOLD, decided_frame, suggest_redactions

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


def n_flagged(result, level=None) -> int:
    config = result.config
    return int(result.certificate(config.policy_confidence if level is None else level).flags(config.policy).sum())


def decided(documents, table):
    """The release the accepted rows of a decisions table make (edits applied, documents to withhold left out)."""
    edits, withheld = accepted(table)
    return replace(documents, frame=decided_frame(documents.frame, edits, withheld), sha256="0" * 64), edits, withheld


def measure(name: str, paths: dict[str, Path], strategy: str) -> dict:
    """Audit, propose the decisions (timed), build the release they make, audit it again: one data set's figures."""
    project = load_config(paths["config"])
    documents = project.load_documents(paths["documents"])
    registry = project.load_registry(paths["registry"])
    config, attacker = declare_audit(project, registry, documents=documents)

    def again(redacted):
        config_after, attacker_after = declare_audit(project, registry, documents=redacted)
        return run_audit(redacted, registry, attacker_after, redacted_config(config_after, redacted.frame))
    return _measure(name, documents, registry, config, attacker, again, strategy)


def _measure(name, documents, registry, config, attacker, again, strategy) -> dict:
    log(f"{name}: audit of {len(documents.frame)} documents against {len(registry.frame)} profiles")
    start = time.perf_counter()
    result = run_audit(documents, registry, attacker, config)
    audit_s = time.perf_counter() - start
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    log(f"{name}: searching redactions for {n_flagged(result)} flagged documents ({strategy})")
    wall, cpu = time.perf_counter(), time.process_time()
    table, suggestions = proposed_decisions(result, attacker, registry, texts, strategy=strategy)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for s in suggestions:  # the edits are the released text at their offsets; no step raises the risk
        assert all(texts[s.doc_id][e.offset:e.offset + e.length] == e.original for e in s.edits), s.doc_id
        assert s.set_size_after >= s.set_size_before
    redacted, edits, withheld = decided(documents, table)
    log(f"{name}: audit of the redacted release")
    after = again(redacted)  # a new release: calibrated again
    characters = [sum(e.length for e in document) for document in edits.values()]
    shares = [sum(e.length for e in document) / max(1, len(texts[d])) for d, document in edits.items()]
    levels = list(config.confidences)
    return {"name": name, "documents": len(documents.frame), "people": len(registry.frame),
            "rule": config.policy.rule, "confidence": float(config.policy_confidence), "protocol": config.protocol,
            "audited": len(result.test_split),
            "flagged": {lv: (n_flagged(result, lv), n_flagged(after, lv)) for lv in levels},
            "first_guess": (float(result.first_guess_right.mean()), float(after.first_guess_right.mean())),
            "made_acceptable": sum(s.action != WITHHOLD for s in suggestions), "withheld": len(withheld),
            "suggestions": len(suggestions),
            "median_chars": statistics.median(characters) if characters else 0, "total_chars": sum(characters),
            "median_share": statistics.median(shares) if shares else 0.0,
            "edits": sum(len(e) for e in edits.values()), "redact_s": wall, "redact_cpu_s": cpu, "audit_s": audit_s}


def blog_setup():
    """The Blog slice as the tests build it, with the defaults a newcomer gets (TF-IDF, temperature auto, the
    default policy): documents, registry, configuration and attacker, and how to audit a redacted release."""
    from real_releases import PROFILE, blog_release

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig

    release = blog_release()
    if release is None:
        return None
    documents, registry = release
    attacker = TfidfAttacker()
    config = AuditConfig(knowledge=PROFILE, attacker=AttackerConfig.of(attacker), confidences=(0.9, 0.95, 0.99))

    def again(redacted):
        return run_audit(redacted, registry, TfidfAttacker(), config)
    return documents, registry, config, attacker, again


def measure_scale(strategy: str, limit: int = 1000, alone: int = 100) -> dict | None:
    """The Blog slice: the search of up to ``limit`` flagged posts of 100 to 1,000 words, timed, and the same search
    one document at a time on ``alone`` of them."""
    setup = blog_setup()
    if setup is None:
        return None
    documents, registry, config, attacker, _ = setup
    log("blog: audit")
    result = run_audit(documents, registry, attacker, config)
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    cert = result.certificate(config.policy_confidence)
    flagged = [str(d) for d in cert.split.table.doc_ids[cert.flags(config.policy)]]
    chosen = [d for d in flagged if 100 <= len(texts[d].split()) <= 1000][:limit]
    log(f"blog: searching {len(chosen)} flagged posts of 100-1,000 words")
    wall = time.perf_counter()
    found = suggest_redactions(result, attacker, registry, texts, strategy=strategy, doc_ids=chosen)
    wall = time.perf_counter() - wall
    log(f"blog: the same search, one document at a time, on {alone} of them")
    single = time.perf_counter()
    for doc_id in chosen[:alone]:
        suggest_redactions(result, attacker, registry, texts, strategy=strategy, doc_ids=[doc_id])
    single = time.perf_counter() - single
    batched = time.perf_counter()
    suggest_redactions(result, attacker, registry, texts, strategy=strategy, doc_ids=chosen[:alone])
    batched = time.perf_counter() - batched
    words = [len(texts[d].split()) for d in chosen]
    return {"documents": len(chosen), "people": len(registry.frame), "median_words": statistics.median(words),
            "wall": wall, "acceptable": sum(s.action != WITHHOLD for s in found), "alone": min(alone, len(chosen)),
            "alone_s": single, "batched_s": batched}


def table(rows: list[dict], strategy: str, load: tuple[float, float]) -> str:
    lines = [f"### Proposed decisions ({strategy}) — {date.today()}, {os.cpu_count()} cores, load average "
             f"(1 min) {load[0]:.2f} at start / {load[1]:.2f} at end",
             "",
             "| data | audited docs | rule | flagged before → after (re-audited), per level | first guess right "
             "before → after | searched: made acceptable / withheld | chars redacted per edited doc: median / total "
             "| median share of the doc | edits | search: wall (CPU) | per flagged doc | audit wall |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['name']} | skipped: {r['skipped']} |||||||||||")
            continue
        per_doc = r["redact_s"] / max(1, r["suggestions"])
        levels = "; ".join(f"{lv:g}: {a:,} → {b:,}" for lv, (a, b) in r["flagged"].items())
        lines.append(
            f"| {r['name']} ({r['documents']:,} docs, {r['people']:,} people, {r['protocol']}) | {r['audited']:,} "
            f"| {r['rule'].replace('|', chr(92) + '|')} at {r['confidence']:g} | {levels} "
            f"| {r['first_guess'][0]:.1%} → {r['first_guess'][1]:.1%} "
            f"| {r['made_acceptable']:,} / {r['withheld']:,} of {r['suggestions']:,} "
            f"| {r['median_chars']:g} / {r['total_chars']:,} | {r['median_share']:.1%} | {r['edits']:,} "
            f"| {r['redact_s']:.1f} s ({r['redact_cpu_s']:.1f} s) | {per_doc * 1e3:.0f} ms | {r['audit_s']:.1f} s |")
    lines += ["", ("Searched: every document of the release the first audit flags (by its set or its linkage "
                   "probability), audited or (split protocol) calibration document alike, so that the redacted release "
                   "is one release mechanism; made acceptable: under the stored calibration, indicative. The decisions "
                   "are accepted as proposed: the suggested edits made, the documents to withhold left out. Flagged "
                   "after: the release they make, audited under the same declared threat model and policy, calibrated "
                   "again.")]
    return "\n".join(lines)


def scale_table(row: dict | None, strategy: str) -> str:
    if row is None:
        return "Blog slice: skipped (not found in ../shared/datasets/blog)."
    per_doc = row["wall"] / max(1, row["documents"])
    return "\n".join([
        f"### At scale ({strategy}): flagged Blog posts of 100 to 1,000 words against {row['people']:,} profiles",
        "",
        "| search | documents | median words | wall | per document | target |",
        "|---|---:|---:|---:|---:|---|",
        f"| lockstep batches (`suggest_redactions`) | {row['documents']:,} | {row['median_words']:g} "
        f"| {row['wall']:.1f} s | {per_doc * 1e3:.0f} ms | 1,000 in < 60 s: "
        f"{'met' if row['wall'] * 1000 / max(1, row['documents']) < 60 else 'missed'} |",
        f"| lockstep batches, the first {row['alone']} | {row['alone']} | | {row['batched_s']:.1f} s "
        f"| {row['batched_s'] / max(1, row['alone']) * 1e3:.0f} ms | |",
        f"| one document at a time, the same {row['alone']} | {row['alone']} | | {row['alone_s']:.1f} s "
        f"| {row['alone_s'] / max(1, row['alone']) * 1e3:.0f} ms | |",
        "",
        f"{row['acceptable']:,} of {row['documents']:,} made acceptable under the stored calibration (indicative)."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=list(REPLACEMENTS), default="placeholder")
    parser.add_argument("--only", choices=("sample", "textwash", "blog"))
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
        if args.only in (None, "blog"):
            setup = blog_setup()
            rows.append(_measure("Blog slice", *setup, args.strategy) if setup is not None
                        else {"name": "Blog slice", "skipped": "not found in ../shared/datasets/blog"})
    if rows:
        print(table(rows, args.strategy, (load_start, os.getloadavg()[0])))
    if args.only in (None, "blog"):
        print()
        print(scale_table(measure_scale(args.strategy), args.strategy))


if __name__ == "__main__":
    main()
