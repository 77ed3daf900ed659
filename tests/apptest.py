"""The dashboard under Streamlit's AppTest: a fresh app, what an element shows, the calibration every result page
needs, and the fixtures of a calibrated session (shared by the app tests of ``tests/integration``)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from cpa_ui import nav

REPO_ROOT = Path(__file__).resolve().parents[1]
APP = str(REPO_ROOT / "app.py")
TIMEOUT_S = 600  # per script run: an attack of the sample on a loaded 2-core machine (load 10) takes minutes
PAGES = [spec.path for spec in nav.WORKFLOW]
RESULT_PAGES = [nav.EXPLORE, nav.FLAGGED, nav.REPORT]


def shown(element) -> str:
    """What a markdown element shows: the text with the escapes of data-derived values removed."""
    return re.sub(r"\\(.)", r"\1", element.value)


def new_app():
    from streamlit.testing.v1 import AppTest
    return AppTest.from_file(APP, default_timeout=TIMEOUT_S)


def assert_clean(at) -> None:
    """No exception element, and no error message, on the page."""
    assert not at.exception, [shown(e) for e in at.exception]
    assert not at.error, [shown(e) for e in at.error]


def metric(at, label: str) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert values, f"no metric '{label}' among {[m.label for m in at.metric]}"
    return values[0]


def choose_attackers(at, *names: str):
    """Declare exactly the attackers ``names`` on the Threat model page (one: a single attacker's audit)."""
    at.switch_page(nav.THREAT).run()
    at.multiselect(key="w.threat.attackers").set_value(list(names)).run()
    return at


def calibrate(at, knowledge: str = "K2", attackers: tuple[str, ...] | None = ("tfidf",)):
    """Calibrate under ``knowledge`` with ``attackers`` (``None``: the ones declared now, by default the default
    panel)."""
    if attackers is not None:
        choose_attackers(at, *attackers)
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.knowledge").set_value(knowledge).run()
    assert_clean(at)
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    return at


@pytest.fixture(scope="module")
def sample(sample_paths) -> dict:
    """What the sample files declare, so that the tests follow the sample data when it is regenerated."""
    from cpa_core.audit.project import load_config

    audit = load_config(sample_paths["config"]).audit
    return {"documents": len(pd.read_csv(sample_paths["documents"])),
            "profiles": len(pd.read_csv(sample_paths["registry"])), "seed": audit["seed"],
            # the release protocol: every (labelled) sample document is certified, and calibrates unless it is in the
            # temperature's tuning fold (a fifth of them, at most 200)
            "n_cal": len(pd.read_csv(sample_paths["documents"])) - min(200, round(len(pd.read_csv(
                sample_paths["documents"])) / 5)), "n_test": len(pd.read_csv(sample_paths["documents"])),
            "confidences": [float(c) for c in audit["confidence"]]}


@pytest.fixture(scope="module")
def calibrated(sample_paths):
    """One session with the sample data calibrated under K2 (shared by the read-only page checks)."""
    return calibrate(new_app().run())


@pytest.fixture
def downloads(monkeypatch):
    """What the page hands to download buttons: ``{file_name: bytes or callable}``."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    seen: dict[str, object] = {}
    add, add_deferred = MediaFileManager.add, MediaFileManager.add_deferred

    def record(self, path_or_data, mimetype, coordinates, file_name=None, is_for_static_download=False):
        if file_name:
            seen[file_name] = path_or_data
        return add(self, path_or_data, mimetype, coordinates, file_name, is_for_static_download)

    def record_deferred(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        if file_name:
            seen[file_name] = data_callable
        return add_deferred(self, data_callable, mimetype, coordinates, file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add", record)
    monkeypatch.setattr(MediaFileManager, "add_deferred", record_deferred)
    return seen
