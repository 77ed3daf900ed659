"""Where recomputable data is kept: ``$CPA_CACHE_DIR`` when set and not blank, else ``~/.cache/cpa``; one folder
per kind of cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpa_core.common.cache_dirs import ENV_VAR, cache_dir, cache_root


def test_the_environment_variable_is_the_root(monkeypatch, tmp_path):
    assert ENV_VAR == "CPA_CACHE_DIR"
    monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path / "cache"))
    assert cache_root() == tmp_path / "cache"
    assert cache_dir("embeddings") == tmp_path / "cache" / "embeddings"
    assert cache_dir("llm") == tmp_path / "cache" / "llm"
    assert not (tmp_path / "cache").exists()  # naming a folder creates nothing


@pytest.mark.parametrize("value", [None, "", "   "])
def test_without_a_root_the_users_cache_folder(monkeypatch, tmp_path, value):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if value is None:
        monkeypatch.delenv("CPA_CACHE_DIR", raising=False)
    else:
        monkeypatch.setenv("CPA_CACHE_DIR", value)
    assert cache_root() == tmp_path / "home" / ".cache" / "cpa"
    assert cache_dir("llm") == tmp_path / "home" / ".cache" / "cpa" / "llm"


def test_a_root_is_expanded_and_trimmed(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CPA_CACHE_DIR", "  ~/elsewhere  ")
    assert cache_root() == tmp_path / "home" / "elsewhere"
    monkeypatch.setenv("CPA_CACHE_DIR", "relative/cache")
    assert cache_dir("embeddings") == Path("relative/cache/embeddings")
