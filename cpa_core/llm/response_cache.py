"""The LLM answers on disk: SQLite in WAL mode, one row per request key, committed before it is used.

Every answer is stored *before* the client returns it, so re-running or recalibrating costs no call and
an interrupted run resumes where it stopped. Safe to share between the threads of one client and between
processes (SQLite locking). The folder is created owner-only: answers may quote released text.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Sequence

CACHE_FILE = "responses.sqlite3"


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
        found: dict[str, str] = {}
        keys = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, response FROM responses WHERE key IN ({marks})", chunk)
                found.update(rows.fetchall())
        return found

    def put(self, key: str, response: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses (key, response, created) VALUES (?, ?, ?)",
                             (key, response, time.time()))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
