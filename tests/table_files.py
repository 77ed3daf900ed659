"""Table files for the loading tests: the documents' header, a file written from bytes, and a check that a
``DataError`` names what it should (file, row, column, expected, found)."""

from __future__ import annotations

from cpa_core.common.errors import DataError

DOCS_HEADER = "doc_id,text,identity_id\n"


def check(error: DataError, *parts: str) -> None:
    """Every part appears in the message (the file, row, column, expected, found)."""
    message = str(error)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


def write_bytes(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path
