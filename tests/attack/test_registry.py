"""Adding an attacker is one module plus one registry line.

This file *is* that module: it declares a small word-overlap attacker and registers it, then runs it
through the TOML reader, the command line and the dashboard's form without any other change.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pytest
from apptest import shown
from conftest import REPO_ROOT, run_cli_inprocess

from cpa_core.attack.base import AttackerBase
from cpa_core.attack.candidates import CandidateTable, rank_by_similarity
from cpa_core.attack.registry import register, unregister
from cpa_core.attack.spec import AttackerSpec
from cpa_core.audit.project import parse_config
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.io.knowledge import profile_texts


@dataclass
class OverlapAttacker(AttackerBase):
    """Ranks profiles by how many distinct words of at least ``min_word_length`` letters they share
    with the document; weights are a softmax of that count at ``temperature``."""

    min_word_length: int = 3
    temperature: float = 1.0
    top_k: int | None = None
    name: str = "overlap"

    def params(self) -> dict:
        return {"attacker": self.name, "min_word_length": self.min_word_length, "temperature": self.temperature,
                "top_k": self.top_k}

    def words(self, text: str) -> set[str]:
        return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= self.min_word_length}

    def attack(self, doc_ids, texts, registry, level, progress=None) -> CandidateTable:
        profiles = [self.words(t) for t in profile_texts(registry, level)]
        counts = np.array([[len(self.words(t) & p) for p in profiles] for t in texts], dtype=float)
        candidates, weights, tail = rank_by_similarity(lambda a, b: counts[a:b], len(texts), len(profiles),
                                                       self.top_k, self.temperature, 256, progress)
        return CandidateTable(np.asarray(doc_ids, dtype=object), candidates, weights,
                              np.full(len(texts), candidates.shape[1]), registry.ids, tuple(texts), tail_mass=tail)


SPEC = AttackerSpec(
    name="overlap", label="Word overlap",
    description="counts the words each registry profile shares with the released text",
    params=(Param("min_word_length", "int", 3, "Shortest word", "Shorter words are ignored.", min=1,
                  option="--min-word-length"),
            Param("temperature", "float", 1.0, "Softmax temperature T", "Weights are softmax(count / T).", above=0,
                  option="--temperature")),
    build=lambda params, context: OverlapAttacker(**params, top_k=context.top_k),
)


@pytest.fixture
def overlap():
    register(SPEC)  # the one line a module of the package would add to cpa_core/attackers/registry.py
    yield SPEC
    unregister(SPEC.name)


def test_the_toml_schema_follows_the_spec(overlap):
    project = parse_config("[attacker.overlap]\nmin_word_length = 4\n")
    assert project.attackers["overlap"] == {"min_word_length": 4}
    with pytest.raises(ConfigError, match=r"\[attacker.overlap\] min_word_length: expected an integer at least 1"):
        parse_config("[attacker.overlap]\nmin_word_length = 0\n")
    with pytest.raises(ConfigError, match="min_word_length, temperature"):
        parse_config("[attacker.overlap]\nmin_length = 4\n")


def test_the_command_line_runs_it_with_its_own_option(overlap, sample_paths, tmp_path):
    out = tmp_path / "overlap"
    result = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                               "--config", sample_paths["config"], "--attacker", "overlap", "--min-word-length", 4,
                               "--temperature", 0.5, "--out", out)
    assert result.returncode == 0, result.describe()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert summary["attacker"] == "overlap"
    assert manifest["attacker"] == {"attacker": "overlap", "min_word_length": 4, "temperature": 0.5, "top_k": None}
    assert summary["confidence"]["0.9"]["coverage"] > 0.5  # the sample documents share words with their people


def test_the_command_line_checks_its_option(overlap, sample_paths, tmp_path):
    common = ("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
              "--config", sample_paths["config"], "--out", tmp_path / "x")
    bad = run_cli_inprocess(*common, "--attacker", "overlap", "--min-word-length", 0)
    assert bad.returncode == 2 and len(bad.stderr_lines) == 1
    assert "--min-word-length: expected an integer at least 1, found 0" in bad.stderr
    elsewhere = run_cli_inprocess(*common, "--attacker", "tfidf", "--min-word-length", 4)
    assert elsewhere.returncode == 2 and "applies to the overlap attacker" in elsewhere.stderr


@pytest.mark.integration
def test_the_dashboard_form_runs_it(overlap, sample_paths):
    from streamlit.testing.v1 import AppTest

    from cpa_ui import nav

    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=120).run()
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.attacker").set_value("overlap").run()
    assert "Word overlap" in at.radio(key="w.threat.attacker").options
    at.number_input(key="w.threat.param.overlap.min_word_length").set_value(4).run()
    assert not at.exception and not at.error, [shown(e) for e in at.error]
    assert any("counts the words each registry profile shares" in shown(i) for i in at.info)
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert not at.exception and not at.error
    config = at.session_state["cpa.run"].result.config
    assert config.attacker.name == "overlap" and config.attacker.params == {"min_word_length": 4, "temperature": 1.0}
