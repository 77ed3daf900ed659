"""A dashboard session keeps one audit in memory: three audits of a largish release in one session, each followed by
the Explore, Flagged documents and Report pages (Streamlit's AppTest in a fresh process, run by
``bench/bench_session_memory.py``), and the process's resident memory after the third is within 30 % of after the
first, with one audit alive at the end.

When every audit stayed in memory (the result cache held eight, each replaced audit's result also stayed with the
variables of the pages that showed it), the same session grew by about 90 % (6,000 documents x 2,000 profiles: 615,
932, 1,180 MiB after each audit, three audits alive); keeping only the current one, it grows by about 12 % (609, 657,
683 MiB: the allocator's fragmentation, bounded: a fourth to sixth audit stay near the third)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO_ROOT

DOCUMENTS, PEOPLE = 6000, 2000
MAX_GROWTH = 0.30  # of the RSS after the first audit


def test_three_audits_in_one_session_keep_one_audit_in_memory(tmp_path):
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "bench_session_memory.py"), str(tmp_path),
                           "--documents", str(DOCUMENTS), "--people", str(PEOPLE), "--json"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    session = json.loads(done.stdout.strip().splitlines()[-1])
    rss = [audit["rss"] for audit in session["audits"]]
    assert [audit["level"] for audit in session["audits"]] == ["K1", "K2", "K3"]
    assert rss[2] <= rss[0] * (1 + MAX_GROWTH), (
        f"RSS after each audit {[round(r) for r in rss]} MiB: grew by {100 * (rss[2] / rss[0] - 1):.0f} % after the "
        f"first (at most {100 * MAX_GROWTH:.0f} %)")
    assert session["live_audits"] == 1, session
