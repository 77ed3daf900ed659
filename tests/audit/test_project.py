"""Knowledge levels and the audit configuration file (cpa_core.io.knowledge, cpa_core.audit.project)."""

from __future__ import annotations

import pytest
from conftest import toy_frames, write_table

from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import ProjectConfig, declare_audit, load_config, parse_config
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel, full_knowledge, profile_texts
from cpa_core.io.tables import load_documents, load_registry

LADDER = """\
[knowledge.K1]
fields = ["age_band", "city"]
description = "coarse fields"

[knowledge.K2]
fields = ["age_band", "city", "keywords"]

[knowledge.K3]
fields = ["age_band", "city", "keywords", "profile"]
query_mode = "direct"

[knowledge.clinical]
fields = ["keywords"]

[attacker.tfidf]
temperature = 0.5
min_df = 1

[audit]
knowledge = "K2"
confidence = [0.9, 0.95]
protocol = "split"
n_cal = 3
n_test = 3
seed = 7
flag_below = 5

[columns.documents]
text = "note"
"""

REGISTRY_CSV = (
    "identity_id,age_band,city,keywords,profile,secret\n"
    "A,30-39,York,beekeeping falconry,Runs the York bee club,zqxwvsecret\n"
    "B,40-49,Leeds,,Retired pilot,\n"
    "C,50-59,Hull,chess,Plays chess at the Hull library,other\n"
)


@pytest.fixture
def registry(tmp_path):
    path = tmp_path / "registry.csv"
    path.write_text(REGISTRY_CSV, encoding="utf-8")
    return load_registry(path)


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "audit.toml"
    path.write_text(LADDER, encoding="utf-8")
    return load_config(path)


def message_of(info) -> str:
    return str(info.value)


# ------------------------------------------------------------------------------------------ parsing

def test_ladder_is_parsed(project, tmp_path):
    assert project.file == str(tmp_path / "audit.toml")
    assert list(project.levels) == ["K1", "K2", "K3", "clinical"]
    assert project.levels["K1"] == KnowledgeLevel("K1", ("age_band", "city"), "direct", "coarse fields")
    assert project.levels["K2"].fields == ("age_band", "city", "keywords")
    assert project.levels["K3"].fields[-1] == "profile"
    assert all(level.query_mode == "direct" for level in project.levels.values())
    assert project.attackers == {"tfidf": {"temperature": 0.5, "min_df": 1}}
    assert project.audit["knowledge"] == "K2" and project.audit["confidence"] == (0.9, 0.95)
    assert project.columns == {"documents": {"text": "note"}}


def test_declared_audit_uses_the_file_and_overrides_win(project, registry):
    config, attacker = declare_audit(project, registry)
    assert config.knowledge.name == "K2"
    assert config.confidences == (0.9, 0.95)
    assert (config.n_cal, config.n_test, config.seed, config.flag_below) == (3, 3, 7, 5)
    assert attacker.temperature == 0.5 and config.attacker.params["temperature"] == 0.5
    assert config.attacker.details["temperature"] == 0.5 and config.attacker.name == "tfidf"
    config, attacker = declare_audit(project, registry, knowledge="K1", overrides={"seed": 11, "n_cal": None},
                                     attacker_params={"temperature": 2.0})
    assert config.knowledge.name == "K1" and config.seed == 11 and config.n_cal == 3
    assert attacker.temperature == 2.0


def test_custom_level_from_a_field_list(project, registry):
    config, _ = declare_audit(project, registry, fields=["city", "profile"])
    assert config.knowledge.name == "custom" and config.knowledge.fields == ("city", "profile")


def test_without_a_declared_level_the_attacker_sees_every_field(registry):
    config, _ = declare_audit(ProjectConfig(), registry)
    assert config.knowledge == full_knowledge(registry)
    assert config.knowledge.fields == ("age_band", "city", "keywords", "profile", "secret")


# ------------------------------------------------------------------------------------ profile texts

def test_profile_texts_join_allowed_fields_in_declared_order(project, registry):
    texts = profile_texts(registry, project.levels["K2"])
    assert texts == ["30-39. York. beekeeping falconry", "40-49. Leeds", "50-59. Hull. chess"]
    reordered = KnowledgeLevel("R", ("city", "age_band"))
    assert profile_texts(registry, reordered)[0] == "York. 30-39"


@pytest.mark.parametrize("level", ["K1", "K2", "K3", "clinical"])
def test_a_forbidden_field_never_reaches_the_profile_text(project, registry, level):
    texts = profile_texts(registry, project.levels[level])
    assert not any("zqxwvsecret" in t for t in texts)
    assert not any("other" in t for t in texts)


def test_a_forbidden_field_never_reaches_the_attacker_index(tmp_path, project, registry):
    docs_path = tmp_path / "d.csv"
    docs_path.write_text("doc_id,text,identity_id\n1,zqxwvsecret beekeeping York,A\n2,chess Hull,C\n"
                         "3,pilot Leeds,B\n4,bees York,A\n", encoding="utf-8")
    documents = load_documents(docs_path)
    attacker = TfidfAttacker(temperature=1.0)
    table = attacker.attack(documents.frame["doc_id"].tolist(), documents.frame["text"].tolist(), registry,
                            project.levels["K3"])
    terms = set(attacker.index_.terms_.tolist())
    assert "zqxwvsecret" not in terms and "beekeeping" in terms and "library" in terms
    assert len(table) == 4
    full = KnowledgeLevel("all", ("profile", "secret"))
    attacker.attack(["1"], ["x"], registry, full)
    assert "zqxwvsecret" in set(attacker.index_.terms_.tolist())  # the field is indexed only when allowed


def test_profile_texts_skip_missing_values_from_jsonl(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"identity_id": "A", "city": "York", "tags": ["x", "y"], "age": 40}\n'
                    '{"identity_id": "B", "city": null, "tags": [], "age": null}\n', encoding="utf-8")
    registry = load_registry(path)
    texts = profile_texts(registry, KnowledgeLevel("L", ("city", "tags", "age")))
    assert texts[0].startswith("York. x, y. 40")
    assert "nan" not in texts[1].lower() and "none" not in texts[1].lower()


# ----------------------------------------------------------------------------------------- bad input

def test_invalid_toml_names_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[knowledge.K1\nfields = [\"city\"]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in message_of(info) and "not valid TOML" in message_of(info)
    assert "line 1" in message_of(info)


@pytest.mark.parametrize("text,parts", [
    ("[auditt]\nn_cal = 3\n", ["unknown key 'auditt'", "top level", "audit"]),
    ("[audit]\nncal = 3\n", ["unknown key 'ncal'", "[audit]", "n_cal"]),
    ("[knowledge.K1]\nfields = ['city']\nfeilds = ['x']\n", ["unknown key 'feilds'", "[knowledge.K1]", "fields"]),
    ("[attacker.tfidf]\ntemprature = 1.0\n", ["unknown key 'temprature'", "[attacker.tfidf]", "temperature"]),
    ("[columns.docs]\ntext = 'note'\n", ["unknown key 'docs'", "[columns]", "documents"]),
])
def test_unknown_keys(text, parts):
    with pytest.raises(ConfigError) as info:
        parse_config(text, "audit.toml")
    for part in ["audit.toml", *parts]:
        assert part in message_of(info)


@pytest.mark.parametrize("text,parts", [
    ("[knowledge.K1]\nfields = []\n", ["'K1'", "no fields"]),
    ("[knowledge.K1]\nfields = 'city'\n", ["[knowledge.K1]", "expected a list of registry field names", "'city'"]),
    ("[knowledge.K1]\nfields = ['city', 3]\n", ["[knowledge.K1]", "expected a list of registry field names"]),
    ("[knowledge.K1]\nquery_mode = 'direct'\n", ["[knowledge.K1]", "expected a list of column names", "None"]),
    ("[knowledge]\nK1 = 'city'\n", ["[knowledge.K1]", "must be a table"]),
    ("[knowledge.K1]\nfields = ['identity_id']\n", ["'K1'", "identity_id"]),
    ("[knowledge.K1]\nfields = ['city']\nquery_mode = 'telepathy'\n", ["K1", "'telepathy'", "direct_plus_clues"]),
])
def test_malformed_levels(text, parts):
    with pytest.raises(ConfigError) as info:
        parse_config(text, "audit.toml")
    for part in parts:
        assert part in message_of(info)


def test_unknown_field_names_level_field_and_registry(project, registry):
    bad = KnowledgeLevel("K9", ("city", "shoe_size"))
    with pytest.raises(ConfigError) as info:
        profile_texts(registry, bad)
    for part in ["'K9'", "'shoe_size'", registry.file, "city"]:
        assert part in message_of(info)
    with pytest.raises(ConfigError) as info:
        declare_audit(project, registry, fields=["shoe_size"])
    assert "'shoe_size'" in message_of(info)


def test_unknown_level_lists_the_declared_ones(project, registry):
    with pytest.raises(ConfigError) as info:
        declare_audit(project, registry, knowledge="K7")
    for part in ["'K7'", "K1", "K2", "K3", "clinical", project.file]:
        assert part in message_of(info)
    with pytest.raises(ConfigError) as info:
        declare_audit(ProjectConfig(), registry, knowledge="K1")
    assert "(none declared)" in message_of(info)


def test_config_file_not_found_and_not_utf8(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "missing.toml")
    assert "missing.toml" in message_of(info) and "not found" in message_of(info)
    path = tmp_path / "latin.toml"
    path.write_bytes("[knowledge.K1]\nfields = [\"caf\u00e9\"]\n".encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "latin.toml" in message_of(info) and "UTF-8" in message_of(info)


@pytest.mark.parametrize("snippet,part", [
    ("score = 'entropy'", "'entropy'"),
    ("miss_policy = 'ignore'", "'ignore'"),
    ("confidence = [1.5]", "1.5"),
    ("confidence = [0.0]", "0.0"),
    ("confidence = []", "confidence"),
    ("top_k = 0", "top_k"),
    ("flag_below = 0", "flag_below"),
    ("leakage_threshold = 1.5", "1.5"),
    ("attacker = 'gpt'", "'gpt'"),
])
def test_invalid_audit_values(registry, snippet, part):
    with pytest.raises(ConfigError) as info:
        declare_audit(parse_config(f"[audit]\n{snippet}\n", "audit.toml"), registry)
    assert part in message_of(info)


def test_non_positive_temperature(registry):
    with pytest.raises(ConfigError) as info:
        declare_audit(parse_config("[attacker.tfidf]\ntemperature = 0\n"), registry)
    assert "temperature" in message_of(info)


def test_direct_plus_clues_without_an_extractor(registry):
    level = KnowledgeLevel("K4", ("city",), "direct_plus_clues")
    with pytest.raises(ConfigError) as info:
        TfidfAttacker().attack(["1"], ["text"], registry, level)
    assert "'K4'" in message_of(info) and "clue extractor" in message_of(info)


# ------------------------------------------------------- values of the wrong type (must not crash)

@pytest.mark.parametrize("text", [
    pytest.param("[audit]\nconfidence = 0.9\n", id="confidence-scalar"),
    pytest.param("[audit]\nseed = 'x'\n", id="seed-text"),
    pytest.param("[audit]\nflag_below = 'ten'\n", id="flag_below-text"),
    pytest.param("[audit]\ntop_k = '5'\n", id="top_k-text"),
    pytest.param("[attacker.tfidf]\ntemperature = 'hot'\n", id="temperature-text"),
    pytest.param("knowledge = 'K1'\n", id="knowledge-not-a-table"),
    pytest.param("audit = 3\n", id="audit-not-a-table"),
    pytest.param("attacker = 'tfidf'\n", id="attacker-not-a-table"),
])
def test_values_of_the_wrong_type_give_config_errors(registry, text):
    """A plausible typo in the TOML must end in a ConfigError (one line in the CLI), not a TypeError."""
    with pytest.raises(ConfigError):
        declare_audit(parse_config(text, "audit.toml"), registry)


@pytest.mark.parametrize("snippet", ["n_cal = 'abc'", "n_cal = 2.5", "n_test = '3'"])
def test_split_sizes_of_the_wrong_type_give_config_errors(tmp_path, snippet):
    documents, registry = toy_frames(n_people=4, docs_per_person=3)
    docs = load_documents(write_table(documents, tmp_path / "d.csv"))
    reg = load_registry(write_table(registry, tmp_path / "r.csv"))
    with pytest.raises(ConfigError):
        config, attacker = declare_audit(parse_config(f"[audit]\n{snippet}\n", "audit.toml"), reg)
        run_audit(docs, reg, attacker, config)


@pytest.mark.parametrize("text", ["[columns]\ndocuments = 'note'\n", "[columns.documents]\ntext = ['note']\n"])
def test_column_mappings_must_be_tables_of_names(text):
    """``[columns.documents]`` maps our column names to the file's: anything else is a ConfigError at
    parse time (today it reaches ``dict('note')`` in the loader and crashes)."""
    with pytest.raises(ConfigError):
        parse_config(text, "audit.toml")
