"""Shared fixtures: paths, a command-line runner (subprocess and in-process) and toy data writers.

The ``cpa`` process imports scikit-learn, which costs a few seconds of CPU per process; test modules
that run many commands submit them all at once to :func:`cli_pool` so that they overlap.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DIR = REPO_ROOT / "sample_data"
SAMPLE_FILES = ("documents.csv", "registry.csv", "audit.toml")
SHARED_DATASETS = REPO_ROOT.parent / "shared" / "datasets"
CLI_TIMEOUT_S = 300
pytest_plugins = ("apptest",)  # the AppTest fixtures (a calibrated session, downloads) for every test module

INTEGRATION = Path(__file__).resolve().parent / "integration"
"""The integration tier (subprocesses, AppTest, a browser, statistical coverage over many splits, a real LLM server or
model, shared datasets): every test under ``tests/integration``, and only those. ``make test-fast`` leaves the folder
out; ``make test`` runs everything."""


def pytest_collection_modifyitems(config, items):
    """Mark the integration tier by its folder (``pytest -m "not integration"`` equals ``--ignore tests/integration``)."""
    for item in items:
        if INTEGRATION in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.integration)


@dataclass(frozen=True)
class CliResult:
    """What one ``cpa`` invocation returned and printed."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def describe(self) -> str:
        return (f"cpa {' '.join(self.args)}\nexit status {self.returncode}\n--- stdout ---\n{self.stdout[-3000:]}"
                f"\n--- stderr ---\n{self.stderr[-3000:]}")


def _env() -> dict:
    env = dict(os.environ)
    env.update({"PYTHONIOENCODING": "utf-8", "PYTHONUTF8": "1", "COLUMNS": "200", "PYTHONWARNINGS": "ignore"})
    return env


def run_cli(*args, cwd: str | Path | None = None, timeout: float = CLI_TIMEOUT_S,
            console_script: bool = False) -> CliResult:
    """Run ``cpa ARGS`` in a fresh process (``python -m cpa_core.cli``, or the ``cpa`` script)."""
    args = tuple(str(a) for a in args)
    command = [sys.executable, "-m", "cpa_core.cli", *args]
    if console_script:
        script = Path(sys.executable).with_name("cpa")
        found = str(script) if script.is_file() else shutil.which("cpa")
        if found is None:
            pytest.skip("the cpa console script is not installed next to this Python")
        command = [found, *args]
    done = subprocess.run(command, cwd=str(cwd or REPO_ROOT), capture_output=True, text=True, encoding="utf-8",
                          errors="replace", timeout=timeout, env=_env(), stdin=subprocess.DEVNULL)
    return CliResult(args, done.returncode, done.stdout, done.stderr)


def run_cli_inprocess(*args) -> CliResult:
    """Run ``cpa_core.cli.main(ARGS)`` in this process, capturing what it prints.

    Behaves like the process would: ``SystemExit`` gives its status; an uncaught exception gives
    status 1 and a traceback on stderr (so "no Traceback" checks fail as they would for a process).
    """
    from cpa_core.cli.main import main

    args = tuple(str(a) for a in args)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as stop:
            code = stop.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if isinstance(code, str):
                err.write(code + "\n")
        except Exception:  # a bug: the real process would print a traceback
            err.write(traceback.format_exc())
            status = 1
    return CliResult(args, int(status), out.getvalue(), err.getvalue())


class CliPool:
    """Starts ``cpa`` processes concurrently; each ``submit`` returns a future of a :class:`CliResult`."""

    def __init__(self, workers: int):
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cpa-cli")

    def submit(self, *args, **kwargs) -> "Future[CliResult]":
        return self._executor.submit(run_cli, *args, **kwargs)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session", autouse=True)
def audit_history(tmp_path_factory) -> Path:
    """Every audit the tests run (in this process, in ``cpa`` processes, in the dashboard) is recorded in a
    temporary audit history, never in the user's."""
    path = tmp_path_factory.mktemp("history") / "history.sqlite"
    previous = os.environ.get("CPA_HISTORY")
    os.environ["CPA_HISTORY"] = str(path)
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)  # its snapshots hold the attacked texts
    if previous is None:
        os.environ.pop("CPA_HISTORY", None)
    else:
        os.environ["CPA_HISTORY"] = previous


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    return SHARED_DATASETS


def _wait_for_sample_data(seconds: float = 300.0) -> None:
    """The sample data is produced by another process of the project: give it a few minutes."""
    deadline = time.monotonic() + seconds
    waited = False
    while not all((SAMPLE_DIR / f).is_file() and (SAMPLE_DIR / f).stat().st_size > 0 for f in SAMPLE_FILES):
        if time.monotonic() > deadline:
            missing = [f for f in SAMPLE_FILES if not (SAMPLE_DIR / f).is_file()]
            pytest.fail(f"sample data missing from {SAMPLE_DIR}: {', '.join(missing)} "
                        "(set CPA_TEST_WAIT_FOR_SAMPLE_S to wait for a generator still running)")
        time.sleep(5)
        waited = True
    if waited:
        time.sleep(1.0)  # let the writer finish the last file


@pytest.fixture(scope="session")
def sample_paths() -> dict[str, Path]:
    """``{"documents": ..., "registry": ..., "config": ...}`` of the sample data in the repository."""
    wait = float(os.environ.get("CPA_TEST_WAIT_FOR_SAMPLE_S", "0"))
    _wait_for_sample_data(wait)
    return {"documents": SAMPLE_DIR / "documents.csv", "registry": SAMPLE_DIR / "registry.csv",
            "config": SAMPLE_DIR / "audit.toml"}


@pytest.fixture(scope="session")
def cli():
    """``cli(*args)``: run ``cpa`` in a subprocess and return a :class:`CliResult`."""
    return run_cli


@pytest.fixture(scope="session")
def cli_inprocess():
    """``cli_inprocess(*args)``: run ``cpa_core.cli.main`` in this process and return a :class:`CliResult`."""
    return run_cli_inprocess


@pytest.fixture(scope="session")
def cli_pool():
    pool = CliPool(max(2, min(4, os.cpu_count() or 2)))
    yield pool
    pool.shutdown()


# --------------------------------------------------------------------------------------------------
# toy data

TOY_CITIES = ("avonford", "brightwater", "coldharbour", "dunmere", "elmstead")
TOY_JOBS = ("baker", "carpenter", "dentist", "engineer", "florist", "glazier")
TOY_WORDS = ("amber", "basalt", "cobalt", "delta", "ember", "fjord", "granite", "harbour", "indigo", "juniper",
             "kestrel", "lantern", "meadow", "nectar", "onyx", "pebble", "quartz", "raven", "saffron", "thistle",
             "umber", "violet", "willow", "xenon", "yarrow", "zephyr")


def toy_frames(n_people: int = 12, docs_per_person: int = 4, n_outsiders: int = 0, seed: int = 0,
               groups: tuple[str, ...] = ("g1", "g2")) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A small deterministic registry and documents about its people.

    Registry fields: ``city``, ``occupation`` (coarse), ``keywords`` (person-specific words) and
    ``secret`` (a unique token per person that no document mentions). Each document mentions the
    person's city, occupation and some of their keywords. ``n_outsiders`` extra documents are about
    people absent from the registry (ids ``X...``).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    people = []
    for i in range(n_people):
        words = [TOY_WORDS[j] for j in rng.choice(len(TOY_WORDS), size=4, replace=False)]
        people.append({"identity_id": f"P{i:03d}", "city": TOY_CITIES[i % len(TOY_CITIES)],
                       "occupation": TOY_JOBS[i % len(TOY_JOBS)], "keywords": " ".join(words),
                       "secret": f"secrettoken{i:03d}"})
    registry = pd.DataFrame(people)
    rows = []
    subjects = [p for p in people for _ in range(docs_per_person)]
    subjects += [{"identity_id": f"X{i:03d}", "city": TOY_CITIES[i % len(TOY_CITIES)],
                  "occupation": TOY_JOBS[(i + 1) % len(TOY_JOBS)], "keywords": "lorem ipsum dolor sit"}
                 for i in range(n_outsiders)]
    for k, person in enumerate(subjects):
        words = person["keywords"].split()
        picked = [words[j] for j in sorted(rng.choice(len(words), size=2, replace=False))]
        rows.append({"doc_id": f"D{k:04d}",
                     "text": f"The {person['occupation']} from {person['city']} mentioned {picked[0]} and {picked[1]} "
                             f"during visit number {k}.",
                     "identity_id": person["identity_id"], "group": groups[k % len(groups)]})
    return pd.DataFrame(rows), registry


def write_table(frame: pd.DataFrame, path: Path) -> Path:
    """Write a frame as CSV, JSONL or Parquet according to the suffix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False, encoding="utf-8", lineterminator="\n")
    elif path.suffix in (".jsonl", ".ndjson"):
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif path.suffix in (".parquet", ".pq"):
        frame.to_parquet(path, index=False)
    else:
        raise ValueError(path.suffix)
    return path


TOY_CONFIG = """\
[knowledge.K1]
fields = ["city", "occupation"]

[knowledge.K3]
fields = ["city", "occupation", "keywords"]

[audit]
knowledge = "K3"
confidence = [0.8, 0.9]
"""


@pytest.fixture
def toy_data(tmp_path):
    """``toy_data(**toy_frames_kwargs, fmt="csv")`` writes documents, registry and a config in tmp_path."""

    def make(fmt: str = "csv", **kwargs) -> dict[str, Path]:
        documents, registry = toy_frames(**kwargs)
        folder = tmp_path / "toy"
        config = folder / "audit.toml"
        folder.mkdir(parents=True, exist_ok=True)
        config.write_text(TOY_CONFIG, encoding="utf-8")
        return {"documents": write_table(documents, folder / f"documents.{fmt}"),
                "registry": write_table(registry, folder / f"registry.{fmt}"), "config": config}

    return make
