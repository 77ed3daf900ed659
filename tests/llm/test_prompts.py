"""The versioned prompt templates and the parsers of the answers: clues (JSON, fenced, bulleted, cut off), a choice
among labelled options, an attribute value among the allowed ones or free."""

from __future__ import annotations

import json

import pytest

from cpa_core.llm.prompts import (
    ATTRIBUTE_V1,
    CLUES_V1,
    FORCED_CHOICE_V1,
    attribute_choices,
    format_options,
    normalise_value,
    option_labels,
    parse_attribute,
    parse_choice,
    parse_clues,
)


def test_templates_are_versioned_and_hashed():
    templates = (CLUES_V1, FORCED_CHOICE_V1, ATTRIBUTE_V1)
    assert {t.id for t in templates} == {"clues/v1", "forced_choice/v1", "attribute/v1"}
    hashes = {t.sha256 for t in templates}
    assert len(hashes) == 3 and all(len(h) == 64 for h in hashes)
    assert CLUES_V1.params() == {"name": "clues", "version": 1, "sha256": CLUES_V1.sha256}
    messages = FORCED_CHOICE_V1.render(text="doc {with braces}", options=format_options(["Ann\nLee", "Bo"]),
                                       labels=", ".join(option_labels(2)))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "doc {with braces}" in messages[1]["content"] and "A. Ann Lee\nB. Bo" in messages[1]["content"]
    with pytest.raises(ValueError, match="options"):
        FORCED_CHOICE_V1.render(text="x", labels="A")
    assert ATTRIBUTE_V1.fields == ("text", "attribute", "choices")
    assert attribute_choices(["male", "female"]) == " Choose one of: male, female." and attribute_choices(None) == ""
    assert option_labels(3) == ["A", "B", "C"] and option_labels(30)[:2] == ["1", "2"] and len(option_labels(30)) == 30


@pytest.mark.parametrize("text, expected", [
    ('["nurse", "Lyon", "chess cup 2011"]', ["nurse", "Lyon", "chess cup 2011"]),
    ('{"clues": ["nurse", "Lyon"]}', ["nurse", "Lyon"]),
    ('{"Clues": "nurse"}', ["nurse"]),
    ('```json\n["nurse", "Lyon"]\n```', ["nurse", "Lyon"]),
    ('```\n{"clues": ["nurse"]}\n```\nHope this helps!', ["nurse"]),
    ('Here are the clues: ["nurse", "Lyon"] -- good luck', ["nurse", "Lyon"]),
    ('Sure!\n- nurse\n- works nights\n* Lyon\n• chess', ["nurse", "works nights", "Lyon", "chess"]),
    ("Clues:\n1. nurse\n2) Lyon\n3: won a cup", ["nurse", "Lyon", "won a cup"]),
    ('- **Occupation**: nurse\n- Place: Lyon', ["Occupation: nurse", "Place: Lyon"]),
    ('["nurse", "Lyon", "che', ["nurse", "Lyon"]),                       # cut off by max_tokens
    ('["nurse", "Nurse", " nurse ", ""]', ["nurse"]),                    # de-duplicated, empties dropped
    ('[{"clue": "nurse"}, {"clue": "Lyon"}]', ["nurse", "Lyon"]),
    ('{"occupation": "nurse", "city": "Lyon"}', ["occupation: nurse", "city: Lyon"]),
    ('[1990, "Lyon", true, null]', ["1990", "Lyon"]),
    ('["a \\"quoted\\" clue"]', ['a "quoted" clue']),
    ("", None), ("   ", None), (None, None), ("I cannot help with that.", None), ("[]", None),
    ('{"clues": []}', None), ("```json\n```", None), ("{not json at all", None), ("[[[[", None),
    ("The text does not say.\nNothing more.", None),
])
def test_parse_clues(text, expected):
    assert parse_clues(text) == expected


def test_parse_clues_limits_count_and_length():
    assert parse_clues('["a1", "b2", "c3"]', max_clues=2) == ["a1", "b2"]
    assert len(parse_clues(json.dumps(["x" * 5000]))[0]) == 300


LABELS = ["A", "B", "C", "D"]


@pytest.mark.parametrize("text, expected", [
    ("B", "B"), ("b", "B"), ("(B)", "B"), ("[C]", "C"), ("B.", "B"), (" **D** ", "D"), ("'C'", "C"),
    ("Answer: B", "B"), ("answer: (c)", "C"), ("The answer is (C).", "C"), ("The correct answer is D", "D"),
    ("option b", "B"), ("Option C is correct", "C"), ("I choose option A.", "A"), ("My final answer: option b", "B"),
    ("B. John Smith", "B"), ("(B) John Smith, the nurse", "B"), ("C) the nurse", "C"), ("B\nBecause she is a nurse", "B"),
    ("I think it's B", "B"), ("It must be (D), the chess player.", "D"),
    ("Answer: A or B?", None), ("Answer: (A) or (B)", None), ("(A) and (B) are both possible", None),
    ("A nurse from Lyon", None), ("the answer is a nurse", None), ("None of them", None), ("E", None),
    ("Answer: E", None), ("", None), (None, None), ("I do not know.", None),
])
def test_parse_choice(text, expected):
    assert parse_choice(text, LABELS) == expected


def test_parse_choice_numeric_labels_and_option_texts():
    labels = option_labels(30)
    assert parse_choice("Answer: 12", labels) == "12" and parse_choice("12. Ann Lee", labels) == "12"
    assert parse_choice("31", labels) is None
    assert parse_choice("It is Ann Lee.", ["A", "B"], options=["Ann Lee", "Bo Ng"]) == "A"
    assert parse_choice("Ann Lee or Bo Ng", ["A", "B"], options=["Ann Lee", "Bo Ng"]) is None
    assert parse_choice("B", []) is None


@pytest.mark.parametrize("text, allowed, expected", [
    ("female", ["male", "female"], "female"), ("Female.", ["male", "female"], "female"),
    ("  MALE  ", ["male", "female"], "male"), ("Gender: Female", ["male", "female"], "female"),
    ("**female**", ["male", "female"], "female"), ("She is female.", ["male", "female"], "female"),
    ("Software Engineer", ["software-engineer", "nurse"], "software-engineer"),
    ("Occupation: software_engineer", ["Software Engineer", "nurse"], "Software Engineer"),
    ("25-34", ["18-24", "25-34", "35-44"], "25-34"), ("Age range: 25 - 34", ["18-24", "25-34"], "25-34"),
    ("project manager", ["manager", "project manager"], "project manager"),
    ("The person is male, not female", ["male", "female"], None),
    ("teacher", ["male", "female"], None), ("", ["male"], None), (None, ["male"], None),
    ("Lyon\nor maybe Paris", ["Lyon", "Paris"], "Lyon"),
    ("Answer: Lyon", None, "Lyon"), ('"Night   nurse".', None, "Night nurse"), ("  nurse\n\nwhy: ...", None, "nurse"),
    ("Occupation: night nurse", None, "night nurse"), ("...", None, None), ("", None, None),
    ("12:30 pm", None, "12:30 pm"),
])
def test_parse_attribute(text, allowed, expected):
    assert parse_attribute(text, allowed) == expected


def test_normalise_value():
    assert normalise_value(" Software-Engineer ") == normalise_value("software_engineer") == "software engineer"
