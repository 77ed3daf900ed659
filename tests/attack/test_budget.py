"""The memory check before an attack: the bytes a ranking of every document's pool needs, refused with the largest
shortlist that fits when the machine cannot hold it (sizes and advice computed by hand), and through an audit,
refused before the attack."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from tables import LEVEL, toy_attacker

from cpa_core.attack import budget
from cpa_core.attack.budget import BYTES_PER_CANDIDATE, available_memory, check_pool_fits
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import ConfigError

MB = 2**20


def test_a_pool_that_fits_exactly_runs_and_one_byte_less_is_refused_by_hand():
    assert BYTES_PER_CANDIDATE == 32
    needed = 1_000 * 500 * 32  # 16,000,000 bytes: 15.3 MB
    check_pool_fits(1_000, 500, None, available=needed)
    with pytest.raises(ConfigError) as refused:
        check_pool_fits(1_000, 500, None, available=needed - 1)
    # half of 15,999,999 bytes holds 249 candidates per document (x 1,000 x 32 bytes): one significant digit, 200,
    # that is 6,400,000 bytes (6.1 MB)
    assert str(refused.value) == (
        "ranking 1,000 documents against 500 candidates each needs about 15 MB of memory; this machine has 15 MB "
        "available. Declare a shortlist of at most 200 candidates per document (--top-k 200, or top_k in [audit]; "
        "about 6 MB); sets larger than the shortlist are its whole pool, and say so")


def test_the_width_is_the_shortlist_or_the_registry_whichever_is_smaller():
    check_pool_fits(1_000, 500, 10_000, available=1_000 * 500 * 32)  # a shortlist longer than the registry
    check_pool_fits(1_000, 10**6, 50, available=1_000 * 50 * 32)
    with pytest.raises(ConfigError, match="against 51 candidates each"):
        check_pool_fits(1_000, 10**6, 51, available=1_000 * 50 * 32)


def test_large_sizes_are_said_in_gigabytes_and_advice_keeps_one_digit():
    with pytest.raises(ConfigError) as refused:
        check_pool_fits(200_000, 100_000, None, available=10 * 2**30)
    # 200,000 x 100,000 x 32 bytes = 596.0 GB; half of 10 GB holds 838 candidates: 800, i.e. 4.8 GB
    message = str(refused.value)
    assert "needs about 596.0 GB of memory; this machine has 10.0 GB available" in message
    assert "at most 800 candidates per document (--top-k 800," in message and "about 4.8 GB)" in message
    with pytest.raises(ConfigError) as refused:
        check_pool_fits(1_000, 1_000, None, available=7 * 1_000 * 32 * 2)  # half holds 7 candidates: 7 (one digit)
    assert "--top-k 7," in str(refused.value)


def test_no_shortlist_fits_asks_for_fewer_documents():
    with pytest.raises(ConfigError) as refused:
        check_pool_fits(1_000, 1_000, None, available=1_000 * 32)  # half of it holds no candidate per document
    assert "Audit fewer documents at a time; sets larger than the shortlist" in str(refused.value)
    assert "--top-k" not in str(refused.value)


def test_without_a_figure_of_available_memory_nothing_is_refused(monkeypatch):
    monkeypatch.setattr(budget, "available_memory", lambda: None)
    check_pool_fits(10**9, 10**9, None)
    monkeypatch.setattr(budget, "available_memory", lambda: 1)
    with pytest.raises(ConfigError):
        check_pool_fits(10, 10, None)


@pytest.mark.parametrize("meminfo, available", [
    ("MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n", 2048 * 1024),
    ("MemTotal:       16000000 kB\n", None),               # an older kernel that does not say
    ("MemAvailable: lots\n", None),
])
def test_available_memory_is_memavailable_in_bytes(monkeypatch, meminfo, available):
    monkeypatch.setattr(budget, "open", lambda *args, **kwargs: io.StringIO(meminfo), raising=False)
    assert available_memory() == available


def test_available_memory_without_proc_is_unknown(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("/proc/meminfo")

    monkeypatch.setattr(budget, "open", missing, raising=False)
    assert available_memory() is None


def test_a_pool_the_machine_cannot_hold_is_refused_with_the_shortlist_that_fits():
    from cpa_core.attack.budget import BYTES_PER_CANDIDATE, check_pool_fits
    from cpa_core.common.errors import ConfigError

    gigabyte = 2**30
    check_pool_fits(10_000, 10_000, None, available=4 * gigabyte)  # 3.0 GB: fits
    check_pool_fits(30_000, 30_000, 100, available=4 * gigabyte)   # a shortlist: 96 MB
    check_pool_fits(0, 10**6, None, available=1)                   # nothing to rank
    with pytest.raises(ConfigError) as refused:
        check_pool_fits(30_000, 30_000, None, available=4 * gigabyte)
    message = str(refused.value)
    assert "30,000 documents against 30,000 candidates" in message and "26.8 GB" in message and "4.0 GB" in message
    # the advice fits in half the available memory, rounded down to one significant digit
    assert "--top-k 2000" in message and 30_000 * 2000 * BYTES_PER_CANDIDATE <= 2 * gigabyte
    with pytest.raises(ConfigError, match="Audit fewer documents"):
        check_pool_fits(10**9, 10, None, available=gigabyte)


def test_an_audit_the_machine_cannot_hold_is_refused_before_the_attack(sample_paths, monkeypatch):
    from cpa_core.attack import budget
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    level = LEVEL.__class__("K1", ("age_band", "gender", "occupation", "city"))
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.9,))
    needed = len(documents) * len(registry) * budget.BYTES_PER_CANDIDATE
    monkeypatch.setattr(budget, "available_memory", lambda: needed // 4)
    attacker = TfidfAttacker(temperature=0.1)
    monkeypatch.setattr(attacker, "attack", lambda *a, **k: pytest.fail("the attack ran"))
    with pytest.raises(ConfigError, match=f"ranking {len(documents):,} documents against {len(registry):,} "
                                          "candidates each .*--top-k"):
        run_audit(documents, registry, attacker, config)
    # a shortlist that fits runs
    fits = run_audit(documents, registry, TfidfAttacker(temperature=0.1, top_k=20), replace(config, top_k=20))
    assert fits.test_split.table.width == 20
