"""The attacker registry: a table that a loader fills with the built-in attackers, and what a spec's flags decide.

Adding an attacker is one module plus one registration: tests/overlap_attacker.py is that module; these tests run
it through the TOML reader and the command line's checks without any other change (a whole audit and the
dashboard's form: tests/integration/test_plugin_attacker.py).
"""

from __future__ import annotations

import pytest
from conftest import run_cli_inprocess
from overlap_attacker import registered_overlap  # noqa: F401 (the fixture overlap)

from cpa_core.attack.attackers import BUILTIN
from cpa_core.attack.attackers.forced_choice import ForcedChoiceAttacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.engine import shipped_attacker
from cpa_core.attack.registry import ATTACKERS, AttackerRegistry, attacker_specs, get_spec
from cpa_core.audit.project import parse_config
from cpa_core.common.errors import ConfigError


def test_the_loader_fills_the_table_once_on_first_use():
    calls = []

    def loader():
        calls.append(1)
        return BUILTIN[:2]

    table = AttackerRegistry(loader)
    assert calls == []  # nothing loaded before it is read
    assert [spec.name for spec in table.specs()] == ["tfidf", "dense"]
    assert table.get("dense") is BUILTIN[1] and calls == [1]
    table.register(BUILTIN[4])
    table.unregister("tfidf")
    assert [spec.name for spec in table.specs()] == ["dense", "imported"] and calls == [1]
    with pytest.raises(ConfigError, match="unknown attacker 'tfidf'; expected one of dense, imported"):
        table.get("tfidf")


def test_the_tool_offers_the_built_in_attackers_in_order():
    assert [spec.name for spec in attacker_specs()][:5] == ["tfidf", "dense", "forced_choice", "profile", "imported"]
    assert get_spec("tfidf") is ATTACKERS.get("tfidf") is BUILTIN[0]


def test_a_spec_flag_not_a_type_decides_what_runs_on_a_cluster():
    assert {spec.name for spec in BUILTIN if spec.runs_on_cluster} == {"tfidf", "dense", "lexical_fusion", "bm25"}
    fresh = shipped_attacker(TfidfAttacker(temperature=0.3), {})
    assert isinstance(fresh, TfidfAttacker) and fresh.temperature == 0.3
    with pytest.raises(ConfigError, match="the forced_choice attacker runs in this process only"):
        shipped_attacker(ForcedChoiceAttacker.__new__(ForcedChoiceAttacker), {})


def test_the_toml_schema_follows_the_spec(overlap):
    project = parse_config("[attacker.overlap]\nmin_word_length = 4\n")
    assert project.attackers["overlap"] == {"min_word_length": 4}
    with pytest.raises(ConfigError, match=r"\[attacker.overlap\] min_word_length: expected an integer at least 1"):
        parse_config("[attacker.overlap]\nmin_word_length = 0\n")
    with pytest.raises(ConfigError, match="min_word_length, temperature"):
        parse_config("[attacker.overlap]\nmin_length = 4\n")


def test_the_command_line_checks_its_option(overlap, sample_paths, tmp_path):
    common = ("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
              "--config", sample_paths["config"], "--out", tmp_path / "x")
    bad = run_cli_inprocess(*common, "--attacker", "overlap", "--min-word-length", 0)
    assert bad.returncode == 2 and len(bad.stderr_lines) == 1
    assert "--min-word-length: expected an integer at least 1, found 0" in bad.stderr
    elsewhere = run_cli_inprocess(*common, "--attacker", "tfidf", "--min-word-length", 4)
    assert elsewhere.returncode == 2 and "applies to the overlap attacker" in elsewhere.stderr
