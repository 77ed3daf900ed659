"""The LLM answers on disk: SQLite in WAL mode, one row per request key, committed before it is used.

Every answer is stored *before* the client returns it, so re-running or recalibrating costs no call and
an interrupted run resumes where it stopped. Safe to share between the threads of one client and between
processes (SQLite locking). The folder is created owner-only: answers may quote released text.

An entry is at most :data:`MAX_ENTRY_CHARS` characters: a longer one is refused when it is put, and one already
on disk (written before the bound, or by another program) is read as missing, without loading it. Which answers
deserve a place is the client's decision (:mod:`cpa_core.llm.client` never stores an empty, truncated, filtered
or over-long answer); :meth:`ResponseCache.discard` removes an entry that must be asked again.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Sequence

CACHE_FILE = "responses.sqlite3"
MAX_ENTRY_CHARS = 8 * 2**20
"""The longest entry stored or read, in characters (8 Mi): an answer's text, its token log-probabilities and
its metadata, as JSON. The client refuses any HTTP response over the same number of bytes before it gets here."""


class ResponseCache:
    """Answers on disk by key (SQLite, WAL): every ``put`` is committed before it returns.

    Safe to share between the threads of one client and between processes (SQLite locking).
    """

    def __init__(self, directory: str | Path):
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = self.directory / CACHE_FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, response TEXT NOT NULL, "
                         "created REAL NOT NULL)")

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored entries of these keys; an entry over :data:`MAX_ENTRY_CHARS` characters counts as missing."""
        found: dict[str, str] = {}
        keys = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, response FROM responses WHERE key IN ({marks}) "
                                        "AND length(response) <= ?", [*chunk, MAX_ENTRY_CHARS])
                found.update(rows.fetchall())
        return found

    def put(self, key: str, response: str) -> None:
        """Store (or replace) the entry of ``key``, committed before this returns; ``ValueError`` when it is over
        :data:`MAX_ENTRY_CHARS` characters (nothing is written)."""
        if len(response) > MAX_ENTRY_CHARS:
            raise ValueError(f"an LLM cache entry of {len(response):,} characters is over the "
                             f"{MAX_ENTRY_CHARS:,} allowed")
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses (key, response, created) VALUES (?, ?, ?)",
                             (key, response, time.time()))

    def discard(self, key: str) -> None:
        """Remove the entry of ``key`` if there is one (its request is asked again); committed before this returns."""
        with self._lock:
            self._db.execute("DELETE FROM responses WHERE key = ?", (key,))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
