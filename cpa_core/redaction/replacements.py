"""What a redacted span becomes: nothing, a category placeholder, or a generalisation a curator would accept.

A :class:`Replacer` is built once per audit from the registry (and, for ``generalize``, an optional table of
the curator's own generalisations) and then called on each :class:`~cpa_core.attack.explainers.Span` of evidence:

``delete``
    the span is removed.
``placeholder``
    the span becomes the category the data says it is: ``[CITY]`` when its text is (case- and
    accent-insensitively) a value of the registry's ``city`` field, ``[OCCUPATION]`` for a word of an
    occupation, ``[YEAR]``, ``[NUMBER]``, ``[DATE]``, ``[AGE]`` for what looks like one, ``[REDACTED]`` otherwise.
``generalize``
    the span becomes a coarser value where the data allows: a value of the curator's table
    (:func:`load_generalization`), a registry value that functionally determines a coarser field
    (city -> region: :func:`field_hierarchies`), an exact age -> its band, a year -> its decade ("2014" ->
    "the 2010s"); anything else gets the category placeholder.

Every placeholder matches :data:`~cpa_core.io.placeholders.DEFAULT_PLACEHOLDERS`, so it is never evidence again. A
generalised value may be: the greedy of :mod:`cpa_core.redaction` never takes evidence that touches what an
edit wrote, and a new audit of the redacted release counts what is left.

Which field a value belongs to: registry cells are split into elements at ``;`` (lists such as keywords);
fields whose typical element is a long text (more than :data:`FREE_TEXT_WORDS` words, e.g. a profile) name no
category. A word of a value names the value's field only when it is at least half of it (:data:`MIN_WORD_SHARE`).
When a text belongs to several fields, the most specific one is taken: a whole value before a word of a value, then the field where the text is the larger part of a value, then the field with more distinct
values, then the earlier column.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from cpa_core.attack.explainers import Span
from cpa_core.common.errors import ConfigError, DataError
from cpa_core.io.columns import REGISTRY_ID
from cpa_core.io.reading import read_table, short
from cpa_core.io.tables import _is_missing

if TYPE_CHECKING:
    import pandas as pd

    from cpa_core.io.tables import Registry

STRATEGIES = {
    "delete": "delete the words",
    "placeholder": "a placeholder: the category the registry gives ([CITY], [OCCUPATION], ...), [YEAR], [NUMBER], "
                   "[DATE], [AGE], or [REDACTED]",
    "generalize": "a generalisation where the data allows (city -> region, age -> band, year -> decade, or the "
                  "curator's table), else the category placeholder",
}
"""The named replacement strategies."""
KINDS = ("delete", "placeholder", "generalize", "rewrite")  # rewrite: an LLM rewrite (cpa_core.redaction.rewrite)
"""What an edit's replacement is (recorded on each edit)."""
REDACTED = "[REDACTED]"
FREE_TEXT_WORDS = 8
MIN_WORD_SHARE = 0.5
"""A word names its field's category when it is at least half of a value ("bus" of "bus driver" is an occupation;
"twice" of "swims twice a week" is no keyword)."""
"""A field whose median value has more words than this is free text: it names no category."""
LIST_SEPARATOR = ";"
TABLE_COLUMNS = ("value", "general")
TABLE_OPTIONAL = ("field",)
_MAX_LABEL = 38  # "[" + label + "]" stays within the placeholder pattern of the evidence module

_YEAR = re.compile(r"(?:1[5-9]|20)\d\d")
_DECADE = re.compile(r"(?:1[5-9]|20)\d0'?s")
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)*(?:%|st|nd|rd|th)?", re.IGNORECASE)
_MONTHS = ("january", "february", "march", "april", "june", "july", "august", "september", "october", "november",
           "december")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|" + "|".join(_MONTHS) + r")\.?"
_DATE = re.compile("|".join((
    r"\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}",                                       # 12/03/2019, 2019-03-12
    rf"(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?{_MONTH}(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?,?\s+\d{{4}}",  # 12 March 2019
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}",                                   # 12 March
    rf"{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?",                                   # March 12
)), re.IGNORECASE)
_AGE_AFTER = re.compile(r"[\s-]*(?:years?|yrs?)[\s-]*old\b|[\s-]*y/?o\b", re.IGNORECASE)
_AGE_BEFORE = re.compile(r"\b(?:aged|age)\s*:?\s*$", re.IGNORECASE)
_THE_BEFORE = re.compile(r"\bthe\s+$", re.IGNORECASE)
_BAND = re.compile(r"\s*(\d{1,3})\s*(?:-|–|to)\s*(\d{1,3})\s*|\s*(\d{1,3})\s*(?:\+|and over|or over|plus)\s*",
                   re.IGNORECASE)
_WORDS = re.compile(r"\w+")


def fold(text) -> str:
    """Text compared without case, accents and runs of white space ("Gdańsk " -> "gdansk")."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).casefold().split())


def placeholder_label(name: str) -> str:
    """A registry field's placeholder: ``[CITY]`` for ``city``, ``[AGE_BAND]`` for ``age band``."""
    label = re.sub(r"[^A-Z0-9]+", "_", fold(name).upper()).strip("_")[:_MAX_LABEL].strip("_")
    return f"[{label}]" if label else REDACTED


def decade(year: int) -> str:
    return f"{year // 10 * 10}s"


def _elements(value) -> list[str]:
    """The values a registry cell holds: a list's items, or a text split at ``;``."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [e for item in value for e in _elements(item)]
    if isinstance(value, (dict, bool, np.bool_)) or _is_missing(value):
        return []
    if isinstance(value, (float, np.floating)):
        if np.isnan(value):
            return []
        value = int(value) if float(value).is_integer() else value
    return [part.strip() for part in str(value).split(LIST_SEPARATOR) if part.strip()]


def _parse_band(label: str) -> tuple[int, int] | None:
    match = _BAND.fullmatch(label)
    if match is None:
        return None
    if match.group(3) is not None:
        return int(match.group(3)), 200
    low, high = int(match.group(1)), int(match.group(2))
    return (low, high) if low <= high else None


@dataclass(frozen=True)
class FieldInfo:
    """A registry field as a source of categories."""

    name: str
    column: int  # its position among the registry's fields
    n_distinct: int  # distinct (folded) values
    median_words: float
    multi_valued: bool  # some cell holds more than one value

    @property
    def free_text(self) -> bool:
        return self.median_words > FREE_TEXT_WORDS


@dataclass(frozen=True)
class Vocabulary:
    """What the registry says texts are: its fields, the values and words of each, the hierarchies between
    fields (:func:`field_hierarchies`) and the field of age bands, if any."""

    fields: Mapping[str, FieldInfo] = field(default_factory=dict)
    whole: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # folded value -> category fields
    words: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # folded word -> field -> share
    hierarchies: Mapping[str, str] = field(default_factory=dict)  # field -> the coarser field it determines
    general: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # field -> folded value -> coarser value
    age_bands: tuple[str, tuple[tuple[int, int, str], ...]] | None = None  # (field, ((low, high, label), ...))

    @classmethod
    def from_frame(cls, frame: "pd.DataFrame") -> "Vocabulary":
        names = [c for c in frame.columns if c != REGISTRY_ID]
        cells = {name: _cells(frame[name].tolist()) for name in names}
        folded: dict[str, str] = {}  # each distinct element folded once

        def fold_once(item: str) -> str:
            key = folded.get(item)
            if key is None:
                key = folded[item] = fold(item)
            return key

        infos: dict[str, FieldInfo] = {}
        whole: dict[str, list[str]] = {}
        words: dict[str, dict[str, float]] = {}
        for column, name in enumerate(names):
            raw = list(dict.fromkeys(item for items in cells[name] for item in items))
            sample = raw[:2000]
            typical = float(median(len(_WORDS.findall(v)) for v in sample)) if sample else 0.0
            multi = any(len(items) > 1 for items in cells[name])
            if typical > FREE_TEXT_WORDS:  # free text: no category, never folded
                infos[name] = FieldInfo(name, column, len(raw), typical, multi)
                continue
            distinct = list(dict.fromkeys(fold_once(item) for item in raw))
            infos[name] = FieldInfo(name, column, len(distinct), typical, multi)
            for value in distinct:
                whole.setdefault(value, []).append(name)
                tokens = _WORDS.findall(value)
                for token in set(tokens):
                    best = words.setdefault(token, {})
                    best[name] = max(best.get(name, 0.0), 1.0 / len(tokens))
        single = [n for n in names if not infos[n].multi_valued and not infos[n].free_text and infos[n].n_distinct]
        rows = {n: [fold_once(items[0]) if items else None for items in cells[n]] for n in single}
        shown = {n: _spellings(cells[n], fold_once) for n in single}
        hierarchies = field_hierarchies(rows)
        general = {a: _mapping(rows[a], rows[b], shown[b]) for a, b in hierarchies.items()}
        return cls(infos, {k: tuple(v) for k, v in whole.items()}, words, hierarchies, general,
                   _age_bands(infos, shown))

    def _rank(self, name: str, share: float, is_whole: bool):
        info = self.fields[name]
        return (is_whole, share, info.n_distinct, -info.column)

    def fields_of(self, text: str, min_share: float = 0.0) -> list[str]:
        """The category fields of a text, most specific first (see the module's docstring); a word counts for a
        field when it is at least ``min_share`` of one of its values."""
        key = fold(text)
        ranked = {name: self._rank(name, 1.0, True) for name in self.whole.get(key, ())}
        tokens = _WORDS.findall(key)
        if len(tokens) == 1:
            for name, share in self.words.get(tokens[0], {}).items():
                if share >= min_share:
                    ranked.setdefault(name, self._rank(name, share, False))
        return sorted(ranked, key=ranked.get, reverse=True)

    def whole_fields(self, text: str) -> list[str]:
        """The fields of which the text is a whole value, most specific first."""
        return [name for name in self.fields_of(text) if name in self.whole.get(fold(text), ())]

    def band_of(self, age: int) -> str | None:
        """The registry's label of the age band holding ``age``, if it has such a field and band."""
        if self.age_bands is None:
            return None
        return next((label for low, high, label in self.age_bands[1] if low <= age <= high), None)

    def to_dict(self) -> dict:
        """What was derived (field names only, never values)."""
        return {"hierarchies": dict(self.hierarchies),
                "age_band_field": None if self.age_bands is None else self.age_bands[0],
                "category_fields": [n for n, info in self.fields.items() if not info.free_text and info.n_distinct]}


def _cells(values: Sequence) -> list[tuple[str, ...]]:
    """The elements of each cell of a column (each distinct text split once)."""
    memo: dict[str, tuple[str, ...]] = {}
    out = []
    for value in values:
        if isinstance(value, str):
            items = memo.get(value)
            if items is None:
                items = memo[value] = tuple(_elements(value))
        else:
            items = tuple(_elements(value))
        out.append(items)
    return out


def _spellings(cells: Sequence[tuple[str, ...]], fold_once=fold) -> dict[str, str]:
    """Each folded value's most frequent spelling (ties: the first seen)."""
    counts: dict[str, dict[str, int]] = {}
    for items in cells:
        for item in items[:1]:
            seen = counts.setdefault(fold_once(item), {})
            seen[item] = seen.get(item, 0) + 1
    return {key: max(seen, key=seen.get) for key, seen in counts.items()}


def _mapping(fine: Sequence[str | None], coarse: Sequence[str | None], shown: Mapping[str, str]) -> dict[str, str]:
    return {a: shown[b] for a, b in zip(fine, coarse) if a is not None and b is not None}


def field_hierarchies(columns: Mapping[str, Sequence[str | None]]) -> dict[str, str]:
    """For each field ``A`` (columns of one value per row, ``None`` when missing), the coarser field ``B`` it
    generalises to: on the rows where both are given, every ``A`` value goes with exactly one ``B`` value and
    ``B`` has fewer distinct values (city -> region). ``A`` must repeat (a value per row identifies, it does not
    categorise). Of several such ``B``, the one with the most distinct values (the next level up), then the
    earlier column. Values are compared as given (fold them first)."""
    names = list(columns)
    out: dict[str, str] = {}
    for a in names:
        present = [v for v in columns[a] if v is not None]
        n_a = len(set(present))
        if n_a < 2 or n_a >= len(present):
            continue
        best = None
        for index, b in enumerate(names):
            if b == a:
                continue
            pairs: dict[str, str] = {}
            functional = True
            for x, y in zip(columns[a], columns[b]):
                if x is None or y is None:
                    continue
                if pairs.setdefault(x, y) != y:
                    functional = False
                    break
            n_b = len(set(pairs.values()))
            if not functional or not pairs or n_b >= len(pairs):
                continue
            rank = (n_b, -index)
            if best is None or rank > best[0]:
                best = (rank, b)
        if best is not None:
            out[a] = best[1]
    return out


def _age_bands(infos: Mapping[str, FieldInfo], shown: Mapping[str, Mapping[str, str]]):
    """The field of age bands ("18-29", "80+"): every value parses as a band; a field named with "age" first,
    then the one with more bands, then the earlier column."""
    found = []
    for name, spellings in shown.items():
        bands = [(*_parse_band(label), label) for label in spellings.values() if _parse_band(label) is not None]
        if len(bands) >= 2 and len(bands) == len(spellings):
            found.append(((("age" in fold(name)), len(bands), -infos[name].column), name, tuple(sorted(bands))))
    if not found:
        return None
    _, name, bands = max(found)
    return name, bands


@dataclass(frozen=True)
class GeneralizationTable:
    """A curator's generalisations: ``value`` -> ``general``, optionally only for the value as a ``field``
    of the registry. ``file`` and ``sha256`` identify the table read."""

    file: str
    sha256: str
    entries: Mapping[tuple[str, str], str]  # (field or "", folded value) -> general

    def lookup(self, text: str, fields: Sequence[str] = ()) -> str | None:
        """The general value of a text: its entry for the first of ``fields`` (the registry's categories of the
        text, most specific first) that has one, else its entry without a field, else its only entry."""
        key = fold(text)
        for name in (*fields, ""):
            if (name, key) in self.entries:
                return self.entries[(name, key)]
        found = {general for (_, value), general in self.entries.items() if value == key}
        return found.pop() if len(found) == 1 else None

    def to_dict(self) -> dict:
        return {"file": self.file, "sha256": self.sha256, "entries": len(self.entries)}


def _table_cell(name: str, row: int, column: str, value, what: str) -> str:
    if isinstance(value, (bool, np.bool_)):
        raise DataError(name, f"the {column} is not text", row=row, column=column, expected=what,
                        found=f"the value {value}")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = str(value)
    if _is_missing(value) or (isinstance(value, str) and not value.strip()):
        raise DataError(name, f"the {column} is empty", row=row, column=column, expected=what, found="an empty cell")
    if not isinstance(value, str):
        raise DataError(name, f"the {column} is not text", row=row, column=column, expected=what,
                        found=f"a value of type {type(value).__name__}")
    if "\n" in value or "\r" in value:
        raise DataError(name, f"the {column} spans several lines", row=row, column=column, expected=what,
                        found="a line break")
    return value.strip()


def load_generalization(source: str | Path | bytes, *, name: str | None = None,
                        registry_fields: Iterable[str] | None = None, encoding: str = "utf-8"
                        ) -> GeneralizationTable:
    """Read a generalisation table (CSV, JSONL or Parquet) with columns ``value`` and ``general`` and optionally
    ``field`` (a registry field, checked against ``registry_fields`` when given). Rows are numbered from 1, the
    header excluded; a bad table raises :class:`~cpa_core.common.errors.DataError` naming the file, row and column,
    what was expected and what was found."""
    name = name or (str(source) if not isinstance(source, (bytes, bytearray)) else "<upload>")
    frame, sha256 = read_table(source, name, encoding=encoding)
    columns = {str(c).strip().lower(): c for c in frame.columns}
    expected = "columns value and general, and optionally field"
    for required in TABLE_COLUMNS:
        if required not in columns:
            raise DataError(name, f"missing column '{required}'", expected=expected,
                            found="columns " + ", ".join(f"'{short(c)}'" for c in frame.columns))
    extra = [c for c in columns if c not in TABLE_COLUMNS + TABLE_OPTIONAL]
    if extra:
        raise DataError(name, f"unexpected column '{short(columns[extra[0]])}'", column=str(columns[extra[0]]),
                        expected=expected, found=f"{len(frame.columns)} columns")
    known = None if registry_fields is None else {fold(f): f for f in registry_fields if f != REGISTRY_ID}
    entries: dict[tuple[str, str], str] = {}
    where: dict[tuple[str, str], int] = {}
    has_field = "field" in columns
    for row, record in enumerate(frame.to_dict(orient="records"), start=1):
        value = _table_cell(name, row, "value", record[columns["value"]], "the text to generalise")
        general = _table_cell(name, row, "general", record[columns["general"]], "its coarser value")
        scope = ""
        if has_field:
            raw = record[columns["field"]]
            if not (_is_missing(raw) or (isinstance(raw, str) and not raw.strip())):
                scope = _table_cell(name, row, "field", raw, "a registry field")
                if known is not None:
                    if fold(scope) not in known:
                        raise DataError(name, "unknown registry field", row=row, column="field",
                                        expected="one of " + ", ".join(sorted(known.values())),
                                        found=f"'{short(scope)}'")
                    scope = known[fold(scope)]
        if fold(general) == fold(value):
            raise DataError(name, "the value generalises to itself", row=row, column="general",
                            expected="a coarser value than the value", found=f"'{short(general)}'")
        key = (scope, fold(value))
        if key in entries and entries[key] != general:
            raise DataError(name, f"'{short(value)}' already generalises to '{short(entries[key])}' in row "
                            f"{where[key]}", row=row, column="general",
                            expected="one general value per value" + (" and field" if has_field else ""),
                            found=f"'{short(general)}'")
        entries.setdefault(key, general)
        where.setdefault(key, row)
    return GeneralizationTable(name, sha256, entries)


@dataclass(frozen=True)
class Choice:
    """A span's replacement and what kind it is (one of :data:`KINDS`)."""

    replacement: str
    kind: str


class Replacer:
    """What each redacted span becomes under a named strategy (see the module's docstring). Build it once per
    audit (:meth:`from_registry`); call it on a span for the replacement, or :meth:`choose` with the text the
    span's offsets are into for the replacement and its kind (ages and "the 2010s" read the words around)."""

    def __init__(self, strategy: str = "placeholder", vocabulary: Vocabulary | None = None,
                 table: GeneralizationTable | None = None):
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown redaction strategy '{strategy}'; expected one of {', '.join(STRATEGIES)}")
        if table is not None and strategy != "generalize":
            raise ConfigError(f"a generalisation table ({table.file}) applies to the 'generalize' strategy only; "
                              f"expected strategy generalize, found {strategy}")
        self.strategy = strategy
        self.vocabulary = vocabulary or Vocabulary()
        self.table = table

    @classmethod
    def from_registry(cls, registry: "Registry | None", strategy: str = "placeholder",
                      table: GeneralizationTable | None = None) -> "Replacer":
        if strategy == "delete" or registry is None:
            return cls(strategy, None, table)
        return cls(strategy, Vocabulary.from_frame(registry.frame), table)

    def __call__(self, span: Span) -> str:
        return self.choose(span).replacement

    def choose(self, span: Span, text: str | None = None) -> Choice:
        """The replacement of ``span`` (``text``: the text its offsets are into, for the words around it)."""
        if self.strategy == "delete":
            return Choice("", "delete")
        if self.strategy == "generalize":
            general = self.generalization(span, text)
            if general is not None:
                return Choice(general, "generalize")
        return Choice(self.placeholder(span, text), "placeholder")

    def placeholder(self, span: Span, text: str | None = None) -> str:
        """The category placeholder of a span: a whole registry value's field, then a date, an age, a year or a
        number, then the field of a word of a registry value, else ``[REDACTED]``."""
        vocabulary, words = self.vocabulary, span.text.strip()
        whole = vocabulary.whole_fields(words)
        if whole:
            return placeholder_label(whole[0])
        if _DATE.fullmatch(words) or _is_month_or_day(words):
            return "[DATE]"
        if _age(span, text) is not None:
            return "[AGE]"
        if _YEAR.fullmatch(words) or _DECADE.fullmatch(words):
            return "[YEAR]"
        if _NUMBER.fullmatch(words):
            return "[NUMBER]"
        fields = vocabulary.fields_of(words, min_share=MIN_WORD_SHARE)
        return placeholder_label(fields[0]) if fields else REDACTED

    def generalization(self, span: Span, text: str | None = None) -> str | None:
        """The coarser value of a span, or ``None`` when the data does not allow one."""
        vocabulary, words = self.vocabulary, span.text.strip()
        fields = vocabulary.fields_of(words)
        if self.table is not None:
            general = self.table.lookup(words, fields)
            if general is not None:
                return general
        for name in vocabulary.whole_fields(words):
            general = vocabulary.general.get(name, {}).get(fold(words))
            if general is not None:
                return general
        age = _age(span, text)
        if age is not None:
            band = vocabulary.band_of(age)
            return band if band is not None else f"{age // 10 * 10}-{age // 10 * 10 + 9}"
        year = _year_of(words)
        if year is not None:
            before = "" if text is None else text[max(0, span.start - 8):span.start]
            return decade(year) if _THE_BEFORE.search(before) else f"the {decade(year)}"
        return None

    def to_dict(self) -> dict:
        """What the log records: the strategy, what was derived from the registry (field names only) and the
        table read, if any."""
        return {"strategy": self.strategy, **self.vocabulary.to_dict(),
                "generalization": None if self.table is None else self.table.to_dict()}


def _is_month_or_day(words: str) -> bool:
    key = fold(words).rstrip(".")
    if key == "may":  # a verb as often as a month: only "May"
        return words.rstrip(".") == "May"
    return key in _MONTHS or key in _DAYS


def _age(span: Span, text: str | None) -> int | None:
    """The age a span writes: a whole number of at most 130 followed by "-year-old", "years old", "y/o" or
    preceded by "aged"/"age" in ``text``."""
    words = span.text.strip()
    if text is None or not words.isdigit() or int(words) > 130:
        return None
    if _AGE_AFTER.match(text, span.end) or _AGE_BEFORE.search(text[max(0, span.start - 8):span.start]):
        return int(words)
    return None


def _year_of(words: str) -> int | None:
    """The year a span writes: a year itself, or the year of a date."""
    if _YEAR.fullmatch(words):
        return int(words)
    if _DATE.fullmatch(words):
        years = [int(m.group(0)) for m in re.finditer(r"\d{4}", words) if _YEAR.fullmatch(m.group(0))]
        return years[0] if len(years) == 1 else None
    return None
