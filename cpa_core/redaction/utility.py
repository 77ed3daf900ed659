"""What a redacted release keeps: documents, characters, and how much of each edited text's meaning survives.

- **documents kept**: released, edited or not (a withheld document keeps nothing);
- **characters kept**: the characters of the original texts no edit replaced, over every document of the release (a
  withheld document's count as removed);
- **meaning score** of an edited text: the cosine similarity of the embeddings of the original and the edited text,
  each the normalised mean of its windows under the packaged sentence-transformers model
  (:meth:`~cpa_core.attack.attackers.dense.DenseAttacker.text_embeddings`): 1 when the edit changed nothing a reader
  of meaning sees, lower as more of it is gone. An untouched released document scores 1.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cpa_core.redaction.suggestions import Edit, apply_edits

Embed = Callable[[Sequence[str]], np.ndarray]
"""Texts -> one L2-normalised embedding per text."""


@dataclass(frozen=True)
class DocumentUtility:
    doc_id: str
    characters: int
    characters_kept: int
    withheld: bool
    meaning: float | None  # None: withheld, or no embedding model

    @property
    def edited(self) -> bool:
        """Released with some of its characters replaced."""
        return not self.withheld and self.characters_kept < self.characters

    def to_dict(self) -> dict:
        return {"doc_id": self.doc_id, "characters": self.characters, "characters_kept": self.characters_kept,
                "withheld": self.withheld, "meaning": None if self.meaning is None else round(self.meaning, 4)}


@dataclass(frozen=True)
class ReleaseUtility:
    """What a redacted release keeps, per document and overall."""

    documents: tuple[DocumentUtility, ...]

    @property
    def documents_kept(self) -> int:
        return sum(not d.withheld for d in self.documents)

    @property
    def edited(self) -> int:
        return sum(d.edited for d in self.documents)

    @property
    def characters(self) -> int:
        return sum(d.characters for d in self.documents)

    @property
    def characters_kept(self) -> int:
        return sum(d.characters_kept for d in self.documents)

    @property
    def meaning(self) -> float | None:
        """The mean meaning score of the edited documents (``None``: none edited, or no model)."""
        scores = [d.meaning for d in self.documents if d.edited]
        return None if not scores or any(s is None for s in scores) else float(np.mean(scores))

    @property
    def lowest_meaning(self) -> float | None:
        scores = [d.meaning for d in self.documents if d.meaning is not None]
        return min(scores) if scores else None

    def summary(self) -> dict:
        share = self.characters_kept / self.characters if self.characters else 1.0
        return {"documents": len(self.documents), "documents_kept": self.documents_kept, "edited": self.edited,
                "characters": self.characters, "characters_kept": self.characters_kept,
                "characters_kept_share": round(share, 4),
                "meaning_edited_mean": None if self.meaning is None else round(self.meaning, 4),
                "meaning_lowest": None if self.lowest_meaning is None else round(self.lowest_meaning, 4)}


def release_utility(texts: Mapping[str, str], edits: Mapping[str, Sequence[Edit]], withheld: Collection[str] = (),
                    embed: Embed | None = None) -> ReleaseUtility:
    """The utility of the release ``texts`` (doc id -> original text) once ``edits`` are made and ``withheld`` left
    out; ``embed`` (none: no meaning score) scores each edited text against its original, in one batch."""
    withheld = set(map(str, withheld))
    changed = [doc_id for doc_id in texts if doc_id not in withheld and edits.get(doc_id)]
    meaning: dict[str, float] = {}
    if embed is not None and changed:
        before = embed([texts[d] for d in changed])
        after = embed([apply_edits(texts[d], edits[d]) for d in changed])
        meaning = dict(zip(changed, np.clip(np.sum(before * after, axis=1), -1.0, 1.0).astype(float).tolist()))
    removed = {doc_id: sum(edit.length for edit in document) for doc_id, document in edits.items()}
    return characters_utility(texts, removed, withheld, meaning)


def characters_utility(texts: Mapping[str, str], removed: Mapping[str, int], withheld: Collection[str] = (),
                       meaning: Mapping[str, float] | None = None) -> ReleaseUtility:
    """The utility of the release ``texts`` once ``removed`` characters of each document (doc id -> count) are
    redacted and ``withheld`` left out, with the ``meaning`` scores of its edited texts when they are known (an
    untouched released text scores 1)."""
    withheld, meaning = set(map(str, withheld)), meaning or {}
    out = []
    for doc_id, text in texts.items():
        cut = int(removed.get(doc_id, 0))
        if doc_id in withheld:
            out.append(DocumentUtility(doc_id, len(text), 0, True, None))
        else:
            out.append(DocumentUtility(doc_id, len(text), len(text) - cut, False, 1.0 if not cut else
                                       meaning.get(doc_id)))
    return ReleaseUtility(tuple(out))


def packaged_embedder(progress=None) -> Embed | None:
    """The packaged sentence-transformers model as an embedder (``None`` when it is not installed)."""
    from cpa_core.attack.attackers.dense import DenseAttacker

    attacker = DenseAttacker()
    if not attacker.packaged:
        return None
    return lambda texts: attacker.text_embeddings(list(texts), "scoring the meaning kept", progress)
