"""The curator's decisions table: built from suggestions, accepted and rejected row by row, written and read
back (through a spreadsheet too: formula-like cells neutralised and restored), checked against the release and
against its audit (configuration id; edits that change nothing or write words of their own), edits typed by the
curator as rows, and the allow list's edits and where its words stay."""

from __future__ import annotations

import csv
import io
import json
import unicodedata

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.audit.rescoring import Risk
from cpa_core.common.errors import DataError
from cpa_core.io.tables import load_registry
from cpa_core.redaction.decisions import (
    ALLOW_LIST,
    OVERLAPS,
    RAISES_RISK,
    EditCounts,
    accepted,
    allow_edits,
    allow_list_kept,
    allow_rows,
    curator_rows,
    decisions_csv,
    decisions_summary,
    decisions_table,
    edit_words,
    read_decisions,
    review_decisions,
    text_edits,
)
from cpa_core.redaction.replacements import Replacer
from cpa_core.redaction.suggestions import Edit, Step, Suggestion, apply_edits
from cpa_core.report.worklist import FORMULA_PREFIXES

TEXTS = {"a": "Ann, a nurse from Leeds, plays bingo twice a week.", "b": "Bob drove a bus in Leeds.",
         "c": "Nothing here at all."}
CONFIG = "d9bd1581cdb9"


def suggestions():
    leeds = Edit(18, 5, "Leeds", "[CITY]", "leeds")
    bingo = Edit(31, 5, "bingo", "[REDACTED]", "bingo")
    safe = Suggestion("a", Risk(2, 0.5, 0.6), Risk(12, 0.05, 0.1), (leeds, bingo), 11,
                      steps=(Step("leeds", Risk(6, 0.2, 0.3)), Step("bingo", Risk(12, 0.05, 0.1))))
    stuck = Suggestion("b", Risk(1, 0.7, 0.8), Risk(3, 0.4, 0.5), (Edit(19, 5, "Leeds", "[CITY]", "leeds"),), 11,
                       action="withhold", reason="after redacting 1 term (1 edit), |C| = 3 < k = 11",
                       steps=(Step("leeds", Risk(3, 0.4, 0.5)),))
    return [safe, stuck]


def test_the_table_lists_every_edit_with_its_effect_and_a_row_to_withhold_what_no_edit_makes_safe():
    table = decisions_table(suggestions())
    assert table[["doc_id", "action", "original", "source", "set_size_after", "accept"]].values.tolist() == [
        ["a", "edit", "Leeds", "suggested", 6, True], ["a", "edit", "bingo", "suggested", 12, True],
        ["b", "edit", "Leeds", "suggested", 3, True], ["b", "withhold", "", "suggested", 3, True]]
    assert table.loc[3, "reason"].startswith("after redacting 1 term (1 edit)") and table.loc[0, "linkage_after"] == 0.2
    edits, withheld = accepted(table)
    assert [e.original for e in edits["a"]] == ["Leeds", "bingo"] and withheld == {"b"}
    table.loc[1, "accept"] = False  # the curator rejects "bingo" and keeps document b
    table.loc[3, "accept"] = False
    edits, withheld = accepted(table)
    assert apply_edits(TEXTS["a"], edits["a"]) == "Ann, a nurse from [CITY], plays bingo twice a week."
    assert withheld == set()


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_table_written_and_read_back_gives_the_same_decisions(tmp_path, suffix):
    table = decisions_table(suggestions())
    table.loc[1, "accept"] = False
    path = tmp_path / f"decisions.{suffix}"
    if suffix == "csv":
        path.write_text(decisions_csv(table, CONFIG), encoding="utf-8")
    else:
        table.to_parquet(path, index=False)
    again = read_decisions(path, TEXTS)
    assert accepted(again) == accepted(table)
    assert again["accept"].tolist() == table["accept"].tolist()


@pytest.mark.parametrize("change, words", [
    (lambda f: f.assign(doc_id=["a", "zz", "b", "b"]), ["row 2", "column 'doc_id'", "not in the release", "'zz'"]),
    (lambda f: f.assign(accept=["true", "maybe", "true", "true"]), ["row 2", "column 'accept'", "'maybe'"]),
    (lambda f: f.assign(action=["edit", "blur", "edit", "withhold"]), ["row 2", "column 'action'", "unknown action"]),
    (lambda f: f.assign(offset=[18, 32, 19, None]), ["row 2", "column 'original'", "not what the document holds"]),
    (lambda f: f.assign(offset=[18, 300, 19, None]), ["row 2", "column 'offset'", "beyond the end"]),
    (lambda f: f.assign(length=[5, "five", 5, None]), ["row 2", "column 'length'", "'five'"]),
    (lambda f: f.assign(offset=[18, 20, 19, None], original=["Leeds", "eds, ", "Leeds", ""]),
     ["row 2", "overlap", "column 'offset'"]),
    (lambda f: f.drop(columns=["accept"]), ["missing column 'accept'"]),
])
def test_a_bad_table_is_refused_naming_the_file_row_and_column_never_the_text(tmp_path, change, words):
    table = decisions_table(suggestions())
    path = tmp_path / "reviewed.csv"
    change(table).to_csv(path, index=False)
    with pytest.raises(DataError) as raised:
        read_decisions(path, TEXTS)
    message = str(raised.value)
    assert message.startswith(str(path)) and all(w in message for w in words), message
    assert "nurse" not in message and "bingo" not in message and "\n" not in message


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab c.,é", max_size=30), st.text(alphabet="ab c.,é[]X", max_size=30))
def test_the_edits_between_two_texts_turn_one_into_the_other(released, edited):
    edits = text_edits(released, edited)
    assert apply_edits(released, edits) == edited
    assert all(released[e.offset:e.offset + e.length] == e.original for e in edits)


def test_a_text_the_curator_writes_becomes_rows_and_keeps_the_suggestions_it_keeps():
    table = decisions_table(suggestions()[:1])
    released = TEXTS["a"]
    # the curator keeps [CITY], undoes [REDACTED] and writes "[NAME]" for Ann
    edited = "[NAME], a nurse from [CITY], plays bingo twice a week."
    after = curator_rows(table, "a", released, edited)
    rows = after[["original", "replacement", "source", "accept"]].values.tolist()
    assert rows == [["Leeds", "[CITY]", "suggested", True], ["bingo", "[REDACTED]", "suggested", False],
                    ["Ann", "[NAME]", "curator", True]]
    edits, _ = accepted(after)
    assert apply_edits(released, edits["a"]) == edited
    # writing again replaces the curator's rows of the document
    again = curator_rows(after, "a", released, "Ann, a nurse from [CITY], plays [REDACTED] twice a [PERIOD].")
    assert again[["original", "source", "accept"]].values.tolist() == [
        ["Leeds", "suggested", True], ["bingo", "suggested", True], ["week", "curator", True]]
    assert apply_edits(released, accepted(again)[0]["a"]) == "Ann, a nurse from [CITY], plays [REDACTED] twice a [PERIOD]."


def test_the_allow_list_redacts_every_whole_word_occurrence_and_says_when_it_raises_a_risk():
    found = allow_edits(TEXTS, ["leeds", "BUS", "twice a week", "ee"], Replacer("placeholder").choose)
    assert {d: [e.original for e in edits] for d, edits in found.items()} == {
        "a": ["Leeds", "twice a week"], "b": ["bus", "Leeds"]}
    assert all(e.replacement == "[REDACTED]" for edits in found.values() for e in edits)
    rows = allow_rows(found, {"a": Risk(5, 0.2, 0.5), "b": Risk(5, 0.2, 0.5)},
                      {"a": Risk(7, 0.1, 0.4), "b": Risk(3, 0.1, 0.4)})
    frame = pd.DataFrame(rows)
    assert frame.groupby("doc_id")["accept"].all().to_dict() == {"a": True, "b": False}
    assert set(frame.loc[frame["doc_id"] == "b", "reason"]) == {RAISES_RISK}


# ------------------------------------------------------------------------------------- through a spreadsheet

HOSTILE = {"=cmd|' /C calc'!A0": "=SUM(A1) +44 -x @me 'tis\tTab and Kraków.", "'quoted": "plain words here"}
HOSTILE_EDITS = [("=cmd|' /C calc'!A0", 0, "=SUM(A1)"), ("=cmd|' /C calc'!A0", 9, "+44"),
                 ("=cmd|' /C calc'!A0", 13, "-x"), ("=cmd|' /C calc'!A0", 16, "@me"),
                 ("=cmd|' /C calc'!A0", 20, "'tis"), ("=cmd|' /C calc'!A0", 24, "\tTab"), ("'quoted", 0, "plain")]


def hostile_table() -> pd.DataFrame:
    rows = [{"doc_id": d, "action": "edit", "offset": o, "length": len(w), "original": w,
             "replacement": "[REDACTED]" if i % 2 else "", "term": w, "kind": "placeholder" if i % 2 else "delete",
             "source": "curator",
             "reason": "-" + w, "accept": True} for i, (d, o, w) in enumerate(HOSTILE_EDITS)]
    return typed_table(rows)


def read_back(text: str, name: str = "decisions.csv") -> pd.DataFrame:
    return read_decisions(text.encode("utf-8"), HOSTILE, name=name)


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]


def test_a_written_table_runs_no_formula_in_a_spreadsheet_and_reads_back_as_it_was():
    table = hostile_table()
    assert table["original"].tolist() == [w for _, _, w in HOSTILE_EDITS]
    written = decisions_csv(table, CONFIG)
    assert not [cell for cell in cells(written) if cell.startswith(FORMULA_PREFIXES)]
    assert "'=SUM(A1)" in cells(written) and "''tis" in cells(written) and "''quoted" in cells(written)
    again = read_back(written)
    pd.testing.assert_frame_equal(again, table)
    assert apply_edits(HOSTILE["=cmd|' /C calc'!A0"], accepted(again)[0]["=cmd|' /C calc'!A0"]) == \
        " [REDACTED]  [REDACTED] [REDACTED] and Kraków."


def test_a_spreadsheet_that_saves_formula_cells_as_their_text_gives_the_same_table_back():
    table = hostile_table()
    written = list(csv.reader(io.StringIO(decisions_csv(table, CONFIG), newline="")))
    saved = io.StringIO()  # a spreadsheet that shows '=SUM(A1) as text and saves the text, without the apostrophe
    csv.writer(saved, lineterminator="\r\n").writerows(
        [[c[1:] if c.startswith("'") and c[1:].startswith(FORMULA_PREFIXES) else c for c in row] for row in written])
    pd.testing.assert_frame_equal(read_back(saved.getvalue()), table)


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="=+-@'\t\r\n\"ab ,é[]", min_size=1, max_size=12),
       st.text(alphabet="=+-@'\t\"ab ,é[]", max_size=12))
def test_any_original_and_term_survive_the_round_trip(original, term):
    texts = {"d": original}
    table = typed_table([{"doc_id": "d", "action": "edit", "offset": 0, "length": len(original),
                          "original": original, "replacement": "", "term": term, "source": "curator",
                          "reason": term, "accept": True}])
    written = decisions_csv(table, CONFIG)
    assert not [cell for cell in cells(written) if cell.startswith(FORMULA_PREFIXES)]
    again = read_decisions(written.encode("utf-8"), texts, name="decisions.csv")
    assert again[["original", "term", "reason"]].values.tolist() == [[original, term if term.strip() else "", term]]


def typed_table(rows: list[dict]) -> pd.DataFrame:
    from cpa_core.redaction.decisions import typed

    return typed(pd.DataFrame(rows))


# ------------------------------------------------------------------------------------- applied edits

TOY_REGISTRY = """identity_id,age_band,city,region
P1,30-39,Leeds,Yorkshire
P2,40-49,Leeds,Yorkshire
P3,30-39,York,Yorkshire
P4,50-59,Bristol,South West
P5,40-49,Bristol,South West
"""
APPLIED = {"a": "Ann Smith, aged 34, a nurse from Leeds, played bingo in 2014.", "b": "Bob drove a bus."}


@pytest.fixture(scope="module")
def generalizer():
    return Replacer.from_registry(load_registry(TOY_REGISTRY.encode("utf-8"), name="toy.csv"), "generalize")


def edit_row(doc_id: str, word: str, replacement: str, accept: bool = True, **extra) -> dict:
    offset = APPLIED[doc_id].index(word)
    return {"doc_id": doc_id, "action": "edit", "offset": offset, "length": len(word), "original": word,
            "replacement": replacement, "term": word, "source": "suggested", "accept": accept, "config_id": CONFIG,
            **extra}


def reviewed_file(tmp_path, rows: list[dict], name: str = "reviewed.csv", encoding: str = "utf-8"):
    path = tmp_path / name
    path.write_bytes(pd.DataFrame(rows).to_csv(index=False).encode(encoding))
    return path


def test_words_an_edit_adds_and_keeps_case_accents_and_the_tools_placeholders_aside():
    assert edit_words("Leeds", "[CITY]") == (0, 0) and edit_words("Leeds", "") == (0, 0)
    assert edit_words("Ann Smith", "Ann [SURNAME]") == (0, 1)
    assert edit_words("", "John") == (1, 0) and edit_words("Ann", "John Smith") == (2, 0)
    assert edit_words("Kraków", "KRAKOW") == (0, 1)
    assert edit_words("Ann", "[Ann]") == (0, 1)  # not a placeholder the tool writes: the name is kept
    assert edit_words("34", "30-39") == (2, 0) and edit_words("bus", " [REDACTED], ") == (0, 0)


def test_a_no_op_is_no_edit_and_an_edit_keeping_words_is_applied_and_counted(tmp_path, generalizer):
    rows = [edit_row("a", "Leeds", "Leeds"), edit_row("a", "Ann Smith", "Ann [SURNAME]"),
            edit_row("a", "bingo", "[REDACTED]"), edit_row("b", "bus", "bus", accept=False)]
    table, notes = review_decisions(reviewed_file(tmp_path, rows), APPLIED, CONFIG, generalizer=generalizer)
    assert notes == []
    edits, _ = accepted(table)
    assert [e.original for e in edits["a"]] == ["Ann Smith", "bingo"] and "b" not in edits
    counts = EditCounts.of(table)
    assert counts == EditCounts(no_ops=(1,), keeping_words=(2,))
    assert counts.said() == ["1 no-op edit not applied (the replacement is the original: row 1)",
                             "1 edit keeps words of the original (row 2)"]
    summary = decisions_summary(table, CONFIG)
    assert summary["applied_edits"] == 2 and summary["characters"] == len("Ann Smith") + len("bingo")
    assert summary["no_op_edits"] == {"count": 1, "rows": [1]} and summary["edits_keeping_words"] == {"count": 1,
                                                                                                      "rows": [2]}


def test_an_edit_that_writes_words_of_its_own_is_refused_naming_the_row_never_the_words(tmp_path, generalizer):
    rows = [edit_row("a", "bingo", "[REDACTED]"), edit_row("a", "Ann Smith", "John Doe")]
    path = reviewed_file(tmp_path, rows)
    with pytest.raises(DataError) as raised:
        review_decisions(path, APPLIED, CONFIG, generalizer=generalizer)
    message = str(raised.value)
    assert message.startswith(f"{path}, row 2, column 'replacement': the edit writes words its original does not have")
    assert "found 2 new words" in message and "--generalization" in message
    assert "John" not in message and "Ann" not in message and "\n" not in message
    # an insertion (an empty original) of a name is refused alike; a rejected one is not applied, hence not checked
    inserted = dict(edit_row("b", "bus", "Robert "), offset=4, length=0, original="")
    for accept, refused in ((True, True), (False, False)):
        path = reviewed_file(tmp_path, [{**inserted, "accept": accept}], name=f"insert-{accept}.csv")
        if refused:
            with pytest.raises(DataError, match="row 1, column 'replacement'.*1 new word"):
                review_decisions(path, APPLIED, CONFIG, generalizer=generalizer)
        else:
            assert not accepted(review_decisions(path, APPLIED, CONFIG, generalizer=generalizer)[0])[0]


def test_the_curators_own_rewording_is_applied_and_said(tmp_path, generalizer):
    """What the curator wrote in the dashboard's drill-down ("a nurse" for a name) is the curator's decision: applied
    as written, and said, never refused (the redacted release is audited again)."""
    rows = [edit_row("a", "Ann Smith", "A woman", source="curator"), edit_row("a", "bingo", "[REDACTED]")]
    path = reviewed_file(tmp_path, rows)
    table, notes = review_decisions(path, APPLIED, CONFIG, generalizer=generalizer)
    assert apply_edits(APPLIED["a"], accepted(table)[0]["a"]).startswith("A woman, aged 34")
    assert notes == [f"{path}: row 1 of the curator or of an LLM rewrite writes words the original does not have: "
                     "applied as written; audit the redacted release again to judge them"]
    assert "Ann" not in notes[0] and "woman" not in notes[0]
    # an LLM rewrite the attack kept (kind rewrite) likewise; the same words as a suggested placeholder edit are refused
    rewrite = [edit_row("a", "Ann Smith", "A woman", kind="rewrite", term="rewrite")]
    table, notes = review_decisions(reviewed_file(tmp_path, rewrite, "rewrite.csv"), APPLIED, CONFIG,
                                    generalizer=generalizer)
    assert apply_edits(APPLIED["a"], accepted(table)[0]["a"]).startswith("A woman, aged 34") and len(notes) == 1
    with pytest.raises(DataError, match="the edit writes words its original does not have"):
        review_decisions(reviewed_file(tmp_path, [edit_row("a", "Ann Smith", "A woman", kind="placeholder")],
                                       "forged.csv"), APPLIED, CONFIG, generalizer=generalizer)


def test_the_tools_own_generalisations_and_placeholders_are_accepted(tmp_path, generalizer):
    rows = [edit_row("a", "Leeds", "Yorkshire", kind="generalize"), edit_row("a", "34", "30-39", kind="generalize"),
            edit_row("a", "2014", "the 2010s", kind="generalize"), edit_row("a", "Ann Smith", "[NAME]"),
            edit_row("b", "bus", "")]
    table, _ = review_decisions(reviewed_file(tmp_path, rows), APPLIED, CONFIG, generalizer=generalizer)
    assert apply_edits(APPLIED["a"], accepted(table)[0]["a"]) == \
        "[NAME], aged 30-39, a nurse from Yorkshire, played bingo in the 2010s."
    # a generalisation the registry does not give, and one given without the registry, are words of their own
    for row, given in ((edit_row("a", "Leeds", "Wales"), generalizer), (edit_row("a", "Leeds", "Yorkshire"), None)):
        with pytest.raises(DataError, match="row 1, column 'replacement'"):
            review_decisions(reviewed_file(tmp_path, [row], name="other.csv"), APPLIED, CONFIG, generalizer=given)


def test_a_curators_table_declares_its_generalisations(tmp_path):
    from cpa_core.redaction.replacements import load_generalization

    registry = load_registry(TOY_REGISTRY.encode("utf-8"), name="toy.csv")
    table = load_generalization(b"value,general\nLeeds,the North\n", name="general.csv")
    path = reviewed_file(tmp_path, [edit_row("a", "Leeds", "the North", kind="generalize")])
    with pytest.raises(DataError, match="new words"):
        review_decisions(path, APPLIED, CONFIG, generalizer=Replacer.from_registry(registry, "generalize"))
    reviewed, _ = review_decisions(path, APPLIED, CONFIG,
                                   generalizer=Replacer.from_registry(registry, "generalize", table))
    assert accepted(reviewed)[0]["a"][0].replacement == "the North"


def test_decisions_of_another_audit_are_refused_and_a_table_without_the_column_is_applied_with_a_warning(tmp_path):
    rows = [edit_row("a", "bingo", "[REDACTED]"), edit_row("b", "bus", "[REDACTED]", config_id="0123abcd4567")]
    path = reviewed_file(tmp_path, rows)
    with pytest.raises(DataError) as raised:
        review_decisions(path, APPLIED, CONFIG)
    assert str(raised.value) == (f"{path}, row 2, column 'config_id': decisions of another audit; expected this "
                                 f"audit's configuration id {CONFIG}, found '0123abcd4567'")
    old = reviewed_file(tmp_path, [{k: v for k, v in row.items() if k != "config_id"} for row in rows], "old.csv")
    table, notes = review_decisions(old, APPLIED, CONFIG)
    assert len(accepted(table)[0]) == 2 and notes == [
        f"{old}: no column 'config_id' (a table written before decisions named their audit): applied without "
        f"checking that it decides audit {CONFIG}"]
    blank = reviewed_file(tmp_path, [rows[0], {**rows[1], "config_id": ""}], "blank.csv")
    assert review_decisions(blank, APPLIED, CONFIG)[1] == [
        f"{blank}: row 2 names no configuration (column 'config_id' empty): applied as decisions of audit {CONFIG}"]


def test_a_table_saved_in_utf16_or_cp1252_is_read_in_its_encoding(tmp_path):
    texts = {"k": "Moved from Kraków to Orléans."}
    rows = [{"doc_id": "k", "action": "edit", "offset": 11, "length": 6, "original": "Kraków", "replacement": "",
             "accept": True, "config_id": CONFIG}]
    for encoding, declared in (("utf-16", "utf-8"), ("utf-16-le", "utf-16-le"), ("cp1252", "cp1252")):
        path = tmp_path / f"{encoding}.csv"
        path.write_bytes(("\ufeff" if encoding == "utf-16-le" else "").encode(encoding)
                         + pd.DataFrame(rows).to_csv(index=False).encode(encoding))
        table, _ = review_decisions(path, texts, CONFIG, encoding=declared)
        assert accepted(table)[0]["k"][0].original == "Kraków", encoding
    with pytest.raises(DataError) as raised:
        review_decisions(tmp_path / "cp1252.csv", texts, CONFIG)
    assert "row 1" in str(raised.value) and "declare it" in str(raised.value) and "found byte 0xf3" in str(raised.value)


def test_a_repeated_edit_is_refused(tmp_path):
    row = edit_row("a", "bingo", "[REDACTED]")
    with pytest.raises(DataError, match="row 2, column 'offset': two accepted edits of document 'a' edit the same"):
        review_decisions(reviewed_file(tmp_path, [row, row]), APPLIED, CONFIG)
    inserted = dict(edit_row("b", "bus", ", "), offset=4, length=0, original="")
    with pytest.raises(DataError, match="row 2, column 'offset'"):
        review_decisions(reviewed_file(tmp_path, [inserted, inserted], "twice.csv"), APPLIED, CONFIG)


# ------------------------------------------------------------------------------------- the allow list's words

def test_the_allow_list_finds_a_word_in_either_normal_form_any_case_and_only_whole():
    nfc = "Kraków"
    nfd = unicodedata.normalize("NFD", nfc)
    texts = {"nfc": f"moved from {nfc} in 2017", "nfd": f"moved from {nfd} in 2017", "upper": "KRAKÓW.",
             "plain": "Krakow!", "owned": f"{nfc}'s market", "dashed": f"{nfc}-based", "inside": f"{nfc}ie, w{nfc}",
             "nfd inside": f"{nfd}ie"}
    for word in (nfc, nfd, "KRAKÓW", "krakow"):
        found = allow_edits(texts, [word], Replacer("placeholder").choose)
        assert {d: [(e.offset, e.original) for e in edits] for d, edits in found.items()} == {
            "nfc": [(11, nfc)], "nfd": [(11, nfd)], "upper": [(0, "KRAKÓW")], "plain": [(0, "Krakow")],
            "owned": [(0, nfc)], "dashed": [(0, nfc)]}, word
        assert all(apply_edits(texts[d], edits).count("[REDACTED]") == 1 for d, edits in found.items())


def test_where_the_allow_lists_words_stay_and_why():
    rows = [
        {"doc_id": "a", "action": "edit", "offset": 18, "length": 5, "original": "Leeds", "replacement": "[CITY]",
         "source": ALLOW_LIST, "accept": True},                                   # redacted
        {"doc_id": "b", "action": "edit", "offset": 19, "length": 5, "original": "Leeds", "replacement": "[CITY]",
         "source": ALLOW_LIST, "accept": False, "reason": RAISES_RISK},           # kept: it would raise the risk
        {"doc_id": "c", "action": "edit", "offset": 0, "length": 7, "original": "Nothing", "replacement": "[X]",
         "source": ALLOW_LIST, "accept": False, "reason": OVERLAPS},              # covered by the suggested edit
        {"doc_id": "c", "action": "edit", "offset": 0, "length": 12, "original": "Nothing here",
         "replacement": "[REDACTED]", "source": "suggested", "accept": True},
        {"doc_id": "d", "action": "edit", "offset": 0, "length": 3, "original": "Dan", "replacement": "Dan",
         "source": ALLOW_LIST, "accept": True},                                   # kept: a no-op
        {"doc_id": "e", "action": "edit", "offset": 0, "length": 3, "original": "Eve", "replacement": "[NAME]",
         "source": ALLOW_LIST, "accept": False, "reason": RAISES_RISK},           # in a withheld document
        {"doc_id": "e", "action": "withhold", "source": "suggested", "accept": True},
        {"doc_id": "f", "action": "edit", "offset": 0, "length": 3, "original": "Fay", "replacement": "[NAME]",
         "source": ALLOW_LIST, "accept": False, "reason": ""},                    # kept: the curator said no
    ]
    table = typed_table(rows)
    kept = allow_list_kept(table)
    assert kept == {RAISES_RISK: ["b"], "its edit is a no-op (the replacement is the original)": ["d"],
                    "not accepted in the decisions table": ["f"]}
    summary = decisions_summary(table, CONFIG)
    assert summary["allow_list_kept"][0] == {"reason": RAISES_RISK, "documents": 1, "doc_ids": ["b"]}
    assert json.loads(json.dumps(summary)) == summary


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["edit", "withhold"]),
                               st.integers(0, 30), st.integers(1, 6), st.booleans(), st.booleans()), max_size=25))
def test_the_characters_an_accepted_table_redacts_are_those_of_its_accepted_edits(rows):
    from cpa_core.redaction.decisions import accepted_lengths
    from cpa_core.redaction.utility import characters_utility, release_utility

    table = typed_table([{"doc_id": d, "action": action, "offset": offset if action == "edit" else None,
                          "length": length if action == "edit" else None, "original": "x" * length,
                          "replacement": "x" * length if same else "[X]", "term": "t", "kind": "placeholder",
                          "source": "curator", "reason": "", "accept": take}
                         for d, action, offset, length, same, take in rows])
    edits, withheld = accepted(table)
    removed, withheld_too = accepted_lengths(table)
    assert withheld_too == withheld
    assert removed == {d: sum(e.length for e in document) for d, document in edits.items()}
    texts = {d: "y" * 60 for d in "abcd"}
    assert characters_utility(texts, removed, withheld).summary() == release_utility(texts, edits, withheld).summary()
    # and both are what the rows say, read one by one: the edits that change the text, accepted, of a document
    # released (no accepted withhold row of its own)
    take = [(d, length) for d, action, _, length, same, keep in rows if action == "edit" and keep and not same
            and not any(w == d and a == "withhold" and k for w, a, _, _, _, k in rows)]
    assert removed == {d: sum(n for w, n in take if w == d) for d in dict.fromkeys(w for w, _ in take)}
    assert withheld == {d for d, action, *_, keep in rows if action == "withhold" and keep}
