"""An LLM rewrite of a document the term search would withhold, kept only when the attack says it is safe.

In the spirit of Staab et al.'s adversarial anonymisation (2024): a model behind an OpenAI-compatible endpoint (the
``[llm]`` settings the LLM attackers use) rewrites the released text so that the clues an attacker matches (the terms
the search weighed, :class:`~cpa_core.redaction.suggestions.Suggestion`) are removed or generalised while what the
text says is kept; every attacker of the panel attacks the rewrite (the stored calibration,
:class:`~cpa_core.audit.rescoring.PanelStoredRisk`); a rewrite still flagged is rewritten again, up to
:data:`ROUNDS` times. A rewrite is **kept only when** its re-scored risk is within the policy under every attacker
and no attacker's risk is higher than on the released text (:meth:`~cpa_core.audit.rescoring.PanelRisk.
no_higher_than`); otherwise it is refused and the document stays withheld, with the reason.

A kept rewrite becomes edits of kind ``rewrite`` (a word-level difference between the released and the rewritten
text, :func:`rewrite_edits`), so that the review table, the decisions file, the redacted release and its utility treat
it like any edit. The prompt is versioned (:data:`REWRITE_V1`); its answers are cached like the attackers' (same
endpoint, model, prompt and seed: same answer, no new call). The risk after is indicative, as for every edit: only
a new calibration of the redacted release certifies it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.llm.client import LLMClient, LLMRequest
from cpa_core.llm.prompts import PromptTemplate
from cpa_core.redaction.suggestions import REDACT, WITHHOLD, Edit, RescoreBatch, Suggestion

ROUNDS = 2
"""Rewrites asked per document: the first of the released text, then one of each rewrite still flagged."""
MAX_CLUES = 15
"""Terms named to the model as clues to remove (the search's heaviest first)."""
MAX_GROWTH = 1.5
"""A rewrite longer than this many times the released text (plus 200 characters) is refused: not a rewrite."""

REWRITE_V1 = PromptTemplate(
    name="rewrite", version=1,
    system=("You anonymise texts before they are published. Rewrite the user's text so that nobody can tell who "
            "wrote it or whom it is about: remove or generalise names, places, dates, ages, jobs, relatives and any "
            "other detail that could single out a person, in particular the listed clues. Keep everything else the "
            "text says, its language and its tone. Answer with the rewritten text only, without comments."),
    user="Clues to remove or generalise: {clues}\n\nText:\n{text}")

_TOKENS = re.compile(r"\S+")


def rewrite_request(text: str, clues: Sequence[str], seed: int, round_: int) -> LLMRequest:
    """The chat request that asks for a rewrite of ``text`` without ``clues`` (``round_``: which attempt, so that a
    second attempt is a request of its own)."""
    named = ", ".join(dict.fromkeys(str(c) for c in clues[:MAX_CLUES])) or "(none named)"
    return LLMRequest(tuple(REWRITE_V1.render(clues=named, text=text)), sample_index=round_, seed=seed,
                      max_tokens=max(256, len(text) // 2), temperature=0.0)


def rewrite_edits(released: str, rewritten: str) -> tuple[Edit, ...]:
    """The rewrite as edits of the released text: each run of words it changes is one edit (offset and length in the
    released text, of kind ``rewrite``); whitespace between unchanged words stays as it was, and words it adds after
    the last released word are appended to the last edit, or to the last word."""
    old = [(m.start(), m.end()) for m in _TOKENS.finditer(released)]
    new = [(m.start(), m.end()) for m in _TOKENS.finditer(rewritten)]
    matcher = difflib.SequenceMatcher(None, [released[a:b] for a, b in old], [rewritten[a:b] for a, b in new],
                                      autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        replacement = rewritten[new[j1][0]:new[j2 - 1][1]] if j2 > j1 else ""
        if i2 > i1:
            start, end = old[i1][0], old[i2 - 1][1]
        elif i1 < len(old):  # an insertion before released word i1
            start = end = old[i1][0]
            replacement += " "
        else:  # an insertion after the last released word
            start = end = old[-1][1] if old else 0
            replacement = (" " if old else "") + replacement
        edits.append(Edit(start, end - start, released[start:end], replacement, "rewrite", "rewrite"))
    return tuple(edits)


@dataclass(frozen=True)
class Rewriter:
    """The model that rewrites (an :class:`~cpa_core.llm.client.LLMClient` of the ``[llm]`` endpoint), the attempts per
    document and the seed of its requests."""

    client: LLMClient
    rounds: int = ROUNDS
    seed: int = 0
    max_documents: int | None = None  # the riskiest documents to withhold offered to it (None: every one)

    def params(self) -> dict:
        """For the edit log: the endpoint's settings (no key), the prompt's id and hash, the attempts, the seed and
        the most documents offered."""
        return {"llm": self.client.params(), "prompt": REWRITE_V1.params(), "rounds": self.rounds, "seed": self.seed,
                "max_documents": self.max_documents}

    def rewrite(self, texts: Sequence[str], clues: Sequence[Sequence[str]], round_: int) -> list[str | None]:
        """One rewrite of each text (``None``: the model gave no usable answer)."""
        answers = self.client.complete([rewrite_request(text, c, self.seed, round_) for text, c in zip(texts, clues)])
        return [answer.text.strip() if answer.ok and answer.text.strip() else None for answer in answers]


def rewrite_withheld(suggestions: Sequence[Suggestion], names: dict[str, object], texts: dict[str, str],
                     rescore: RescoreBatch, rewriter: Rewriter, policy: ReleasePolicy,
                     progress: Callable[[int, int], None] | None = None) -> list[Suggestion]:
    """The suggestions with each document to withhold offered to ``rewriter``: a rewrite kept (within ``policy``
    under every attacker, no attacker's risk higher than on the released text) makes it a suggestion to ``redact``
    with the rewrite's edits; a refused one leaves it withheld, its reason saying why the rewrite was refused. At most
    the rewriter's ``max_documents`` are offered, in the order of ``suggestions`` (riskiest first).
    ``names`` maps a doc id to the name ``rescore`` attacks it by; a document without one (its pool is too small for
    any redaction) is left as it is. ``progress(done, total)`` after each round."""
    todo = [s for s in suggestions if s.action == WITHHOLD and s.doc_id in names][:rewriter.max_documents]
    if not todo:
        return list(suggestions)
    ids = [s.doc_id for s in todo]
    clues = {s.doc_id: [step.term for step in s.steps] + list(s.rejected) for s in todo}
    released = rescore([names[d] for d in ids], [texts[d] for d in ids])
    before = {d: found.risk for d, found in zip(ids, released)}
    current = {d: texts[d] for d in ids}
    outcome: dict[str, tuple[str, object]] = {}  # doc id -> (rewritten text, its risk) once kept
    refused: dict[str, str] = {}
    pending = list(ids)
    for round_ in range(rewriter.rounds):
        if not pending:
            break
        answers = rewriter.rewrite([current[d] for d in pending], [clues[d] for d in pending], round_)
        usable = []
        for d, a in zip(pending, answers):
            if a is None:
                refused[d] = "the model gave no usable rewrite"
            elif len(a) > MAX_GROWTH * len(texts[d]) + 200:
                refused[d] = "the model's answer is much longer than the text: not a rewrite"
            else:
                usable.append((d, a))
        found = rescore([names[d] for d, _ in usable], [a for _, a in usable]) if usable else []
        pending = []
        for (d, text), result in zip(usable, found):
            risk = result.risk
            if not risk.no_higher_than(before[d]):
                refused[d] = "its rewrite raises the risk under " + _raised(risk, before[d])
            elif risk.acceptable(policy):
                outcome[d] = (text, risk)
                refused.pop(d, None)
            else:
                refused[d] = "its rewrite is still flagged by the policy"
                current[d] = text
                pending.append(d)
        if progress is not None:
            progress(round_ + 1, rewriter.rounds)
    out = []
    for s in suggestions:
        if s.doc_id in outcome:
            text, risk = outcome[s.doc_id]
            out.append(replace(s, before=before[s.doc_id], after=risk, edits=rewrite_edits(texts[s.doc_id], text),
                               action=REDACT, reason="", steps=(), rejected=()))
        elif s.doc_id in refused:
            out.append(replace(s, reason=f"{s.reason}; an LLM rewrite was refused: {refused[s.doc_id]}"
                               if s.reason else f"an LLM rewrite was refused: {refused[s.doc_id]}"))
        else:
            out.append(s)
    return out


def _raised(after, before) -> str:
    """The attackers under which ``after`` is riskier than ``before`` (a panel's members, or the one attacker)."""
    pairs = zip(after.names, after.members, before.members) if hasattr(after, "members") else [("the attacker", after,
                                                                                                  before)]
    return ", ".join(name for name, mine, theirs in pairs if not mine.no_higher_than(theirs)) or "the attacker"
