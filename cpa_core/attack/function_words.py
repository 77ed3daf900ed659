"""A release's function words and boilerplate: words that identify no one, never shown as evidence nor redacted.

The rule reads the release's own word frequencies, per language:

- every document's language is detected (``py3langid``, a text of fewer than :data:`MIN_LETTERS` letters is of no
  language, ``"und"``);
- a word (folded, two characters or more) is **common in the release** when the release has at least
  :data:`MIN_DOCUMENTS` documents and the word is in more than ``share`` of them (a link token, a greeting every post
  opens with, the majority language's function words);
- a word is **common in a language** when that language has at least :data:`MIN_DOCUMENTS` documents and the word is
  in more than ``share`` of them: a minority language's function words (``que``, ``se``, ``meu`` of the Portuguese
  posts of an English release), which the release-wide rule misses;
- a document's function words are the release's common words and those of its language.

A release or a language with fewer documents has no function words: those few documents may be one person's, and one
person's favourite words are evidence, not function words. The words are found, not listed by hand, so the rule holds for any
language and any release; what it found is stated (:meth:`FunctionWords.describe`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from cpa_core.attack.explainers import fold

COMMON_SHARE = 0.1
"""A word in more than this share of the documents (of the release, or of one language) identifies no one."""
MIN_DOCUMENTS = 50
"""Documents a language needs for words of its own."""
MIN_LETTERS = 20
"""Letters a text needs for its language to be detected."""
LANGUAGE_CHARS = 600
"""Characters of a text its language is read from (enough to tell a language; longer texts cost more)."""
UNDETERMINED = "und"

_WORD = re.compile(r"(?u)\b\w\w+\b")
_LETTER = re.compile(r"[^\W\d_]")


def words_of(text: str) -> set[str]:
    """The distinct folded words of two characters or more of a text."""
    return {_folded(word) for word in set(_WORD.findall(text))}


@lru_cache(maxsize=200_000)
def _folded(word: str) -> str:
    return fold(word)


@lru_cache(maxsize=1)
def _classify():
    from py3langid import classify  # its model loads on the first call (about 0.1 s), packaged with it

    return classify


def language(text: str) -> str:
    """The language of the text's first :data:`LANGUAGE_CHARS` characters (ISO 639 code, e.g. ``en``, ``pt``), or
    ``und`` for a text of too few letters."""
    if len(_LETTER.findall(text[:LANGUAGE_CHARS])) < MIN_LETTERS:
        return UNDETERMINED
    return str(_classify()(text[:LANGUAGE_CHARS])[0])


@dataclass(frozen=True)
class FunctionWords:
    """The words of a release that identify no one (the module's rule), overall and per language."""

    share: float | None
    release: frozenset[str] = frozenset()
    by_language: Mapping[str, frozenset[str]] = field(default_factory=dict)
    documents: Mapping[str, int] = field(default_factory=dict)  # documents per language

    def of(self, text: str) -> frozenset[str]:
        """The function words of a document: the release's and those of its language."""
        own = self.by_language.get(language(text)) if self.by_language else None
        return self.release | own if own else self.release

    @property
    def words(self) -> frozenset[str]:
        """Every word the rule finds, in any language."""
        return self.release.union(*self.by_language.values())

    def describe(self) -> dict:
        """The rule and what it found, for the records: the share, the documents per language, and per language with
        words of its own how many it has."""
        return {"rule": (f"a word in more than {self.share:g} of the release's documents, or of the documents of its "
                         f"language, where they number at least {MIN_DOCUMENTS}, is a function word: never evidence, "
                         "never redacted") if self.share else "none: every word may be evidence",
                "share": self.share, "min_documents": MIN_DOCUMENTS,
                "documents_by_language": dict(sorted(self.documents.items(), key=lambda item: (-item[1], item[0]))),
                "release_words": len(self.release),
                "language_words": {lang: len(words) for lang, words in sorted(self.by_language.items())}}


NONE = FunctionWords(None)
"""No function words: every word may be evidence."""


_FOUND: OrderedDict[tuple[str, float | None], FunctionWords] = OrderedDict()  # by texts and share, the latest last
_KEPT = 4
_LOCK = threading.Lock()


def function_words(texts: Iterable[str], share: float | None = COMMON_SHARE) -> FunctionWords:
    """The function words of the release ``texts`` (the module's rule); none when ``share`` is ``None`` or 0. Found
    once per texts and share (the evidence of every member of a panel, the search and its record read the same)."""
    texts = list(texts)
    if not share or len(texts) < MIN_DOCUMENTS:
        return FunctionWords(share)
    key = (hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest(), share)
    with _LOCK:
        found = _FOUND.get(key)
        if found is not None:
            _FOUND.move_to_end(key)
            return found
    found = _found(texts, share)
    with _LOCK:
        _FOUND[key] = found
        while len(_FOUND) > _KEPT:
            _FOUND.popitem(last=False)
    return found


def _found(texts: list[str], share: float) -> FunctionWords:
    languages = [language(text) for text in texts]
    words = [words_of(text) for text in texts]
    release = _common(words, share)
    documents = Counter(languages)
    by_language = {}
    for lang, n in documents.items():
        if lang != UNDETERMINED and n >= MIN_DOCUMENTS:
            own = _common([w for w, found in zip(words, languages) if found == lang], share) - release
            if own:
                by_language[lang] = own
    return FunctionWords(share, release, by_language, dict(documents))


def _common(words: list[set[str]], share: float) -> frozenset[str]:
    counts = Counter(word for found in words for word in found)
    limit = share * len(words)
    return frozenset(word for word, n in counts.items() if n > limit)
