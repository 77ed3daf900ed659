"""Releases built from the real datasets in ``../shared/datasets`` (never copied into the project): the Blog
Authorship slice, TextWash study 1 and the TAB test cases, as documents and a registry ready to audit. Each builder
returns ``None`` when its data is absent (the caller skips, saying where it looked)."""

from __future__ import annotations

import io
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Documents, Registry, load_documents, load_registry

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
BLOG = DATASETS / "blog"
TEXTWASH = DATASETS / "textwash" / "study1"
PROFILE = KnowledgeLevel("profile", ("profile",), "direct", "the profile text")

POST = re.compile(r"<post>(.*?)</post>", re.DOTALL)
BLOG_PROFILE_POSTS, BLOG_RELEASED_POSTS = 10, 3


def _tables(documents: list[dict], registry: list[dict], name: str) -> tuple[Documents, Registry]:
    """Parquet in memory: a profile of ten posts can exceed what a CSV field may hold."""
    def parquet(rows: list[dict]) -> bytes:
        buffer = io.BytesIO()
        pd.DataFrame(rows).to_parquet(buffer, index=False)
        return buffer.getvalue()

    return (load_documents(parquet(documents), name=f"{name}-documents.parquet", fmt="parquet"),
            load_registry(parquet(registry), name=f"{name}-registry.parquet", fmt="parquet"))


def _blog_authors():
    """Each author of the Blog slice (its index row) with their non-empty posts, whitespace collapsed, in order."""
    for row in pd.read_csv(BLOG / "index.tsv", sep="\t", dtype=str).itertuples():
        raw = (BLOG / row.file).read_bytes().decode("utf-8", errors="replace")
        posts = [" ".join(p.split()) for p in POST.findall(raw)]
        yield row, [p for p in posts if p]


def blog_release(authors_share: float = 1.0, profiles: int | None = None) -> tuple[Documents, Registry] | None:
    """The Blog Authorship slice, 1,000 authors: each author's registry profile is up to 10 of their posts; the release
    is 1 to 3 *other* posts of each author who wrote more than one (how many: fixed by the author's id), empty posts
    skipped. With ``authors_share`` below 1, only the posts of that share of the authors (the first in the order of
    their ids) are released; the registry is still every author (most of it then people the release does not hold),
    or with ``profiles``, the released authors and the first others in the order of their ids, that many in all."""
    if not (BLOG / "index.tsv").is_file():
        return None
    documents, registry = [], []
    for row, posts in _blog_authors():
        released = min(1 + int(row.sha256_of_blogger_id[:8], 16) % BLOG_RELEASED_POSTS, len(posts) - 1)
        registry.append({"identity_id": row.blogger_id, "profile": " ".join(posts[released:released + BLOG_PROFILE_POSTS])})
        for number, post in enumerate(posts[:max(released, 0)]):
            documents.append({"doc_id": f"{row.blogger_id}-{number}", "text": post, "identity_id": row.blogger_id})
    if authors_share < 1:
        authors = sorted({d["identity_id"] for d in documents})
        kept = set(authors[:int(len(authors) * authors_share)])
        documents = [d for d in documents if d["identity_id"] in kept]
    if profiles is not None:
        released = {d["identity_id"] for d in documents}
        others = sorted(r["identity_id"] for r in registry if r["identity_id"] not in released)
        kept = released | set(others[:max(profiles - len(released), 0)])
        registry = [r for r in registry if r["identity_id"] in kept]
    return _tables(documents, registry, "blog")


def blog_posts_release(withheld: float = 0.0, seed: int = 0, posts_per_author: int = 12,
                       profile_characters: int = 6000) -> tuple[Documents, Registry, dict[str, str]] | None:
    """The Blog Authorship slice as a large release: up to ``posts_per_author`` posts of each author who wrote more than
    one (all but one), each author's registry profile the first ``profile_characters`` characters of their *other*
    posts; 8,090 posts by 1,000 authors. A random share ``withheld`` of the posts (``seed``) comes without its
    author's id; every post's author is returned by doc id beside the tables."""
    if not (BLOG / "index.tsv").is_file():
        return None
    documents, registry = [], []
    for row, posts in _blog_authors():
        released = max(min(posts_per_author, len(posts) - 1), 0)
        registry.append({"identity_id": row.blogger_id, "profile": " ".join(posts[released:])[:profile_characters]})
        for number, post in enumerate(posts[:released]):
            documents.append({"doc_id": f"{row.blogger_id}-{number}", "text": post, "identity_id": row.blogger_id})
    authors = {d["doc_id"]: d["identity_id"] for d in documents}
    hidden = np.random.default_rng(seed).random(len(documents)) < withheld
    for document, blank in zip(documents, hidden):
        if blank:
            document["identity_id"] = None
    return (*_tables(documents, registry, "blog-posts"), authors)


TEXTWASH_NAME = re.compile(r"^(famous|semifamous|fict)_(\d+)_d_(\d)_(\d+)\.txt$")


def textwash_files() -> dict[str, list[tuple[int, str]]]:
    """TextWash study 1's description files by identity (``category:target``): ``[(docno, filename), ...]`` sorted by
    document number, for the files with both an original and an anonymised version."""
    by_identity = defaultdict(list)
    for path in (TEXTWASH / "anon").iterdir():
        match = TEXTWASH_NAME.match(path.name)
        if match and (TEXTWASH / "orig" / path.name).is_file():
            kind, docno, _, target = match.groups()
            by_identity[f"{kind}:{target}"].append((int(docno), path.name))
    return {identity: sorted(items) for identity, items in sorted(by_identity.items())}


def textwash_release(category: str | None = "semifamous", profile_descriptions: int = 1
                     ) -> tuple[Documents, Registry] | None:
    """TextWash study 1: 30 people, each profile the person's first ``profile_descriptions`` original descriptions
    (held out, joined by a space); the release is the anonymised descriptions of the people of ``category`` (every
    person's with ``None``), their other descriptions."""
    if not (TEXTWASH / "anon").is_dir():
        return None
    documents, registry = [], []
    for identity, items in textwash_files().items():
        registry.append({"identity_id": identity,
                         "profile": " ".join((TEXTWASH / "orig" / name).read_text(encoding="utf-8").strip()
                                             for _, name in items[:profile_descriptions])})
        if category is None or identity.startswith(f"{category}:"):
            documents += [{"doc_id": name[:-4], "text": (TEXTWASH / "anon" / name).read_text(encoding="utf-8"),
                           "identity_id": identity} for _, name in items[profile_descriptions:]]
    return _tables(documents, registry, "textwash")


TAB = DATASETS / "tab" / "tae"


def tab_release(background: str = "Public", anonymisation: str = "Manual_Supression"
                ) -> tuple[Documents, Registry] | None:
    """The TAB test split, 127 court cases (one per applicant): each case's registry profile is the attacker's background
    knowledge of it (TAE's ``TAB_test_BK=<background>.json``: the public judgment, or its first 10/25/50 %); the release
    is the case's TAB text with the spans of ``TAB_test_<anonymisation>.json`` replaced (suppressed by default)."""
    import json

    texts, profiles = TAB / "bks" / "TAB_test_BK=Original.json", TAB / "bks" / f"TAB_test_BK={background}.json"
    spans = TAB / "anonymizations" / f"TAB_test_{anonymisation}.json"
    if not (texts.is_file() and profiles.is_file() and spans.is_file()):
        return None
    originals, public = (json.loads(path.read_text(encoding="utf-8")) for path in (texts, profiles))
    replaced = json.loads(spans.read_text(encoding="utf-8"))
    documents, registry = [], []
    for case, text in sorted(originals.items()):
        merged: list[list] = []  # overlapping spans (a few annotations nest) are one span, the first's replacement
        for start, end, replacement in sorted(replaced.get(case, []), key=lambda span: (span[0], -span[1])):
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, replacement])
        for start, end, replacement in reversed(merged):
            text = text[:start] + replacement + text[end:]
        registry.append({"identity_id": case, "profile": " ".join(public[case].split())})
        documents.append({"doc_id": case, "text": text, "identity_id": case})
    return _tables(documents, registry, "tab")


def tab_public_release(anonymisation: str = "Manual_Supression") -> tuple[Documents, Registry] | None:
    """The 127 TAB test cases as released (:func:`tab_release`: the spans of ``TAB_test_<anonymisation>.json``
    suppressed) against a registry of the public summaries of **all** 1,268 cases (TAE's ``TAB_all_BK=Public10%.json``:
    each case's public judgment, reduced), so that most of the registry is people the release does not hold."""
    import json

    built = tab_release(anonymisation=anonymisation)
    public = TAB / "bks" / "TAB_all_BK=Public10%.json"
    if built is None or not public.is_file():
        return None
    documents, _ = built
    summaries = json.loads(public.read_text(encoding="utf-8"))
    registry = [{"identity_id": case, "profile": " ".join(text.split())} for case, text in sorted(summaries.items())]
    return _tables(documents.frame.to_dict("records"), registry, "tab-public")


def write_release(release: tuple[Documents, Registry], folder: Path) -> tuple[Path, Path]:
    """The release's documents and registry as Parquet files in ``folder`` (for the command line)."""
    documents, registry = release
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "documents.parquet", folder / "registry.parquet"
    documents.frame.to_parquet(paths[0], index=False)
    registry.frame.to_parquet(paths[1], index=False)
    return paths
