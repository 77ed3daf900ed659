"""Replacements a curator would accept: category placeholders from the registry, generalisations where the data
allows (hierarchies derived from the registry, the curator's own table, ages to bands, years to decades), and
the kind of each edit recorded (``cpa redact`` on the sample: tests/integration/test_replacements_cli.py)."""

from __future__ import annotations

import hashlib
import json
import re

import pandas as pd
import pytest
from generalization_tables import table_file
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.attack.explainers import Span, TermExplainer, term_spans
from cpa_core.common.errors import ConfigError, DataError
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, placeholder_regions
from cpa_core.io.tables import load_registry
from cpa_core.redaction.replacements import (
    KINDS,
    Replacer,
    Vocabulary,
    field_hierarchies,
    fold,
    load_generalization,
    placeholder_label,
)
from cpa_core.redaction.decisions import redaction_log
from cpa_core.redaction.suggestions import Edit, apply_edits, suggest

# city -> region (4 cities, 3 regions) and region -> country (3 regions, 2 countries) are functional; city ->
# country is too, but region is the next level up. occupation -> country is not: a teacher in Leeds (UK) and
# one in Gdańsk (Poland). Gdańsk is written two ways (one value once accents are set aside).
TOY = """identity_id,age_band,gender,city,region,occupation,country
P1,30-39,female,Leeds,Yorkshire,nurse,UK
P2,40-49,male,Leeds,Yorkshire,teacher,UK
P3,30-39,male,York,Yorkshire,nurse,UK
P4,50-59,female,Gdańsk,Pomerania,civil engineer,Poland
P5,40-49,male,Gdansk,Pomerania,teacher,Poland
P6,30-39,female,Bristol,South West,nurse,UK
P7,60-69,male,Bristol,South West,farmer,UK
"""


@pytest.fixture(scope="module")
def toy():
    return load_registry(TOY.encode("utf-8"), name="toy.csv")


def span(text: str, start: int = 0, word: str | None = None) -> Span:
    """The span of ``word`` (default: all of ``text``) at or after ``start``."""
    word = text if word is None else word
    at = text.index(word, start)
    return Span(at, at + len(word), word, fold(word), 1.0)


def test_a_functional_dependency_of_the_registry_is_a_hierarchy_and_a_non_functional_one_is_not(toy):
    vocabulary = Vocabulary.from_frame(toy.frame)
    assert dict(vocabulary.hierarchies) == {"city": "region", "region": "country"}
    assert vocabulary.age_bands[0] == "age_band"
    # the rule by hand: every A value with exactly one B value, and B has fewer distinct values
    assert field_hierarchies({"a": ["x", "x", "y", "z"], "b": ["1", "1", "1", "2"]}) == {"a": "b"}
    assert field_hierarchies({"a": ["x", "x", "y"], "b": ["1", "2", "1"]}) == {}  # x goes with 1 and 2
    assert field_hierarchies({"a": ["x", "x", "y"], "b": ["1", "1", "2"]}) == {}  # as many B values as A values
    assert field_hierarchies({"id": ["1", "2", "3"], "b": ["x", "x", "y"]}) == {}  # one value per row identifies
    assert field_hierarchies({"a": ["x", None, "x", "y"], "b": ["1", "2", "1", "1"]}) == {"a": "b"}  # missing aside
    # of two coarser fields, the next level up (more distinct values), then the earlier column
    assert field_hierarchies({"city": ["a", "a", "b", "c"], "country": ["u", "u", "u", "u"],
                              "region": ["r", "r", "s", "s"]}) == {"city": "region", "region": "country"}
    assert field_hierarchies({"a": ["x", "x", "y", "z"], "b": ["1", "1", "2", "2"], "c": ["3", "3", "4", "4"]}
                             ) == {"a": "b"}  # b and c: as many values each, neither generalises the other


def test_generalise_a_city_to_its_region_accents_and_case_aside(toy):
    replacer = Replacer.from_registry(toy, "generalize")
    assert replacer.choose(span("Leeds")).replacement == "Yorkshire"
    assert [replacer.choose(span(w)) for w in ("GDANSK", "gdańsk")] == [replacer.choose(span("Gdańsk"))] * 2
    assert replacer.choose(span("Gdańsk")).replacement == "Pomerania"
    assert replacer.choose(span("Yorkshire")).replacement == "UK"  # a region -> its country
    chosen = replacer.choose(span("engineer"))  # a word of a value, not a value: the category placeholder
    assert (chosen.replacement, chosen.kind) == ("[OCCUPATION]", "placeholder")
    assert replacer.choose(span("nurse")).kind == "placeholder"  # no coarser field for occupations
    assert replacer.to_dict()["hierarchies"] == {"city": "region", "region": "country"}


def test_placeholders_name_the_category_the_registry_gives(toy):
    replacer = Replacer.from_registry(toy, "placeholder")
    expected = {"Leeds": "[CITY]", "gdansk": "[CITY]", "nurse": "[OCCUPATION]", "engineer": "[OCCUPATION]",
                "female": "[GENDER]", "Yorkshire": "[REGION]", "UK": "[COUNTRY]", "30-39": "[AGE_BAND]",
                "2014": "[YEAR]", "1990s": "[YEAR]", "42": "[NUMBER]", "3.5": "[NUMBER]", "12/03/2019": "[DATE]",
                "2019-03-12": "[DATE]", "12 March 2019": "[DATE]", "March": "[DATE]", "Tuesday": "[DATE]",
                "May": "[DATE]", "may": "[REDACTED]", "zebra": "[REDACTED]"}
    assert {w: replacer(span(w)) for w in expected} == expected
    assert all(replacer.choose(span(w)).kind == "placeholder" for w in expected)
    text = "A 39-year-old, aged 40, 39 years ago"
    assert replacer.choose(span(text, 0, "39"), text).replacement == "[AGE]"
    assert replacer.choose(span(text, 0, "40"), text).replacement == "[AGE]"
    assert replacer.choose(span(text, 20, "39"), text).replacement == "[NUMBER]"  # not an age
    # without a registry: only what the text itself says
    bare = Replacer("placeholder")
    assert [bare(span(w)) for w in ("Leeds", "2014", "7")] == ["[REDACTED]", "[YEAR]", "[NUMBER]"]
    assert Replacer.from_registry(toy, "delete").choose(span("Leeds")) == Replacer("delete").choose(span("x"))
    assert Replacer("delete").choose(span("Leeds")).replacement == ""


def test_the_most_specific_field_is_taken_and_the_choice_is_deterministic():
    frame = pd.DataFrame({"identity_id": ["P1", "P2", "P3", "P4"],
                          "country": ["Luxembourg", "Luxembourg", "France", "France"],
                          "city": ["Luxembourg", "Esch", "Paris", "Lyon"],        # more distinct values: finer
                          "hobby": ["chess", "chess club", "Lyon walks", "rowing"],
                          "sport": ["chess", "golf", "polo", "rowing"]})       # as many values as hobby
    vocabulary = Vocabulary.from_frame(frame)
    replacer = Replacer("placeholder", vocabulary)
    assert replacer(span("Luxembourg")) == "[CITY]"       # a whole value of both: the finer field
    assert replacer(span("Lyon")) == "[CITY]"             # a whole value beats a word of a value
    assert replacer(span("club")) == "[HOBBY]"
    assert replacer(span("rowing")) == "[HOBBY]"          # a whole value of both, as many values: earlier column
    assert replacer(span("polo")) == "[SPORT]"
    shuffled = Vocabulary.from_frame(frame.sample(frac=1, random_state=3))  # row order does not matter
    assert [Replacer("placeholder", shuffled)(span(w)) for w in ("Luxembourg", "Lyon", "club", "rowing")] == \
        ["[CITY]", "[CITY]", "[HOBBY]", "[HOBBY]"]


def test_free_text_fields_name_no_category_and_list_cells_are_split():
    frame = pd.DataFrame({"identity_id": ["P1", "P2"],
                          "keywords": ["migraine; walking", "walking; chess"],
                          "profile": ["He is a nurse who walks his dog every morning by the canal in town.",
                                      "She sings in a choir and keeps bees in the garden of her house."]})
    vocabulary = Vocabulary.from_frame(frame)
    assert vocabulary.fields["profile"].free_text and not vocabulary.fields["keywords"].free_text
    replacer = Replacer("placeholder", vocabulary)
    assert [replacer(span(w)) for w in ("walking", "migraine", "choir")] == ["[KEYWORDS]", "[KEYWORDS]",
                                                                            "[REDACTED]"]
    assert vocabulary.hierarchies == {}  # a list field determines nothing


@pytest.mark.parametrize("name, label", [("city", "[CITY]"), ("age band", "[AGE_BAND]"), ("Home-town (UK)",
                                          "[HOME_TOWN_UK]"), ("région", "[REGION]"), ("x]y", "[X_Y]"),
                                         ("城市", "[REDACTED]"), ("a" * 60, "[" + "A" * 38 + "]")])
def test_every_placeholder_is_an_anonymiser_placeholder_never_evidence_again(name, label):
    assert placeholder_label(name) == label
    for text in (label, "[YEAR]", "[NUMBER]", "[DATE]", "[AGE]", "[REDACTED]"):
        assert (0, len(text)) in placeholder_regions(text, DEFAULT_PLACEHOLDERS)
        released = f"in {text} now"
        weights = {t: 1.0 for t in re.findall(r"\w\w+", released.lower())}
        assert [s.text for s in term_spans(released, weights, str.lower)] == ["in", "now"]


def test_years_become_their_decade_and_ages_their_band(toy):
    replacer = Replacer.from_registry(toy, "generalize")
    text = "in 2014, the 2015 season, by 12/03/2019, since 1999; a 39-year-old, aged 95, 39 years ago"
    chosen = {(w, at): replacer.choose(span(text, at, w), text) for w, at in
              (("2014", 0), ("2015", 0), ("12/03/2019", 0), ("1999", 0), ("39", 0), ("95", 0), ("39", 70))}
    assert {k: c.replacement for k, c in chosen.items()} == {
        ("2014", 0): "the 2010s", ("2015", 0): "2010s", ("12/03/2019", 0): "the 2010s", ("1999", 0): "the 1990s",
        ("39", 0): "30-39",         # the registry's band
        ("95", 0): "90-99",         # no band of the registry holds it: a 10-year band
        ("39", 70): "[NUMBER]"}     # not an age, not a year
    assert {k: c.kind for k, c in chosen.items()} == {**dict.fromkeys(chosen, "generalize"),
                                                        ("39", 70): "placeholder"}
    assert replacer.choose(span("2014")).replacement == "the 2010s"  # no text around: no article to drop
    assert Replacer("generalize").choose(span(text, 0, "39"), text).replacement == "30-39"  # no registry bands
    odd = pd.DataFrame({"identity_id": ["P1", "P2", "P3"], "age_group": ["18-24", "25-44", "65+"]})
    banded = Replacer("generalize", Vocabulary.from_frame(odd))
    assert [banded.choose(span(t, 0, t.split()[1]), t).replacement for t in ("aged 30", "aged 70", "aged 50")] == \
        ["25-44", "65+", "50-59"]


def test_the_curators_table_comes_first_and_is_identified_by_its_checksum(toy, tmp_path):
    path = table_file(tmp_path, "value,general,field\nLeeds,West Yorkshire,city\nnurse,health worker,\n"
                          "Bristol,the South West,city\nBristol,a port,occupation\n")
    table = load_generalization(path, registry_fields=toy.fields)
    assert table.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and table.file == str(path)
    replacer = Replacer.from_registry(toy, "generalize", table)
    assert [replacer.choose(span(w)).replacement for w in ("leeds", "York", "Nurse", "Bristol", "engineer")] == \
        ["West Yorkshire", "Yorkshire", "health worker", "the South West", "[OCCUPATION]"]
    assert {replacer.choose(span(w)).kind for w in ("leeds", "York", "Nurse", "Bristol")} == {"generalize"}
    assert replacer.to_dict()["generalization"] == {"file": str(path), "sha256": table.sha256, "entries": 4}
    # without a field column; JSONL works too
    plain = load_generalization(table_file(tmp_path, '{"value": 2014, "general": "a recent year"}\n', "g.jsonl"))
    assert Replacer("generalize", table=plain).choose(span("2014")).replacement == "a recent year"
    with pytest.raises(ConfigError, match="generalize"):
        Replacer.from_registry(toy, "placeholder", table)
    with pytest.raises(ConfigError, match="unknown redaction strategy 'blur'"):
        Replacer("blur")


@pytest.mark.parametrize("content, words", [
    ("value,general\n", ["general.csv", "the table has no rows"]),
    ("value,generalisation\nLeeds,Yorkshire\n", ["general.csv", "missing column 'general'", "expected columns value "
                                                  "and general", "found columns 'value', 'generalisation'"]),
    ("value,general,note\nLeeds,Yorkshire,x\n", ["general.csv", "unexpected column 'note'"]),
    ("value,general\nLeeds,Yorkshire\n,Scotland\n", ["general.csv, row 2, column 'value'", "the value is empty",
                                                    "expected the text to generalise", "found an empty cell"]),
    ("value,general\nLeeds, \n", ["row 1, column 'general'", "found an empty cell"]),
    ("value,general\nLeeds,LEEDS\n", ["row 1, column 'general'", "generalises to itself", "found 'LEEDS'"]),
    ("value,general\nLeeds,Yorkshire\nYork,Yorkshire\nleeds,North\n",
     ["general.csv, row 3, column 'general'", "already generalises to 'Yorkshire' in row 1", "found 'North'"]),
    ("value,general,field\nLeeds,Yorkshire,town\n", ["row 1, column 'field'", "unknown registry field",
                                                     "expected one of", "city", "found 'town'"]),
])
def test_a_bad_table_is_refused_in_one_line_naming_the_file_row_and_column(toy, tmp_path, content, words):
    with pytest.raises(DataError) as raised:
        load_generalization(table_file(tmp_path, content), registry_fields=toy.fields)
    message = str(raised.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_a_missing_table_is_named(tmp_path):
    with pytest.raises(DataError, match="nope.csv: file not found"):
        load_generalization(tmp_path / "nope.csv")


def fading(released: str):
    """A re-scorer whose set stays at 1 and whose certainty falls as the text's words depart from the released
    ones (words gone or new)."""
    from cpa_core.audit.rescoring import Rescored, Risk
    words = set(released.split())
    return lambda edited: Rescored(Risk(1, None, -float(len(words ^ set(edited.split())))), (0,))


def heaviest_first(*args, **kwargs):
    """The search trying the heaviest term alone each round."""
    return suggest(*args, proposals=1, **kwargs)


def _explainer(weights):
    return TermExplainer(lambda query, rows: {t: w for t, w in weights.items() if t in fold(query)}, fold)


def test_the_greedy_records_each_edits_kind_and_never_edits_what_it_wrote(toy):
    text = "A 39-year-old nurse from Leeds, Yorkshire, seen in 2014."
    weights = {"39": 5.0, "leeds": 4.0, "nurse": 3.0, "yorkshire": 2.0, "2014": 1.0}
    stuck = fading(text)  # never reaches k, each redaction lowers the attacker's certainty: every term goes
    done = heaviest_first("d1", text, stuck, _explainer(weights), 11, Replacer.from_registry(toy, "generalize"))
    assert [(e.original, e.replacement, e.kind) for e in done.edits] == [
        ("39", "30-39", "generalize"), ("nurse", "[OCCUPATION]", "placeholder"), ("Leeds", "Yorkshire", "generalize"),
        ("Yorkshire", "UK", "generalize"), ("2014", "the 2010s", "generalize")]
    # the "Yorkshire" that Leeds became is evidence of the term "yorkshire" too, and is left alone
    assert apply_edits(text, done.edits) == "A 30-39-year-old [OCCUPATION] from Yorkshire, UK, seen in the 2010s."
    assert all(text[e.offset:e.offset + e.length] == e.original for e in done.edits)
    assert done.kinds() == {"delete": 0, "placeholder": 1, "generalize": 4, "rewrite": 0}
    assert done.to_dict()["edits"][0] == {"offset": 2, "length": 2, "original": "39", "replacement": "30-39",
                                          "term": "39", "kind": "generalize"}
    placeholders = heaviest_first("d1", text, stuck, _explainer(weights), 11, Replacer.from_registry(toy, "placeholder"))
    assert apply_edits(text, placeholders.edits) == \
        "A [AGE]-year-old [OCCUPATION] from [CITY], [REGION], seen in [YEAR]."
    assert {e.kind for e in heaviest_first("d1", text, stuck, _explainer(weights), 11, "delete").edits} == {"delete"}
    own = heaviest_first("d1", text, stuck, _explainer(weights), 11, lambda s: s.text.upper())
    assert {e.kind for e in own.edits} == {"placeholder"}
    # the words around a span are read in the released text, whatever earlier edits did to the offsets
    later = "Leeds nurse, aged 39, in the 2014 final"
    done = heaviest_first("d2", later, fading(later), _explainer({"leeds": 3.0, "39": 2.0, "2014": 1.0}), 11,
                   Replacer.from_registry(toy, "generalize"))
    assert apply_edits(later, done.edits) == "Yorkshire nurse, aged 30-39, in the 2010s final"


def test_an_edit_knows_its_kind():
    assert Edit(0, 1, "a", "", "a").kind == "delete" and Edit(0, 1, "a", "[X]", "a").kind == "placeholder"
    assert Edit(0, 1, "a", "b", "a", "generalize").to_dict()["kind"] == "generalize"
    with pytest.raises(ValueError, match="unknown kind"):
        Edit(0, 1, "a", "b", "a", "blur")


WORDS = ["Leeds", "leeds", "York", "Yorkshire", "nurse", "2014", "1999", "39", "zebra", "civil", "engineer", "UK"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(WORDS + ["year-old", "aged", "the", ",", "[REDACTED]"]), min_size=1, max_size=14),
       st.dictionaries(st.sampled_from([fold(w) for w in WORDS]), st.floats(0.1, 5), min_size=1),
       st.sampled_from(["generalize", "placeholder", "delete"]), st.integers(1, 20))
def test_every_edit_reads_the_released_text_at_its_offset(toy_replacers, words, weights, strategy, k):
    """Whatever the text, weights and strategy: the edits do not overlap, each one's original is the released
    text at its offset, its kind is one of KINDS, and no placeholder it writes is evidence."""
    text = " ".join(words)
    rescore = lambda edited: (sum(edited.count(r) for r in ("[", "0s", "UK", "Yorkshire", "-")), [0])  # noqa: E731
    done = suggest("d", text, rescore, _explainer(weights), k, toy_replacers[strategy])
    previous_end = -1
    for edit in done.edits:
        assert text[edit.offset:edit.offset + edit.length] == edit.original and edit.kind in KINDS
        assert edit.offset >= previous_end
        previous_end = edit.offset + edit.length
        if edit.kind == "placeholder":
            assert any(re.fullmatch(p, edit.replacement) for p in DEFAULT_PLACEHOLDERS)
    assert {e.kind for e in done.edits} <= ({"delete"} if strategy == "delete" else {"placeholder", "generalize"})


@pytest.fixture(scope="module")
def toy_replacers(toy):
    return {s: Replacer.from_registry(toy, s) for s in ("generalize", "placeholder", "delete")}


def test_the_log_records_the_strategy_the_table_and_the_kinds(toy, tmp_path):
    from types import SimpleNamespace

    from cpa_core.audit.policy import ReleasePolicy

    table = load_generalization(table_file(tmp_path, "value,general\nLeeds,North\n"))
    replacer = Replacer.from_registry(toy, "generalize", table)
    text = "nurse from Leeds"
    done = suggest("d1", text, fading(text), _explainer({"leeds": 2.0, "nurse": 1.0}), 11, replacer)
    config = SimpleNamespace(config_id="abc", policy=ReleasePolicy(11), policy_confidence=0.9)
    log = redaction_log(config, replacer, [done])
    assert log["strategy"] == "generalize" and log["generalization"]["sha256"] == table.sha256
    assert log["edits_by_kind"] == {"delete": 0, "placeholder": 1, "generalize": 1, "rewrite": 0}
    assert log["derived"]["hierarchies"] == {"city": "region", "region": "country"}
    assert json.loads(json.dumps(log))["documents"][0]["edits"][1]["replacement"] == "North"
    assert redaction_log(config, "delete", [])["generalization"] is None


def test_a_word_names_a_category_only_when_it_is_half_of_a_value_or_more():
    frame = pd.DataFrame({"identity_id": ["P1", "P2"], "occupation": ["bus driver", "nurse"],
                          "keywords": ["swims twice a week; migraine", "chess"]})
    replacer = Replacer("placeholder", Vocabulary.from_frame(frame))
    assert [replacer(span(w)) for w in ("bus", "nurse", "migraine", "twice", "week")] == \
        ["[OCCUPATION]", "[OCCUPATION]", "[KEYWORDS]", "[REDACTED]", "[REDACTED]"]
