"""The declared configuration: validation, the configuration id (stable, and changed by any declared field), the
declared defaults (``AUDIT_DEFAULTS``, AuditConfig's and the release policy's fields), the policy it flags by, and
the data it is bound to."""

from __future__ import annotations

from dataclasses import MISSING, fields, replace

import pytest
from tables import LEVEL, toy_attacker

from cpa_core.audit.configuration import AUDIT_DEFAULTS, AUDIT_PARAMS, AttackerConfig, AuditConfig
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel

SHA_A, SHA_B = "a" * 64, "b" * 64


def split_config(**changes) -> AuditConfig:
    values = dict(knowledge=LEVEL, attacker=AttackerConfig("tfidf", details={"attacker": "tfidf", "temperature": 0.5}),
                  protocol="split", n_cal=10, n_test=20, confidences=(0.8, 0.9))
    return AuditConfig(**{**values, **changes})


def test_config_validation():
    with pytest.raises(ConfigError, match="needs candidate weights"):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker("imported", weight_kind="rank"), score="aps")
    with pytest.raises(ConfigError, match="scores candidates itself"):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker("profile", required_score="given"), score="aps")
    with pytest.raises(ConfigError):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), confidences=(1.2,))
    with pytest.raises(ConfigError):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), miss_policy="ignore")
    a = AuditConfig(knowledge=LEVEL, attacker=toy_attacker("x"), seed=1)
    b = AuditConfig(knowledge=LEVEL, attacker=toy_attacker("x"), seed=2)
    assert a.config_id != b.config_id and a.config_id == AuditConfig(knowledge=LEVEL, attacker=toy_attacker("x"), seed=1).config_id


def test_the_id_is_stable():
    config = split_config()
    assert len(config.config_id) == 12 and int(config.config_id, 16) >= 0  # twelve hexadecimal digits
    assert split_config().config_id == config.config_id  # built again
    assert replace(config).config_id == config.config_id
    # the attacker's details in another order: the same declaration
    same = split_config(attacker=AttackerConfig(
        "tfidf", details={"temperature": 0.5, "attacker": "tfidf"}))
    assert same.config_id == config.config_id


# every declared field, changed to another valid value
OTHER_VALUES = {
    "knowledge": KnowledgeLevel("toy", ("field", "other")),
    "attacker": AttackerConfig("tfidf", details={"attacker": "tfidf", "temperature": 0.25}),
    "score": "rank",
    "confidences": (0.8, 0.95),
    "protocol": "release",
    "n_cal": 11,
    "n_test": 21,
    "seed": 1,
    "group_column": "group",
    "certainty_bins": 2,
    "top_k": 50,
    "miss_policy": "exclude",
    "flag_below": 5,
    "leakage_threshold": 0.2,
    "acceptable_linkage": 0.05,
    "flag_confidence": 0.9,
    "data": {"documents": {"sha256": SHA_A, "rows": 30}},
    "placeholders": (r"\[NAME\]",),
}


@pytest.mark.parametrize("name", sorted(OTHER_VALUES))
def test_the_id_changes_with_any_declared_field(name):
    assert set(OTHER_VALUES) == {f.name for f in fields(AuditConfig)}  # no field is left out of the id
    config = split_config()
    changes = {name: OTHER_VALUES[name]}
    if name == "protocol":  # the release protocol has no calibration and test sizes
        changes.update(n_cal=None, n_test=None)
    other = replace(config, **changes)
    assert other.config_id != config.config_id, name
    assert replace(other, **{key: getattr(config, key) for key in changes}).config_id == config.config_id


def test_declaring_the_default_acceptable_linkage_keeps_the_id():
    config = split_config()
    assert config.policy.linkage_rate == pytest.approx(1 / config.flag_below)
    assert replace(config, acceptable_linkage=1 / config.flag_below).config_id == config.config_id
    assert replace(config, flag_below=5).policy.linkage_rate == pytest.approx(0.2)
    with pytest.raises(ConfigError, match="acceptable_linkage: expected a number greater than 0 and less than 1"):
        replace(config, acceptable_linkage=1.0)


def test_declaring_the_default_flagging_level_keeps_the_id():
    config = split_config()
    assert config.policy_confidence == 0.8  # the lowest audited level
    assert replace(config, flag_confidence=0.8).config_id == config.config_id
    assert replace(config, flag_confidence=0.9).config_id != config.config_id


def test_the_declared_defaults_are_the_configurations_and_the_policys():
    by_field = {"confidences": "confidence"}  # the [audit] key of a field, where the names differ
    declared = {f.name: f.default for f in fields(AuditConfig) if f.default is not MISSING}
    assert set(declared) == {"score", "confidences", "protocol", "n_cal", "n_test", "seed", "group_column",
                             "certainty_bins", "top_k", "miss_policy", "flag_below", "leakage_threshold",
                             "acceptable_linkage", "flag_confidence", "placeholders"}
    for name, default in declared.items():
        if name != "placeholders":  # the [evidence] table, not [audit]
            assert AUDIT_DEFAULTS[by_field.get(name, name)] == default, name
    policy = ReleasePolicy()
    assert (policy.flag_below, policy.leakage_threshold, policy.acceptable_linkage) == (
        AUDIT_DEFAULTS["flag_below"], AUDIT_DEFAULTS["leakage_threshold"], AUDIT_DEFAULTS["acceptable_linkage"])
    assert AUDIT_DEFAULTS == {param.name: param.default for param in AUDIT_PARAMS}
    # the defaults the parameters' help texts state
    assert (AUDIT_DEFAULTS["score"], AUDIT_DEFAULTS["protocol"], AUDIT_DEFAULTS["miss_policy"]) == (
        "aps", "release", "infinite")
    assert AUDIT_DEFAULTS["attacker"] == "tfidf" and AUDIT_DEFAULTS["flag_confidence"] is None


def test_the_protocols_own_settings_are_refused_elsewhere():
    with pytest.raises(ConfigError, match="n_cal and n_test belong to the split protocol"):
        split_config(protocol="release")
    with pytest.raises(ConfigError, match=r"flagging confidence 0.85 is not among the audited levels \['0.8', '0.9'\]"):
        split_config(flag_confidence=0.85)


def test_the_policy_and_a_curators_choice():
    config = split_config(flag_below=4, leakage_threshold=0.3)
    assert config.policy == ReleasePolicy(4, 0.3)
    chosen = config.with_policy(0.85, ReleasePolicy(6))
    assert chosen.confidences == (0.8, 0.85, 0.9) and chosen.flag_confidence == 0.85
    assert chosen.policy == ReleasePolicy(6, None) and chosen.policy_confidence == 0.85
    assert chosen.knowledge == config.knowledge and chosen.seed == config.seed and chosen != config
    again = config.with_policy(0.9, ReleasePolicy(4, 0.3))  # a level already audited is not added twice
    assert again.confidences == (0.8, 0.9) and again.flag_confidence == 0.9


def test_the_data_it_is_bound_to():
    config = split_config()
    bound = config.with_data({"documents": {"file": "docs.csv", "sha256": SHA_A, "rows": 30}})
    assert bound.data == {"documents": {"sha256": SHA_A, "rows": 30}}  # the file name is not declared
    assert bound.config_id != config.config_id
    assert bound.with_data({"documents": {"file": "renamed.csv", "sha256": SHA_A, "rows": 30}}) == bound
    with pytest.raises(ConfigError) as refused:
        bound.with_data({"documents": {"file": "other.csv", "sha256": SHA_B}})
    assert str(refused.value) == (f"the documents file other.csv has SHA-256 {'b' * 16}…, but the configuration was "
                                  f"declared for {'a' * 16}…: these are not the files it certifies")


def test_the_declared_attacker():
    attacker = AttackerConfig("tfidf", params={"temperature": 0.5}, details={"attacker": "tfidf", "top_k": 3})
    assert attacker.to_dict() == {"attacker": "tfidf", "top_k": 3}
    config = split_config(attacker=attacker)
    assert config.to_dict()["attacker"] == {"attacker": "tfidf", "top_k": 3}
    assert config.to_dict()["confidences"] == ["0.8", "0.9"] and config.to_dict()["flag_confidence"] == "0.8"
    assert "placeholders" not in config.to_dict()
