"""Memory: refuse, before the attack, a candidate table the machine cannot hold."""

from __future__ import annotations

from cpa_core.common.errors import ConfigError

BYTES_PER_CANDIDATE = 32
"""Memory an audit holds per ranked candidate of a document: its column (4 bytes) and weight (8) in the table,
its stored score (8), and room for the table's rows taken apart into the calibration and audited splits."""


def available_memory() -> int | None:
    """Bytes this machine can still give (``MemAvailable``), or ``None`` where it does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gigabytes(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:,.1f} GB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:,.0f} MB"


def check_pool_fits(n_documents: int, n_registry: int, top_k: int | None, available: int | None = None) -> None:
    """Refuse, before any work, a ranking of every document's pool that this machine cannot hold.

    A retrieval attacker ranks ``min(top_k, n_registry)`` candidates per document (the whole registry without a
    shortlist). When that needs more than the available memory, the message says how much it needs, how much
    there is, and the largest shortlist (``top_k``) that fits in half of it: a shortlist keeps the weights of
    its candidates and counts the others' mass below them, so the certificate stays valid.
    """
    available = available_memory() if available is None else available
    width = n_registry if top_k is None else min(top_k, n_registry)
    needed = n_documents * width * BYTES_PER_CANDIDATE
    if available is None or n_documents == 0 or needed <= available:
        return
    fits = int(available // 2 // (n_documents * BYTES_PER_CANDIDATE))
    if fits >= 1:
        digits = 10 ** (len(str(fits)) - 1)
        fits = fits // digits * digits  # one significant digit, rounded down
        advice = (f"Declare a shortlist of at most {fits:,} candidates per document (--top-k {fits}, or top_k in "
                  f"[audit]; about {_gigabytes(n_documents * fits * BYTES_PER_CANDIDATE)})")
    else:
        advice = "Audit fewer documents at a time"
    raise ConfigError(f"ranking {n_documents:,} documents against {width:,} candidates each needs about "
                      f"{_gigabytes(needed)} of memory; this machine has {_gigabytes(available)} available. "
                      f"{advice}; sets larger than the shortlist are its whole pool, and say so")
