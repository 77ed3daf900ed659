"""Where the tool keeps what it can recompute: one root, one folder per kind of cache.

The root is ``$CPA_CACHE_DIR`` when set and not empty, else ``~/.cache/cpa``. Embeddings live in
``<root>/embeddings``, LLM answers in ``<root>/llm``. Folders are created owner-only (they hold
derived data: embeddings of released text, model answers).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "CPA_CACHE_DIR"
DEFAULT_ROOT = Path("~/.cache/cpa")


def cache_root() -> Path:
    """``$CPA_CACHE_DIR`` when set and not empty, else ``~/.cache/cpa``."""
    configured = os.environ.get(ENV_VAR, "").strip()
    return Path(configured or DEFAULT_ROOT).expanduser()


def cache_dir(kind: str) -> Path:
    """The folder of one kind of cache (``embeddings``, ``llm``) under :func:`cache_root`."""
    return cache_root() / kind
