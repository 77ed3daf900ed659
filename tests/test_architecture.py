"""The core stays importable without the UI."""

import subprocess
import sys


def test_cpa_core_never_imports_streamlit():
    code = ("import sys, cpa_core, cpa_core.cli, cpa_core.report.stress, cpa_core.store.records; "
            "sys.exit(1 if any(m == 'streamlit' or m.startswith('streamlit.') for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_public_api_is_curated():
    import cpa_core
    for name in cpa_core.__all__:
        assert hasattr(cpa_core, name), name
