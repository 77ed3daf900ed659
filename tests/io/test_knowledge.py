"""Knowledge levels: validation, the check against a registry, full knowledge, and the profile texts
built from the level's fields only."""

import math

import numpy as np
import pandas as pd
import pytest

from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import QUERY_MODES, KnowledgeLevel, full_knowledge, profile_texts
from cpa_core.io.tables import Registry, ValidationReport, load_registry

CSV = (b"identity_id,age_band,city,occupation,secret\n"
       b"a,30-39,Paris,baker,SECRETTOKENA\n"
       b"b,40-49,  Lyon  ,,SECRETTOKENB\n"
       b"c,,Nice,dentist,SECRETTOKENC\n")


@pytest.fixture(scope="module")
def registry():
    return load_registry(CSV, name="people.csv")


def frame_registry(columns: dict) -> Registry:
    """A registry holding arbitrary Python objects (as JSONL or Parquet can give)."""
    frame = pd.DataFrame(columns, dtype=object)
    return Registry(frame, "objects.jsonl", "0" * 64, ValidationReport("objects.jsonl", len(frame), len(frame)))


def test_a_level_needs_at_least_one_field():
    with pytest.raises(ConfigError, match="knowledge level 'K0' lists no fields; expected at least one"):
        KnowledgeLevel("K0", ())


def test_unknown_query_mode_is_named_with_the_modes():
    with pytest.raises(ConfigError) as raised:
        KnowledgeLevel("K1", ("city",), "fuzzy")
    assert "knowledge level 'K1'" in str(raised.value)
    assert "unknown query_mode 'fuzzy'" in str(raised.value)
    assert "expected one of direct, direct_plus_clues" in str(raised.value)


def test_the_identity_cannot_be_a_field():
    with pytest.raises(ConfigError, match="knowledge level 'K9' lists 'identity_id'"):
        KnowledgeLevel("K9", ("city", "identity_id"))


def test_every_query_mode_is_valid_and_to_dict_lists_the_declaration():
    assert QUERY_MODES == ("direct", "direct_plus_clues")
    for mode in QUERY_MODES:
        level = KnowledgeLevel("K2", ("city", "age_band"), mode, "two fields")
        assert level.to_dict() == {"name": "K2", "fields": ["city", "age_band"], "query_mode": mode,
                                   "description": "two fields"}
    assert KnowledgeLevel("K2", ("city",)).query_mode == "direct"


def test_check_against_names_the_missing_field_and_the_registry_file(registry):
    KnowledgeLevel("K1", ("city", "occupation")).check_against(registry)  # no error
    with pytest.raises(ConfigError) as raised:
        KnowledgeLevel("K1", ("city", "salary", "height")).check_against(registry)
    message = str(raised.value)
    assert "knowledge level 'K1' uses field 'salary'" in message
    assert "people.csv" in message
    assert "height" not in message  # the first missing field is named
    assert "expected one of ['age_band', 'city', 'occupation', 'secret']" in message


def test_full_knowledge_sees_every_field_in_file_order(registry):
    level = full_knowledge(registry)
    assert level.name == "full" and level.query_mode == "direct"
    assert level.fields == ("age_band", "city", "occupation", "secret")
    assert "identity_id" not in level.fields


def test_profile_texts_join_the_level_fields_in_declared_order(registry):
    texts = profile_texts(registry, KnowledgeLevel("K", ("occupation", "city", "age_band")))
    # empty cells are skipped (no doubled separator), surrounding spaces stripped
    assert texts == ["baker. Paris. 30-39", "Lyon. 40-49", "dentist. Nice"]
    assert profile_texts(registry, KnowledgeLevel("K", ("city",))) == ["Paris", "Lyon", "Nice"]


def test_a_field_outside_the_level_never_reaches_the_profile_text(registry):
    for fields in (("city",), ("age_band", "city", "occupation")):
        for text in profile_texts(registry, KnowledgeLevel("K", fields)):
            assert "SECRETTOKEN" not in text and "secret" not in text
    full = profile_texts(registry, full_knowledge(registry))
    assert [t.endswith(f"SECRETTOKEN{i}") for i, t in zip("ABC", full)] == [True, True, True]


def test_profile_texts_check_the_level_against_the_registry(registry):
    with pytest.raises(ConfigError, match="uses field 'salary'"):
        profile_texts(registry, KnowledgeLevel("K", ("salary",)))


def test_a_row_with_every_field_empty_gives_an_empty_text():
    registry = frame_registry({"identity_id": ["a", "b"], "x": [None, "v"], "y": [math.nan, ""]})
    assert profile_texts(registry, KnowledgeLevel("K", ("x", "y"))) == ["", "v"]


def test_lists_dicts_numbers_and_missing_values_are_rendered():
    registry = frame_registry({
        "identity_id": ["a", "b", "c", "d"],
        "tags": [["chess", None, " go "], ("solo",), np.array(["p", "q"]), []],
        "meta": [{"team": "red", "rank": 2}, None, {}, {"k": ["x", "y"]}],
        "age": [41, 2.5, math.nan, np.float64("nan")],
    })
    texts = profile_texts(registry, KnowledgeLevel("K", ("tags", "meta", "age")))
    assert texts == ["chess, go. team red, rank 2. 41", "solo. 2.5", "p, q", "k x, y"]


def test_nested_lists_are_flattened_skipping_empty_items():
    registry = frame_registry({"identity_id": ["a"], "tags": [[["a", "b"], [], "c", math.nan, ""]]})
    assert profile_texts(registry, KnowledgeLevel("K", ("tags",))) == ["a, b, c"]


def test_lists_from_a_jsonl_registry():
    data = (b'{"identity_id": "a", "tags": ["x", "y"], "city": "Paris"}\n'
            b'{"identity_id": "b", "tags": [], "city": null}\n')
    registry = load_registry(data, name="r.jsonl")
    assert profile_texts(registry, KnowledgeLevel("K", ("city", "tags"))) == ["Paris. x, y", ""]


def test_missing_values_of_any_kind_never_become_words():
    import pandas as pd

    from cpa_core.io.knowledge import _cell_text

    for missing in (None, float("nan"), np.float32("nan"), pd.NA, pd.NaT):
        assert _cell_text(missing) == ""
    assert _cell_text({"k": None, "n": 2}) == "n 2"
    assert _cell_text(["a", pd.NA, "b"]) == "a, b"
