"""Seeded, disjoint calibration/test splits, stratified per group when calibrating per group."""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from cpa_core.common.errors import ConfigError


def _proportional(total: int, sizes: np.ndarray) -> np.ndarray:
    """Integer quotas summing to ``total``, proportional to ``sizes`` (largest remainder)."""
    exact = total * sizes / sizes.sum()
    quota = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - quota), kind="stable")[: total - quota.sum()]:
        quota[i] += 1
    return quota


def split_indices(n_docs: int, n_cal: int | None, n_test: int | None, seed: int,
                  strata: Sequence[Hashable] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint calibration and test indices into ``range(n_docs)``.

    ``n_cal``/``n_test`` default to half of the documents each (the rest when one is given). With
    ``strata`` the split is stratified: each stratum contributes in proportion to its size.
    """
    if n_cal is None and n_test is None:
        n_cal = n_docs // 2
    if n_cal is None:
        n_cal = n_docs - n_test
    if n_test is None:
        n_test = n_docs - n_cal
    if n_cal < 1 or n_test < 1:
        raise ConfigError(f"n_cal and n_test must be at least 1, found n_cal={n_cal}, n_test={n_test}")
    if n_cal + n_test > n_docs:
        raise ConfigError(f"n_cal + n_test = {n_cal + n_test} exceeds the {n_docs} documents available")
    rng = np.random.default_rng(seed)
    if strata is None:
        order = rng.permutation(n_docs)
        return np.sort(order[:n_cal]), np.sort(order[n_cal:n_cal + n_test])
    labels = np.asarray(list(strata), dtype=object)
    keys = sorted(set(labels.tolist()), key=str)
    members = [rng.permutation(np.flatnonzero(labels == key)) for key in keys]
    sizes = np.array([len(m) for m in members])
    cal_quota = _proportional(n_cal, sizes)
    test_quota = np.minimum(_proportional(n_test, sizes), sizes - cal_quota)
    while test_quota.sum() < n_test:  # rounding hit a small stratum's size: move the rest elsewhere
        room = sizes - cal_quota - test_quota
        test_quota[np.argmax(room)] += 1
    cal = np.concatenate([m[:c] for m, c in zip(members, cal_quota)])
    test = np.concatenate([m[c:c + t] for m, c, t in zip(members, cal_quota, test_quota)])
    return np.sort(cal), np.sort(test)
