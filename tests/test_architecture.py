"""The layers of the code: each package imports only the layers below it (pyproject.toml ``[tool.importlinter]``).

Module-level, function-local and type-checking imports count alike. The contracts are checked on the code as
it is, and shown to fail on a copy of it with one upward import added.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": str(LINT_IMPORTS.parent)}, timeout=120)


def test_every_import_follows_the_declared_layers():
    result = lint(REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("module, line, expected", [
    ("cpa_core/conformal/scores.py", "from cpa_core.audit.pipeline import run_audit\n",
     "cpa_core.conformal is not allowed to import cpa_core.audit"),
    ("cpa_core/io/tables.py", "def _f():\n    from cpa_core.attack.candidates import CandidateTable\n",
     "cpa_core.io is not allowed to import cpa_core.attack"),
    ("cpa_core/report/metrics.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from cpa_core.store.records import write_audit\n", "cpa_core.report is not allowed to import cpa_core.store"),
    ("cpa_core/audit/results.py", "import streamlit\n", "cpa_core is not allowed to import streamlit"),
    ("cpa_core/conformal/calibration.py", "import pandas\n", "cpa_core.conformal is not allowed to import pandas"),
    ("cpa_core/attack/base.py", "def _g():\n    from cpa_core.attack.attackers import tfidf\n",
     "No cycles are allowed in cpa_core.attack"),
])
def test_an_import_against_the_layers_breaks_a_contract(tmp_path, module, line, expected):
    for name in ("cpa_core", "cpa_ui"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / module, "a") as handle:
        handle.write("\n" + line)
    result = lint(tmp_path)
    assert result.returncode != 0
    assert expected in result.stdout, result.stdout


def test_cpa_core_never_imports_streamlit_when_run():
    code = ("import sys, cpa_core, cpa_core.cli, cpa_core.report.stress, cpa_core.store.records, cpa_core.report.html; "
            "sys.exit(1 if any(m == 'streamlit' or m.startswith('streamlit.') for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT).returncode == 0


def test_the_conformal_core_loads_alone():
    """``import cpa_core.conformal.calibration`` loads the common ground and the conformal core, nothing else of
    the package (the public names of ``cpa_core`` are imported on first use)."""
    code = ("import sys, cpa_core.conformal.calibration; "
            "print(sorted(m for m in sys.modules if m.startswith('cpa_core')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)
    assert {m.split(".")[1] for m in loaded if "." in m} == {"common", "conformal"}, loaded


def test_public_api_is_curated_and_lazy():
    import cpa_core

    for name in cpa_core.__all__:
        assert hasattr(cpa_core, name), name
    with pytest.raises(AttributeError):
        cpa_core.no_such_name
