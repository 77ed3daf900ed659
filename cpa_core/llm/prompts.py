"""Versioned prompt templates of the LLM attackers, and robust parsers for their answers.

A template is frozen: changing its wording means a new version, and its ``sha256`` (recorded in the
manifest and part of every cached request's prompt hash) tells runs made with different wordings apart.

The parsers accept what real models write (JSON, JSON in code fences, bullet lists, "Answer: (B)",
"option b", extra words) and return ``None`` when nothing usable is found, so that an attacker can count
unparsable samples instead of crashing.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class PromptTemplate:
    """A system message and a user message with ``{field}`` placeholders (``str.format`` syntax)."""

    name: str
    version: int
    system: str
    user: str

    @property
    def id(self) -> str:
        return f"{self.name}/v{self.version}"

    @property
    def fields(self) -> tuple[str, ...]:
        names = [f for text in (self.system, self.user) for _, f, _, _ in string.Formatter().parse(text) if f]
        return tuple(dict.fromkeys(names))

    @property
    def sha256(self) -> str:
        text = json.dumps([self.name, self.version, self.system, self.user], ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def params(self) -> dict:
        """For the manifest: the template's id and hash, not its text."""
        return {"name": self.name, "version": self.version, "sha256": self.sha256}

    def render(self, **values: Any) -> list[dict[str, str]]:
        """The chat messages with every placeholder filled (values are inserted verbatim)."""
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise ValueError(f"prompt {self.id} needs the field(s) {', '.join(missing)}")
        messages = []
        if self.system:
            messages.append({"role": "system", "content": self.system.format(**values)})
        messages.append({"role": "user", "content": self.user.format(**values)})
        return messages


CLUES_V1 = PromptTemplate(
    name="clues", version=1,
    system=("You help audit anonymised texts for re-identification risk. You read a released text and "
            "list short clues about the person it describes."),
    user=("Read the text below and list up to {max_clues} short clues that could help identify the person "
          "it is about: occupation, employer, places, age, family, dates and events.\n"
          "Answer with a JSON list of strings only, for example [\"clue one\", \"clue two\"].\n\n"
          "Text:\n{text}"),
)

FORCED_CHOICE_V1 = PromptTemplate(
    name="forced_choice", version=1,
    system=("You help audit anonymised texts for re-identification risk. You pick the person a released "
            "text is most likely about."),
    user=("Text:\n{text}\n\n"
          "Which of these people is the text most likely about?\n{options}\n\n"
          "Answer with the label of exactly one option ({labels}) and nothing else."),
)

ATTRIBUTE_V1 = PromptTemplate(
    name="attribute", version=1,
    system=("You help audit anonymised texts for re-identification risk. You guess an attribute of the "
            "person a released text is about."),
    user=("Text:\n{text}\n\n"
          "What is the {attribute} of the person this text is about?{choices}\n"
          "Answer with the value only."),
)


def option_labels(k: int) -> list[str]:
    """Labels of ``k`` options: ``A``..``Z`` up to 26 options, ``1``..``k`` beyond."""
    if k <= 26:
        return list(string.ascii_uppercase[:k])
    return [str(i + 1) for i in range(k)]


def format_options(options: Sequence[str], labels: Sequence[str] | None = None) -> str:
    """``"A. first\\nB. second"`` (newlines inside an option become spaces)."""
    labels = option_labels(len(options)) if labels is None else labels
    return "\n".join(f"{label}. {' '.join(str(o).split())}" for label, o in zip(labels, options))


def attribute_choices(allowed_values: Sequence[str] | None) -> str:
    """The ``{choices}`` field of :data:`ATTRIBUTE_V1`: empty, or " Choose one of: a, b, c." """
    if not allowed_values:
        return ""
    return " Choose one of: " + ", ".join(str(v) for v in allowed_values) + "."


# --------------------------------------------------------------------------------------------- parsing
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|$)", re.S)
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u2023\u25e6\u2013+]|\(?\d{1,3}[.):]|\(?[a-zA-Z][.)])\s+(.*\S)\s*$")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_MAX_CLUE_CHARS = 300


def _clean_item(item: str) -> str:
    item = re.sub(r"[*_`]{1,3}", "", item)  # markdown emphasis
    item = " ".join(item.split()).strip(" \t\"'\u201c\u201d\u2018\u2019,;")
    return item


def _strings_from_json(value: Any) -> list[str] | None:
    """Clue strings out of a decoded JSON value, or None if it has no list of clues."""
    if isinstance(value, dict):
        for name, inner in value.items():
            if str(name).strip().lower() in ("clues", "clue", "hints", "items", "answer"):
                return _strings_from_json(inner if isinstance(inner, list) else [inner])
        flat = [f"{k}: {v}" for k, v in value.items() if isinstance(v, (str, int, float)) and str(v).strip()]
        lists = [v for v in value.values() if isinstance(v, list)]
        if flat:
            return flat
        if len(lists) == 1:
            return _strings_from_json(lists[0])
        return None
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                out.append(str(item))
            elif isinstance(item, dict):
                texts = [str(v) for v in item.values() if isinstance(v, (str, int, float))]
                if texts:
                    out.append(texts[0] if len(texts) == 1 else ", ".join(texts))
        return out
    return None


def _json_candidates(text: str) -> list[str]:
    """Pieces of the text that may be JSON: fenced blocks, the whole text, the outermost [..] or {..}."""
    pieces = [m.group(1) for m in _FENCE.finditer(text)]
    pieces.append(text)
    for opener, closer in (("[", "]"), ("{", "}")):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            pieces.append(text[start:end + 1])
    return pieces


def parse_clues(text: str | None, max_clues: int | None = None) -> list[str] | None:
    """Clues out of an answer, or None when nothing usable is there.

    Accepts a JSON list of strings, a JSON object with a ``"clues"`` list (or flat key/value pairs),
    either inside code fences or surrounded by prose, a truncated JSON list, or bullet/numbered lines.
    Items are trimmed, de-duplicated (case-insensitively) and cut to ``max_clues``.
    """
    if not text or not text.strip():
        return None
    items: list[str] | None = None
    for piece in _json_candidates(text):
        try:
            items = _strings_from_json(json.loads(piece))
        except (ValueError, RecursionError):
            continue
        if items:
            break
    if not items:
        start = text.find("[")
        if start != -1:  # a JSON list cut off by max_tokens: take its complete quoted strings
            items = [json.loads(f'"{m.group(1)}"') if "\\" in m.group(1) else m.group(1)
                     for m in _QUOTED.finditer(text[start:])]
    if not items:
        body = "\n".join(m.group(1) for m in _FENCE.finditer(text)) or text
        items = [m.group(1) for line in body.splitlines() if (m := _BULLET.match(line))]
    out, seen = [], set()
    for item in items or ():
        item = _clean_item(item)[:_MAX_CLUE_CHARS]
        if item and item.lower() not in seen and not item.endswith(":"):
            seen.add(item.lower())
            out.append(item)
    if max_clues is not None:
        out = out[:max_clues]
    return out or None


_KEYWORD = re.compile(r"\b(?:answer|response|choice|option|choose|chose|select|pick|label|letter)\b", re.I)
_FILLER = frozenset({"is", "would", "be", "the", "option", "letter", "choice", "label", "correct", "final", "my",
                     "number", "it", "s"})
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_LEADING = re.compile(r"^[\s*\"'`#>]*[\(\[]?\s*([A-Za-z0-9]+)\s*(?:[\)\]]|[.:,](?!\d)|$)")
_BRACKETED = re.compile(r"[\(\[]\s*([A-Za-z0-9]+)\s*[\)\]]")


def _after_keyword(text: str, lookup: dict[str, str]) -> str | None:
    """The label right after "answer (is)", "option", "I choose" ..., skipping filler words."""
    for match in _KEYWORD.finditer(text):
        tail = text[match.end():match.end() + 60]
        for token in _TOKEN.finditer(tail):
            word = token.group(0)
            if word.lower() in _FILLER:
                continue
            after = tail[token.end():token.end() + 2]
            if word == "a" and re.match(r"\s\w", after):  # "the answer is a nurse": an article
                break
            if word.lower() in lookup:
                other = re.match(r"\s*[\)\]]?\s*(?:or|and|/|,)\s*[\(\[]?\s*([A-Za-z0-9]+)\b", tail[token.end():])
                if other and other.group(1).lower() in lookup and other.group(1).lower() != word.lower():
                    return ""  # "Answer: A or B": ambiguous
                return lookup[word.lower()]
            break
    return None


def _label_lookup(labels: Sequence[str]) -> dict[str, str]:
    return {str(label).strip().lower(): str(label) for label in labels}


def parse_choice(text: str | None, labels: Sequence[str], options: Sequence[str] | None = None) -> str | None:
    """The option label an answer picks (e.g. ``"B"``, ``"(B)"``, ``"Answer: B"``, ``"option b"``), or None.

    Looks, in order, for: a first line that is just a label; "answer/option/choice ... X"; a label opening
    the answer ("B. John", "(B) John", "B)"); a single bracketed label "(B)"; a single standalone capital
    label or number ("I think it's B"; not "A" or "I", which are words). When ``options`` (the option
    texts) are given, an answer naming exactly one option's text also counts. Ambiguous answers give None.
    """
    if not text or not text.strip() or not labels:
        return None
    lookup = _label_lookup(labels)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    first = re.sub(r"[\s*\"'`.:,;!()\[\]]+", "", lines[0]).lower()
    if first in lookup:
        return lookup[first]
    picked = _after_keyword(text, lookup)
    if picked is not None:
        return picked or None
    bracketed = {lookup[m.group(1).lower()] for m in _BRACKETED.finditer(text) if m.group(1).lower() in lookup}
    match = _LEADING.match(lines[0])  # "B. John", "(B) John", "B)"; not "A nurse from Paris"
    if match and match.group(1).lower() in lookup and len(bracketed - {lookup[match.group(1).lower()]}) == 0:
        return lookup[match.group(1).lower()]
    if len(bracketed) == 1:
        return bracketed.pop()
    if len(bracketed) > 1:
        return None
    # "I think it's B"; "A" and "I" followed by a word are words, not labels
    standalone = {lookup[m.group(1).lower()] for m in re.finditer(r"(?<![\w'])([A-Z]|\d+)(?![\w'])(\s+[a-z])?", text)
                  if m.group(1).lower() in lookup and not (m.group(1) in ("A", "I") and m.group(2))}
    if len(standalone) == 1:
        return standalone.pop()
    if options:
        lowered = " ".join(text.lower().split())
        named = {str(label) for label, option in zip(labels, options)
                 if str(option).strip() and " ".join(str(option).lower().split()) in lowered}
        if len(named) == 1:
            return named.pop()
    return None


def normalise_value(value: str) -> str:
    """Case-, space- and punctuation-insensitive form of an attribute value ("Software-Engineer" -> "software engineer")."""
    value = value.casefold().replace("_", " ").replace("-", " ").replace("/", " ")
    value = re.sub(r"[^\w\s+<>]", " ", value)
    return " ".join(value.split())


_PREFIX = re.compile(r"^\s*[A-Za-z][\w ]{0,39}?\s*[:=]\s*(?=\S)")
_MAX_ATTRIBUTE_CHARS = 100


def _first_answer_line(text: str) -> str:
    for line in text.strip().splitlines():
        line = re.sub(r"[*_`#>]+", "", line).strip()
        if line:
            return line
    return ""


def parse_attribute(text: str | None, allowed_values: Sequence[str] | None = None) -> str | None:
    """The attribute value an answer gives, or None.

    With ``allowed_values``: the allowed value matching the answer after normalisation (case, spaces,
    punctuation), else the only allowed value named as whole words in the first line, else in the whole
    answer; None when none or several are named. Without: the first line of the answer, without a
    leading "Answer:"/"Occupation:" label, quotes and trailing period, whitespace collapsed.
    """
    if not text or not text.strip():
        return None
    line = _first_answer_line(text)
    stripped = _PREFIX.sub("", line, count=1)
    stripped = stripped.strip(" \t\"'\u201c\u201d\u2018\u2019.,;!")
    if allowed_values is None:
        value = " ".join(stripped.split())[:_MAX_ATTRIBUTE_CHARS].strip()
        return value or None
    table: dict[str, str] = {}
    for value in allowed_values:
        table.setdefault(normalise_value(str(value)), str(value))
    table.pop("", None)
    for candidate in (stripped, line):
        hit = table.get(normalise_value(candidate))
        if hit is not None:
            return hit
    for scope in (line, text):
        padded = f" {normalise_value(scope)} "
        named = {value for norm, value in table.items() if f" {norm} " in padded}
        # a value inside a longer named value ("male" in "female" cannot, but "manager" in "project manager" can)
        named = {v for v in named if not any(v != w and f" {normalise_value(v)} " in f" {normalise_value(w)} "
                                             for w in named)}
        if len(named) == 1:
            return named.pop()
        if len(named) > 1:
            return None
    return None
