"""A release redacted against an attacker panel and verified by an attacker its search never consulted, on real
releases from ``../shared/datasets``: the Blog Authorship slice (the posts of a twentieth of its 1,000 authors, the
registry 400 authors' ten other posts, those 50 among them: most of the registry is people the release does not
hold) and the 127 TAB judgments with their manual suppressions against the public summaries of all 1,268 cases.
(The figures of the whole Blog release, and with the dense member, are the README's; they take longer than the suite
may.)

Each release is audited by a panel (``tfidf``, ``lexical_fusion``, ``learned``: the default panel but for dense
retrieval, whose encoding of the registries would take most of the suite's time), redacted by ``cpa redact`` with its
default decisions, and audited again by ``cpa redact`` with the panel and the held-out attacker (``bm25``). Whatever
the verdict, it must be true to the figures recomputed here from the records: either the redacted release is not
releasable as it is, or on the documents it would release every attacker, the held-out one included, names the right
person for so few that the one-sided Clopper-Pearson bound at ``1 - 0.025 / M`` (``M`` attackers) is within the
acceptable rate.
"""

from __future__ import annotations

import json

import pytest
from cli_checks import ok
from conftest import run_cli_inprocess
from real_releases import DATASETS, blog_release, tab_public_release, write_release
from scipy.stats import beta

PANEL = ("tfidf", "lexical_fusion", "learned")
BLOG_AUTHORS = 1 / 20
BLOG_PROFILES = 400


def blog_twentieth():
    """The Blog slice's posts by the first twentieth of its authors (in the order of their ids), against the profiles
    of 400 authors, those among them."""
    return blog_release(BLOG_AUTHORS, BLOG_PROFILES)


RELEASES = {"blog": blog_twentieth, "tab": tab_public_release}


def _records(folder):
    with open(folder / "documents.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module", params=sorted(RELEASES))
def redacted(request, tmp_path_factory):
    built = RELEASES[request.param]()
    if built is None:
        pytest.skip(f"the {request.param} release is not available: ../shared/datasets not found (looked in {DATASETS})")
    base = tmp_path_factory.mktemp(f"panel-redaction-{request.param}")
    documents, registry = write_release(built, base / "release")
    attackers = [arg for name in PANEL for arg in ("--attacker", name)]
    ok(run_cli_inprocess("audit", "--documents", documents, "--registry", registry, *attackers, "--no-history",
                         "--out", base / "audit"))
    redact = ok(run_cli_inprocess("redact", "--audit", base / "audit", "--out", base / "redacted"))
    return request.param, base, redact


def test_the_verdict_of_the_redacted_release_holds_for_the_panel_and_the_held_out_attacker(redacted):
    name, base, redact = redacted
    audit = base / "redacted" / "audit"
    summary = json.loads((audit / "summary.json").read_text(encoding="utf-8"))
    names = summary["panel"]["attackers"]
    assert names == [*PANEL, "bm25"] and summary["redaction"]["held_out"] == "bm25"
    decisions = (base / "redacted" / "decisions.csv").read_text(encoding="utf-8").splitlines()
    assert decisions[0].endswith("held_out_attacker") and all(line.endswith(",bm25") for line in decisions[1:])
    verdict = summary["verdict"]
    flagged = {row["doc_id"] for row in json.loads((audit / "worklist.json").read_text(encoding="utf-8"))}
    acceptable = verdict["acceptable_linkage"]
    level = 1 - 0.025 / len(names)
    bounds = {}
    for member in names:
        records = [r for r in _records(audit / "members" / member) if r["doc_id"] not in flagged]
        if not records:
            continue  # nothing left to release: no bound to keep
        labelled = [r for r in records if r["identity_id"] is not None]
        right = sum(r["true_rank"] == 1 for r in labelled)
        bounds[member] = 1.0 if not labelled or right == len(labelled) else \
            float(beta.ppf(level, right + 1, len(labelled) - right))
    if verdict["status"] in ("release", "redact"):  # a release: every attacker's bound within the acceptable rate
        assert all(bound <= acceptable + 1e-9 for bound in bounds.values()), (name, bounds)
    else:
        assert verdict["status"] in ("unsafe", "inconclusive"), verdict["status"]
        if verdict["status"] == "unsafe":
            assert verdict["title"] == "Not releasable as it is"
            assert bounds and max(bounds.values()) > acceptable - 1e-9, (name, bounds)  # the figures say so too
    # each attacker's first guess before and after, the held-out one run on the release as it was too
    figures = {entry["attacker"]: entry for entry in summary["redaction"]["attackers"]}
    assert set(figures) == set(names) and all(entry["before"] is not None for entry in figures.values())
    assert "bm25 (held out of the search): first guess right before" in redact.stderr
