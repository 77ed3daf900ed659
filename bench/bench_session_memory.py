"""A dashboard session's memory across successive audits: the process's resident memory after each of three audits
of one release, in one session.

The release is synthetic (``cpa_core.io.synthetic``: by default 6,447 documents about 2,000 registry people, the
sample configuration, the whole registry as the pool). One session calibrates it at K1, K2 and K3 in turn, and after
each calibration opens Explore, Flagged documents and Report & export, as a curator would; the figure after an audit
is the process's RSS then (nothing collected or trimmed by the measurement), with its peak so far (``VmHWM``). A
session that keeps only its current audit stays near the first figure; one that keeps every audit grows by one
audit's ranked candidates at each.

Two ways to run the session:

- default: Streamlit's AppTest in a fresh subprocess (``bench_session_memory.py WORKER ...``), the data set given to
  the session as the Data page would load it (no upload); the process measured is the dashboard's;
- ``--browser``: ``streamlit run app.py`` driven by headless Chromium (upload, threat model, calibrate, the pages), the
  server process measured. Needs Chromium and chromedriver.

Usage: ``.venv/bin/python bench/bench_session_memory.py [WORKDIR] [--documents 6447] [--people 2000]
[--levels K1,K2,K3] [--browser] [--json]``. Prints markdown rows for ``bench/RESULTS.md`` with the machine's load,
or (``--json``) one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))

LEVELS = ("K1", "K2", "K3")
PAGES = ("explore", "flagged", "report")
SEED = 20261126


def memory_mib(pid: int | None = None) -> dict[str, float]:
    """Resident memory of process ``pid`` (this one by default), now and its peak, in MiB: ``/proc/<pid>/status``
    (``VmRSS``, ``VmHWM``), else psutil (no peak)."""
    try:
        status = Path(f"/proc/{pid or 'self'}/status").read_text()
    except OSError:
        import psutil

        return {"rss": psutil.Process(pid).memory_info().rss / 2**20, "peak": float("nan")}
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {name: int(fields[key].split()[0]) / 1024 for name, key in (("rss", "VmRSS"), ("peak", "VmHWM"))}


def dataset(workdir: Path, documents: int, people: int) -> Path:
    """The synthetic release's folder (``documents.csv``, ``registry.csv``), made once."""
    from cpa_core.io.synthetic import generate_sample_data

    folder = workdir / f"session-d{documents}-p{people}"
    if not (folder / "documents.csv").exists():
        generate_sample_data(folder, seed=SEED, n_people=people, n_documents=documents)
    return folder


def live_audits() -> int:
    """Distinct audits whose results are still alive in this process (after a collection)."""
    from cpa_core.audit.results import AuditResult

    gc.collect()
    return len({id(result.test_split.table.candidates) for result in gc.get_objects()
                if isinstance(result, AuditResult)})


def worker(folder: str, levels: str) -> dict:
    """One AppTest session in this process: the data loaded, then each level calibrated and its pages opened."""
    from apptest import assert_clean, new_app

    from cpa_core.audit.project import load_config
    from cpa_core.io.tables import load_documents, load_registry
    from cpa_ui import nav
    from cpa_ui.attackers import default_threat
    from cpa_ui.cache import fingerprint
    from cpa_ui.state import DataSet

    pages = {"explore": nav.EXPLORE, "flagged": nav.FLAGGED, "report": nav.REPORT}
    project = load_config(REPO_ROOT / "sample_data" / "audit.toml")
    documents = load_documents(Path(folder) / "documents.csv")
    registry = load_registry(Path(folder) / "registry.csv")
    data = DataSet(documents, registry, project, "upload", fingerprint(documents.sha256, registry.sha256), "group")
    at = new_app()
    at.session_state["cpa.data"] = data  # as the Data page adopts an upload
    at.session_state["cpa.threat"] = default_threat(data).alone("tfidf")  # one attacker: one audit per calibration
    del documents, registry, data
    at.run()
    assert_clean(at)
    rows = {"opened": memory_mib(), "audits": []}
    for level in levels.split(","):
        at.switch_page(nav.THREAT).run()
        at.radio(key="w.threat.knowledge").set_value(level).run()
        at.switch_page(nav.CALIBRATE).run()
        start = time.perf_counter()
        at.button(key="calibrate.run").click().run()
        assert_clean(at)
        seconds = time.perf_counter() - start
        for page in PAGES:
            at.switch_page(pages[page]).run()
            assert_clean(at)
        rows["audits"].append({"level": level, "seconds": seconds, **memory_mib()})
    rows["live_audits"] = live_audits()
    return rows


def apptest_session(folder: Path, levels: str) -> dict:
    """:func:`worker` in a fresh process, with an audit history of its own."""
    with tempfile.TemporaryDirectory(prefix="cpa-session-") as history:
        env = {**os.environ, "CPA_HISTORY": str(Path(history) / "history.sqlite")}
        done = subprocess.run([sys.executable, __file__, "WORKER", str(folder), levels], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the session failed (status {done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def browser_session(folder: Path, levels: str) -> dict:
    """The same session on ``streamlit run app.py`` in headless Chromium; the server's memory."""
    from bench_slider import server_memory
    from browser import calibrate, chromium, click, dashboard, go, settled, text_present, upload, wait

    titles = {"explore": ("Explore", "Across confidence levels"), "flagged": ("Flagged documents", "Drill-down"),
              "report": ("Report & export", "For the privacy officer")}
    with tempfile.TemporaryDirectory(prefix="cpa-session-") as history:
        os.environ["CPA_HISTORY"] = str(Path(history) / "history.sqlite")  # the server inherits it
        with dashboard() as url, chromium() as driver:
            driver.get(url)
            wait(driver, text_present("Conformal Privacy Auditing"), "the home page")
            upload(driver, [folder / "documents.csv", folder / "registry.csv",
                            REPO_ROOT / "sample_data" / "audit.toml"], timeout=600)
            rows = {"opened": server_memory(url), "audits": []}
            for level in levels.split(","):
                go(driver, "Threat model", "Knowledge level")
                click(driver, f"//label[.//p[text()='{level}']]", f"the knowledge level {level}")
                wait(driver, settled, "the threat model to settle")
                start = time.perf_counter()
                calibrate(driver, timeout=900)
                seconds = time.perf_counter() - start
                for page in PAGES:
                    go(driver, *titles[page])
                rows["audits"].append({"level": level, "seconds": seconds, **server_memory(url)})
    return rows


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "WORKER":
        print(json.dumps(worker(*sys.argv[2:])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", default="/tmp/cpa_bench_session")
    parser.add_argument("--documents", type=int, default=6447)
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--levels", default=",".join(LEVELS), help="the knowledge levels calibrated in turn")
    parser.add_argument("--browser", action="store_true", help="the real server in headless Chromium")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of markdown")
    args = parser.parse_args()
    if args.browser:
        from browser import exit_if_missing

        exit_if_missing()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    folder = dataset(workdir, args.documents, args.people)
    before = os.getloadavg()
    rows = (browser_session if args.browser else apptest_session)(folder, args.levels)
    rows.update(documents=args.documents, people=args.people, load=[before[0], os.getloadavg()[0]],
                way="browser" if args.browser else "apptest")
    if args.json:
        print(json.dumps(rows))
        return 0
    audits = rows["audits"]
    first, last = audits[0]["rss"], audits[-1]["rss"]
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, {os.cpu_count()} cores, "
          f"{args.documents:,} documents x {args.people:,} people, {rows['way']}")
    print("| session | " + " | ".join(f"after audit {i + 1} ({a['level']})" for i, a in enumerate(audits))
          + " | growth after the first | peak | load before, after |")
    print("|---|" + "---:|" * (len(audits) + 3))
    print(f"| {rows['way']} | " + " | ".join(f"{a['rss']:,.0f} MiB" for a in audits)
          + f" | {100 * (last - first) / first:+.0f} % | {max(a['peak'] for a in audits):,.0f} MiB"
          + f" | {rows['load'][0]:.2f}, {rows['load'][1]:.2f} |")
    if "live_audits" in rows:
        print(f"audits alive at the end: {rows['live_audits']}; app opened at {rows['opened']['rss']:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
