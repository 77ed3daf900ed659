"""The dashboard's pure modules (figures, analysis, text, help) import without Streamlit: checked in a fresh
process (the figures themselves: tests/ui/test_figures.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_pure_modules_do_not_import_streamlit():
    code = ("import sys; import cpa_ui.figures, cpa_ui.analysis, cpa_ui.text; "
            "assert 'streamlit' not in sys.modules, 'streamlit imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
