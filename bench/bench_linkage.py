"""How well the linkage probability tells documents apart, on withheld labels of a real release.

The Blog Authorship slice as a large release (``tests/real_releases.blog_posts_release``: up to 12 posts of each of
1,000 authors, 8,090 posts; each profile up to 6,000 characters of the author's other posts), 40 % of the posts'
authors withheld from the audit (seeded). The default panel audits it at the defaults; on the posts
whose author was withheld, the linkage probability is compared with whether the attacker's first guess is the
author:

- the area under the ROC curve (AUC) of the probability for telling first-guess-linked posts from the rest;
- the expected calibration error over deciles of the probability (ECE: the decile's share of posts times its gap
  between the mean probability and the observed first-guess rate, summed);
- of the posts flagged by linkage (probability above the default acceptable rate, 1/11), the share the attacker
  links at first guess.

Side by side: the audit's probability (:mod:`cpa_core.audit.linkage`, reading the member's peers' attacks too), the
learned statistic over the member's own attack alone, and inductive Venn-Abers on the attacker's certainty (top-1
margin) alone, over the same calibrating posts.

    .venv/bin/python bench/bench_linkage.py [--attackers tfidf,lexical_fusion,learned,dense] [--withheld 0.4]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tfidf import log  # noqa: E402
from real_releases import BLOG, blog_posts_release  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from cpa_core.audit.panel import audit_panel  # noqa: E402
from cpa_core.audit.project import ProjectConfig, declare_audit  # noqa: E402
from cpa_core.audit.stratification import certainty  # noqa: E402
from cpa_core.conformal.venn_abers import statistic_levels, venn_abers  # noqa: E402

ACCEPTABLE = 1 / 11


def calibration_error(predicted: np.ndarray, observed: np.ndarray) -> tuple[float, list[tuple[float, float, int]]]:
    """The expected calibration error over deciles of the prediction, and each decile's (mean predicted, observed
    rate, documents)."""
    edges = np.quantile(predicted, np.linspace(0, 1, 11))
    codes = np.clip(np.searchsorted(edges, predicted, side="right") - 1, 0, 9)
    deciles = [(float(predicted[codes == d].mean()), float(observed[codes == d].mean()), int((codes == d).sum()))
               for d in range(10) if (codes == d).any()]
    return sum(abs(p - o) * k for p, o, k in deciles) / len(predicted), deciles


def measure(names: list[str], withheld: float) -> tuple[list[dict], float]:
    """The panel of ``names`` audited at the defaults (:func:`~cpa_core.audit.panel.audit_panel`); each member's
    figures for three probabilities, and the panel's time."""
    documents, registry, authors = blog_posts_release(withheld=withheld)
    declared = [declare_audit(ProjectConfig(), registry, attacker=name, documents=documents) for name in names]
    start = time.perf_counter()
    panel = audit_panel(documents, registry, declared)
    panel_s = time.perf_counter() - start
    rows = []
    for member in panel.members:
        table = member.test_split.table
        first = np.asarray(table.candidate_ids)[table.candidates[:, 0]]
        linked = first == np.array([authors[str(d)] for d in table.doc_ids], dtype=object)
        hidden = ~member.test_split.labelled
        old = venn_abers(statistic_levels(certainty(table)), member.first_guess_right, member.calibrating).p
        alone = member.with_peers(()).linkage
        start = time.perf_counter()
        probability = member.linkage
        linkage_s = time.perf_counter() - start
        out = {"attacker": member.config.attacker.name, "posts": len(table.doc_ids), "withheld": int(hidden.sum()),
               "calibrating": int(member.calibrating.sum()), "first_guess": float(linked[hidden].mean()),
               "linkage_s": linkage_s, "peers": member.linkage_model.peers}
        for label, p in (("certainty", old), ("alone", alone), ("audit", probability)):
            ece, deciles = calibration_error(p[hidden], linked[hidden])
            flagged = p > ACCEPTABLE
            out[label] = {"auc": float(roc_auc_score(linked[hidden], p[hidden])), "ece": ece, "deciles": deciles,
                          "flagged": int(flagged.sum()), "linked_among_flagged": float(linked[flagged].mean())}
        rows.append(out)
    return rows, panel_s


def report(rows: list[dict], withheld: float, panel_s: float) -> str:
    lines = [f"## (v) Linkage probability on withheld labels: Blog, 8,090 posts, {withheld:.0%} of the authors "
             "withheld",
             "", f"Date: {date.today().isoformat()}. `bench/bench_linkage.py`. The default panel audited at the "
             f"defaults ({panel_s:.0f} s for the whole panel); figures over the posts whose author was withheld (AUC, "
             f"ECE over deciles), and over every post flagged by linkage above {ACCEPTABLE:.4f} (share linked at "
             "first guess). 'certainty': inductive Venn-Abers on the top-1 margin alone; 'alone': the learned "
             "statistic over the member's own attack; 'panel': the audit's probability, which also reads its peers' "
             "attacks.", "",
             "| attacker | peers | first guess (withheld) | AUC certainty / alone / panel "
             "| ECE certainty / alone / panel "
             "| flagged by linkage certainty / alone / panel | linked among flagged certainty / alone / panel "
             "| linkage fit |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        c, a, m = r["certainty"], r["alone"], r["audit"]
        lines.append(f"| {r['attacker']} | {', '.join(r['peers']) or '-'} | {r['first_guess']:.1%} | "
                     f"{c['auc']:.3f} / {a['auc']:.3f} / **{m['auc']:.3f}** | "
                     f"{c['ece']:.3f} / {a['ece']:.3f} / **{m['ece']:.3f}** | "
                     f"{c['flagged']:,} / {a['flagged']:,} / {m['flagged']:,} | "
                     f"{c['linked_among_flagged']:.1%} / {a['linked_among_flagged']:.1%} / "
                     f"**{m['linked_among_flagged']:.1%}** | {r['linkage_s']:.1f} s |")
    lines += ["", "Deciles of the audit's probability (mean predicted / observed first-guess rate):", ""]
    for r in rows:
        cells = ", ".join(f"{p:.2f}/{o:.2f}" for p, o, _ in r["audit"]["deciles"])
        lines.append(f"- {r['attacker']}: {cells}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", default="tfidf,lexical_fusion,learned,dense")
    parser.add_argument("--withheld", type=float, default=0.4)
    args = parser.parse_args()
    if not (BLOG / "index.tsv").is_file():
        log(f"the Blog Authorship slice is not available (looked in {BLOG}); nothing measured")
        return 0
    log(f"audit by {args.attackers}")
    rows, panel_s = measure(args.attackers.split(","), args.withheld)
    for r in rows:
        log(f"{r['attacker']}: AUC {r['certainty']['auc']:.3f} / {r['alone']['auc']:.3f} / {r['audit']['auc']:.3f}, "
            f"ECE {r['audit']['ece']:.3f}, linked among flagged {r['certainty']['linked_among_flagged']:.1%} / "
            f"{r['alone']['linked_among_flagged']:.1%} / {r['audit']['linked_among_flagged']:.1%}")
    print(report(rows, args.withheld, panel_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
