"""Certified set sizes against the softmax temperature on a real slice, with the ``auto`` choice.

TextWash study 1 (from ``../shared/datasets``): 30 people, each with 3 original descriptions as the registry
profile and 10 anonymised descriptions as released documents (300 documents). The TF-IDF attacker over the
profile text, release protocol, APS score. Prints a Markdown table: per temperature, the median and mean
certified set size and the share of whole-pool sets at 90 % and 95 %, and the temperature ``auto`` chose.

    python bench/bench_temperature.py [--write]   # --write appends the table to bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.metrics import summarize

STUDY = REPO.parent / "shared" / "datasets" / "textwash" / "study1"
FILE = re.compile(r"^(famous|semifamous|fict)_(\d+)_d_(\d)_(\d+)\.txt$")
TEMPERATURES = (0.05, 0.1, 1.0, "auto")
LEVELS = (0.9, 0.95)


def textwash_rows(profiles_per_person: int = 3, documents_per_person: int = 10) -> tuple[list[dict], list[dict]]:
    """The TextWash slice as rows: released documents (anonymised descriptions) and profiles (each person's
    first original descriptions), people with enough descriptions only."""
    people = defaultdict(list)
    for path in sorted((STUDY / "anon").iterdir()):
        match = FILE.match(path.name)
        if match and (STUDY / "orig" / path.name).is_file():
            people[f"{match.group(1)}:{match.group(4)}"].append((int(match.group(2)), path.name))
    documents, registry = [], []
    for person, files in sorted(people.items()):
        files = sorted(files)
        if len(files) < profiles_per_person + documents_per_person:
            continue
        profile = " ".join((STUDY / "orig" / name).read_text(encoding="utf-8").strip()
                           for _, name in files[:profiles_per_person])
        registry.append({"identity_id": person, "profile": profile})
        for _, name in files[profiles_per_person:profiles_per_person + documents_per_person]:
            documents.append({"doc_id": name[:-4], "text": (STUDY / "anon" / name).read_text(encoding="utf-8"),
                              "identity_id": person})
    return documents, registry


def textwash_release(profiles_per_person: int = 3, documents_per_person: int = 10):
    documents, registry = textwash_rows(profiles_per_person, documents_per_person)
    return (load_documents(pd.DataFrame(documents).to_csv(index=False).encode(), name="textwash-documents.csv"),
            load_registry(pd.DataFrame(registry).to_csv(index=False).encode(), name="textwash-registry.csv"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="append the table to bench/RESULTS.md")
    args = parser.parse_args()
    if not (STUDY / "anon").is_dir():
        sys.exit(f"TextWash study 1 not found in {STUDY}")
    documents, registry = textwash_release()
    level = KnowledgeLevel("profile", ("profile",))
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = [f"### Set size against the temperature (TextWash study 1 slice, {len(documents)} documents, "
             f"{len(registry)} people; TF-IDF over the profile; release protocol; APS) — {date.today()}, "
             f"{os.cpu_count()} cores, load average {load}",
             "", "| temperature | median \\|C\\| (90 %) | mean \\|C\\| (90 %) | whole pool (90 %) | median \\|C\\| (95 %) "
             "| mean \\|C\\| (95 %) | whole pool (95 %) | top-1 |", "|---|---|---|---|---|---|---|---|"]
    for temperature in TEMPERATURES:
        attacker = TfidfAttacker(temperature=temperature)
        config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), confidences=LEVELS)
        result = run_audit(documents, registry, attacker, config)
        summary = summarize(result)
        label = (f"auto (chose {result.inputs['learned']['temperature']:.3g})" if temperature == "auto"
                 else f"{temperature:g}")
        cells = []
        for level_ in LEVELS:
            entry = summary.level(level_)
            cells += [f"{entry.median_set_size:g}", f"{entry.mean_set_size:.1f}",
                      f"{100 * entry.whole_pool_rate:.0f} %"]
        top1 = summary.level(LEVELS[0]).top1
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {100 * top1:.1f} % |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        with (REPO / "bench" / "RESULTS.md").open("a", encoding="utf-8") as handle:
            handle.write("\n" + table + "\n")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
