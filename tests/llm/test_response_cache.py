"""The LLM answers on disk: one row per request key, committed before ``put`` returns (so another cache on the
same folder, another thread or a later run reads it), in an owner-only folder; no entry over the bound is written
or read, and an entry can be discarded."""

from __future__ import annotations

import sqlite3
import stat
import threading

import pytest

from cpa_core.llm.response_cache import CACHE_FILE, MAX_ENTRY_CHARS, ResponseCache


def test_answers_are_found_by_key_and_the_others_are_not(tmp_path):
    cache = ResponseCache(tmp_path / "llm")
    assert len(cache) == 0 and cache.get_many([]) == {} and cache.get_many(["k1"]) == {}
    cache.put("k1", '{"text": "A"}')
    cache.put("k2", '{"text": "B"}')
    assert cache.get_many(["k2", "k3", "k1", "k2"]) == {"k1": '{"text": "A"}', "k2": '{"text": "B"}'}
    cache.put("k1", '{"text": "C"}')  # a key holds its latest answer
    assert cache.get_many(["k1"]) == {"k1": '{"text": "C"}'} and len(cache) == 2
    cache.close()


def test_an_answer_is_on_disk_once_put_returns(tmp_path):
    first = ResponseCache(tmp_path / "llm")
    first.put("key", "answer é")  # any text, as written
    second = ResponseCache(tmp_path / "llm")  # another client (or process) on the same folder
    assert second.get_many(["key"]) == {"key": "answer é"} and len(second) == 1
    first.close()
    second.close()
    assert (tmp_path / "llm" / CACHE_FILE).is_file() and CACHE_FILE == "responses.sqlite3"
    reopened = ResponseCache(str(tmp_path / "llm"))  # a later run
    assert reopened.get_many(["key"]) == {"key": "answer é"}
    reopened.close()


def test_many_keys_are_read_in_batches(tmp_path):
    cache = ResponseCache(tmp_path)
    with sqlite3.connect(cache.path) as db:  # written in one transaction (a put commits each answer: slow)
        db.executemany("INSERT INTO responses (key, response, created) VALUES (?, ?, 0)",
                       [(f"k{i}", str(i)) for i in range(1_203)])
    found = cache.get_many([f"k{i}" for i in range(0, 1_300)])  # more than SQLite's variables per query
    assert found == {f"k{i}": str(i) for i in range(1_203)}
    cache.close()


def test_threads_of_one_client_share_it(tmp_path):
    cache = ResponseCache(tmp_path)

    def write(start: int) -> None:
        for i in range(start, start + 10):
            cache.put(f"k{i}", str(i))

    threads = [threading.Thread(target=write, args=(10 * t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 40 and cache.get_many(["k0", "k39"]) == {"k0": "0", "k39": "39"}
    cache.close()


def test_the_folder_is_created_owner_only(tmp_path):
    cache = ResponseCache(tmp_path / "new" / "llm")
    assert stat.S_IMODE((tmp_path / "new" / "llm").stat().st_mode) == 0o700
    assert cache.path == tmp_path / "new" / "llm" / CACHE_FILE
    cache.close()


def test_an_entry_over_the_bound_is_never_written(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put("longest", "x" * MAX_ENTRY_CHARS)  # the bound itself is allowed
    with pytest.raises(ValueError, match=f"{MAX_ENTRY_CHARS:,} allowed"):
        cache.put("too-long", "x" * (MAX_ENTRY_CHARS + 1))
    assert len(cache) == 1 and cache.get_many(["too-long"]) == {}
    cache.close()


def test_an_entry_over_the_bound_already_on_disk_reads_as_missing(tmp_path):
    cache = ResponseCache(tmp_path)
    with sqlite3.connect(cache.path) as db:  # written by an older version, or another program
        db.execute("INSERT INTO responses (key, response, created) VALUES ('huge', ?, 0)",
                   ("é" * (MAX_ENTRY_CHARS + 1),))
    cache.put("small", "ok")
    assert cache.get_many(["huge", "small"]) == {"small": "ok"} and len(cache) == 2
    cache.close()


def test_a_discarded_entry_is_gone_for_every_reader(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put("k1", "A")
    cache.put("k2", "B")
    cache.discard("k1")
    cache.discard("never-stored")  # nothing to remove: no error
    other = ResponseCache(tmp_path)  # another client or a later run
    assert other.get_many(["k1", "k2"]) == {"k2": "B"} and len(other) == 1
    cache.close()
    other.close()
