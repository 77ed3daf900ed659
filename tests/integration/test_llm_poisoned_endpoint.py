"""An OpenAI-compatible endpoint that answers badly, on a real socket: a fake server on 127.0.0.1 (stopped by the test).

First it answers every request with ``content: null`` and ``finish_reason`` ``length`` or ``content_filter``: the
``cpa audit`` run counts 80 failed answers of 80, caches none of them, and its verdict fails the "LLM answers"
check. Then it recovers: the next run asks every request again (nothing of the bad answers is reused) and gets
valid picks; a third run is answered from the cache, and ``--refresh-llm-cache`` asks everything again without
changing the configuration id. Last, an endpoint that ignores ``max_tokens`` and sends an enormous answer: the
client reads no more than its bound, keeps memory bounded and caches nothing.
"""

from __future__ import annotations

import json
import logging
import threading
import tracemalloc
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from cpa_core.llm.client import MAX_RESPONSE_BYTES, LLMClient, LLMRequest, LLMSettings
from cpa_core.llm.response_cache import ResponseCache

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
N_DOCS, SAMPLES = 40, 2
MARKER = b"ENORMOUS-ANSWER-TEXT "  # the content of the enormous answer: never in a message or a log
OFFERED = 512 * 2**20  # what the enormous answer would send if nobody stopped reading


class Endpoint:
    """What the fake server answers (``mode``), and what it was asked and sent."""

    def __init__(self):
        self.mode = "poisoned"
        self.requests: Counter = Counter()
        self.max_tokens: set = set()
        self.sent = 0
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # nothing on stderr
        pass

    def do_POST(self) -> None:
        endpoint: Endpoint = self.server.endpoint
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with endpoint.lock:
            mode = endpoint.mode
            endpoint.requests[mode] += 1
            endpoint.max_tokens.add(body.get("max_tokens"))
            n = endpoint.requests[mode]
        if mode in ("enormous", "announced"):
            return self.enormous(endpoint, announced=mode == "announced")
        if mode == "poisoned":
            content, finish = None, ("length" if n % 2 else "content_filter")
        else:
            content, finish = "A", "stop"
        answer = json.dumps({"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body["model"],
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                          "finish_reason": finish}],
                             "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def enormous(self, endpoint: Endpoint, announced: bool) -> None:
        """An answer that ignores max_tokens: OFFERED bytes of content, chunked (or announced by Content-Length),
        until the client stops reading."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        if announced:
            self.send_header("Content-Length", str(OFFERED))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        head = b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "'
        chunk = MARKER * (65_536 // len(MARKER))
        try:
            for piece in [head] + [chunk] * (OFFERED // len(chunk)):
                self.wfile.write(piece if announced else b"%x\r\n%s\r\n" % (len(piece), piece))
                with endpoint.lock:
                    endpoint.sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading
        self.close_connection = True


@pytest.fixture
def endpoint():
    """The fake server on a free loopback port; stopped (and its socket closed) when the test ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.endpoint = Endpoint()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.endpoint, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def release(tmp_path, monkeypatch):
    """The first N_DOCS sample documents, the sample registry, and this test's own answer cache and key."""
    monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-fake-endpoint")  # never a real key, even to a local server
    documents = tmp_path / "documents.csv"
    pd.read_csv(SAMPLE_DIR / "documents.csv").head(N_DOCS).to_csv(documents, index=False)
    return documents, SAMPLE_DIR / "registry.csv"


def audit(cli_inprocess, release, base_url, out, *extra):
    documents, registry = release
    result = cli_inprocess("audit", "--documents", documents, "--registry", registry, "--attacker", "forced_choice",
                           "--samples", SAMPLES, "--shortlist-k", 3, "--llm-url", base_url, "--llm-model", "fake-model",
                           "--confidence", 0.8, "--no-history", "--out", out, *extra)
    assert result.returncode == 0, result.describe()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    check = next(c for c in summary["verdict"]["checks"] if c["name"] == "LLM answers")
    return result, summary, manifest, check


def cached_answers(tmp_path) -> int:
    cache = ResponseCache(tmp_path / "cache" / "llm")
    try:
        return len(cache)
    finally:
        cache.close()


def test_bad_answers_are_not_cached_the_verdict_fails_and_the_next_run_asks_again(tmp_path, endpoint, release,
                                                                                  cli_inprocess):
    server, base_url = endpoint
    requests = N_DOCS * SAMPLES

    # 1. every answer empty and truncated or filtered: counted, not cached, the verdict fails the new check
    first, summary, manifest, check = audit(cli_inprocess, release, base_url, tmp_path / "poisoned")
    assert server.requests["poisoned"] == requests and cached_answers(tmp_path) == 0
    assert check["passed"] is False and summary["verdict"]["status"] in ("inconclusive", "unsafe")
    assert check["reason"].startswith(f"the LLM attacker gave no valid answer for {requests} of {requests} requests "
                                      "(100 %, above the 5 % allowed")
    assert check["reason"].endswith("the attack was crippled and the risk is understated")
    assert f"failed check, LLM answers: the LLM attacker gave no valid answer for {requests} of {requests}" in \
        first.stderr
    counters = manifest["inputs"]["llm_counters"]["attacker"]
    assert counters["invalid_answers"] == counters["failed_answers"] == counters["invalid_picks"] == requests
    assert summary["llm_answers"] == [{"component": "attacker", "requests": requests, "invalid": requests,
                                       "failed": requests, "invalid_share": 1.0}]

    # 2. the endpoint recovers: every request is asked again (no bad answer reused), every pick is valid
    server.mode = "healthy"
    _, summary, manifest, check = audit(cli_inprocess, release, base_url, tmp_path / "healthy")
    assert server.requests["healthy"] == requests and cached_answers(tmp_path) == requests
    assert check["passed"] is True and check["reason"].startswith(
        f"the LLM attacker gave no valid answer for 0 of {requests} requests (0 %, within the 5 % allowed")
    assert manifest["inputs"]["llm_counters"]["attacker"]["invalid_picks"] == 0
    config_id = summary["config_id"]

    # 3. the good answers are cached: no call
    _, summary, _, _ = audit(cli_inprocess, release, base_url, tmp_path / "cached")
    assert server.requests["healthy"] == requests and summary["config_id"] == config_id

    # 4. --refresh-llm-cache asks every request again, and the configuration is the same one
    _, summary, manifest, check = audit(cli_inprocess, release, base_url, tmp_path / "refreshed",
                                        "--refresh-llm-cache")
    assert server.requests["healthy"] == 2 * requests and check["passed"] is True
    assert summary["config_id"] == config_id and manifest["config_id"] == config_id
    assert "refresh" not in json.dumps(manifest["config"])
    assert server.max_tokens == {16}  # the forced-choice attacker's answer length limit was sent every time


@pytest.mark.parametrize("mode", ["enormous", "announced"])
def test_an_enormous_answer_keeps_memory_and_cache_bounded(tmp_path, endpoint, mode, caplog, monkeypatch):
    """The endpoint ignores max_tokens and would send 512 MiB per answer (chunked, or announced by its length):
    the client reads at most MAX_RESPONSE_BYTES, its memory stays within a few times that, nothing is cached, and
    each request is a failed call whose message holds none of the content."""
    server, base_url = endpoint
    server.mode = mode
    monkeypatch.setenv("CPA_TEST_FAKE_KEY", "sk-local-fake-endpoint")
    settings = LLMSettings(base_url=base_url, model="fake-model", api_key_env="CPA_TEST_FAKE_KEY", max_tokens=8,
                           cache_dir=str(tmp_path / "cache"), concurrency=2, max_retries=0, timeout_s=30.0)
    requests = [LLMRequest(messages=({"role": "user", "content": f"question {i}"},), seed=i) for i in range(4)]
    with caplog.at_level(logging.DEBUG, logger="cpa_core"), LLMClient(settings) as client:  # its own HTTP client
        answers = client.complete(requests[:1])  # the first call loads the code it runs: not counted below
        tracemalloc.start()
        try:
            answers += client.complete(requests[1:])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(client.cache) == 0 and client.estimate_calls(requests) == 4
    assert [a.failure for a in answers] == [f"response over {MAX_RESPONSE_BYTES:,} bytes"] * 4
    assert all(a.text == "" for a in answers) and client.failed_answers_ == 4 and client.calls_made_ == 4
    assert server.requests[mode] == 4 and server.max_tokens == {8}
    # at most one bounded body per call in flight (two here), never the 512 MiB offered
    assert peak < (settings.concurrency + 1) * MAX_RESPONSE_BYTES, f"peak {peak:,} bytes"
    assert server.sent < OFFERED // 2  # the server was cut off long before it sent its answers
    if mode == "announced":  # refused on the announced length, before the body was read: not even one bounded
        # body in memory (what the server managed to send is what the loopback's socket buffers took, several MiB)
        assert peak < MAX_RESPONSE_BYTES // 2, f"peak {peak:,} bytes"
    assert MARKER.decode().strip() not in caplog.text
    assert "3 of 3 answers failed (3 response over" in caplog.text
