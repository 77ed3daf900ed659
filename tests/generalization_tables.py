"""A curator's generalisation table written as a file, for the replacement tests and ``cpa redact
--generalization``."""

from __future__ import annotations

from pathlib import Path


def table_file(tmp_path: Path, text: str, name: str = "general.csv") -> Path:
    """``text`` written as ``tmp_path / name`` (UTF-8)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path
