"""The README's tour of the sample audit states what the sample gives today: each figure is read from README.md and
checked against the sample audited as ``make audit`` audits it (the default attacker panel, the fixture the default
panel's own tests use) and against TF-IDF alone (the audit the Redact page works on), so that the tour cannot drift
from the sample silently."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from cli_checks import ok
from conftest import REPO_ROOT, run_cli_inprocess
from test_default_panel_cli import default_audit  # noqa: F401 (the sample audited by `cpa audit` at the defaults)

TOUR = "## A five-minute tour of the sample audit"


def number(text: str) -> int:
    return int(text.replace(",", ""))


def said(pattern: str, tour: str) -> re.Match:
    """The tour's sentence matching ``pattern`` (whitespace in ``pattern`` matches any run of spaces and line breaks,
    so the README may wrap its lines anywhere)."""
    found = re.search(pattern.replace(" ", r"\s+"), tour)
    assert found, f"the README's tour no longer says /{pattern}/"
    return found


@pytest.fixture(scope="module")
def tour() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(TOUR)
    return text[start:text.index("\n## ", start + len(TOUR))]


@pytest.fixture(scope="module")
def panel(default_audit) -> dict:  # noqa: F811 (the fixture imported above)
    out, done = default_audit
    ok(done)
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_the_tour_states_the_sample_and_the_level_its_figures_are_at(tour, sample_paths, panel):
    found = said(r"\(\[`sample_data/`\]\(sample_data/\): (?P<documents>[\d,]+) released documents, a registry of "
                 r"(?P<people>[\d,]+) people", tour)
    assert number(found["documents"]) == len(pd.read_csv(sample_paths["documents"], dtype=str))
    assert number(found["people"]) == len(pd.read_csv(sample_paths["registry"], dtype=str))
    level = said(r"at the (?P<level>\d+) % confidence level the configuration flags at", tour)["level"]
    assert float(panel["verdict"]["confidence"]) == float(panel["panel"]["flag_confidence"]) == int(level) / 100
    levels = said(r"coverage per confidence level \((?P<levels>[\d, and]+) %", tour)["levels"]
    stated = sorted(int(x) for x in re.findall(r"\d+", levels))
    for member in panel["members"].values():
        assert sorted(round(100 * float(c)) for c in member["confidence"]) == stated


def test_the_tour_states_the_default_panels_verdict(tour, panel):
    verdict = panel["verdict"]
    found = said(r"\*\*(?P<flagged>[\d,]+) of the (?P<documents>[\d,]+) documents are flagged\*\* by at least one "
                 r"attacker \((?P<members>[^)]*)\), and the sample is \*(?P<title>[^*]+)\*: the (?P<left>[\d,]+) "
                 r"documents left would be linked at up to (?P<bound>[\d.]+) % by `(?P<decided>\w+)` \(its upper "
                 r"bound, corrected for the four attackers\), above the acceptable (?P<acceptable>[\d.]+) % "
                 r"\(1/k, k = (?P<k>\d+)\)", tour)
    assert (number(found["flagged"]), number(found["documents"])) == (verdict["n_flagged"], verdict["n_documents"])
    members = {name: number(count) for name, count in re.findall(r"`(\w+)`\s+([\d,]+)", found["members"])}
    assert members == {member["attacker"]: member["n_flagged"] for member in verdict["members"]}
    assert list(members) == panel["panel"]["attackers"] and len(members) == 4
    assert " ".join(found["title"].split()) == verdict["title"].lower()
    assert number(found["left"]) == verdict["remainder_documents"]
    assert found["bound"] == f"{100 * verdict['remainder_bound']:.1f}" and found["decided"] == verdict["decided_by"]
    assert found["acceptable"] == f"{100 * verdict['acceptable_linkage']:.1f}"
    assert all(int(found["k"]) == member["policy"]["flag_below"] for member in panel["members"].values())


def test_the_tour_states_what_the_explore_histogram_draws_in_red(tour, panel):
    found = said(r"`(?P<attacker>\w+)` first: (?P<flagged>[\d,]+) flagged, (?P<by_set>[\d,]+) by set size and "
                 r"(?P<by_linkage>[\d,]+) by linkage probability", tour)
    shown = panel["members"][found["attacker"]]
    assert found["attacker"] == panel["panel"]["attackers"][0]  # the attacker Explore shows first
    level = shown["confidence"][str(panel["verdict"]["confidence"])]
    assert ((number(found["flagged"]), number(found["by_set"]), number(found["by_linkage"]))
            == (level["n_flagged"], level["n_flagged_by_set"], level["n_flagged_by_linkage"]))


def test_the_tour_states_what_tfidf_alone_flags(tour, sample_paths, tmp_path):
    found = said(r"keep \*\*TF-IDF retrieval\*\* alone on the Threat model page and calibrate again "
                 r"\((?P<flagged>[\d,]+) documents flagged at (?P<level>\d+) %", tour)
    done = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                             "--config", sample_paths["config"], "--attacker", "tfidf", "--out", tmp_path / "tfidf",
                             "--no-history")
    ok(done)
    summary = json.loads((tmp_path / "tfidf" / "summary.json").read_text(encoding="utf-8"))
    assert summary["attacker"] == "tfidf"
    assert number(found["flagged"]) == summary["confidence"][str(int(found["level"]) / 100)]["n_flagged"]


def test_the_tour_states_what_make_audit_prints(tour, panel, default_audit):  # noqa: F811
    _, done = default_audit
    found = said(r"the documents flagged by at least one of them \((?P<flagged>[\d,]+), at the level the "
                 r"configuration declares, (?P<level>\d+) %\)", tour)
    assert number(found["flagged"]) == panel["verdict"]["n_flagged"]
    assert int(found["level"]) / 100 == float(panel["panel"]["flag_confidence"])
    assert f"{number(found['flagged'])} documents flagged by at least one of 4 attackers" in done.output
