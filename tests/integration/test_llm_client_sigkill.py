"""An LLM run killed by SIGKILL in the middle resumes from the on-disk cache without asking any answered request
again: a child process against the scripted endpoint of tests/llm_endpoint.py, then this one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from llm_endpoint import FakeEndpoint, api_key, client_for, requests_for  # noqa: F401 (api_key: the autouse fixture)

REPO_ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import json, os, signal, sys, httpx
    sys.path.insert(0, sys.argv[3])
    from cpa_core.llm.client import LLMClient, LLMSettings
    from llm_endpoint import FakeEndpoint, requests_for, completion_body
    log, count = open(sys.argv[2], "a"), [0]
    def handler(request):
        body = json.loads(request.content)
        count[0] += 1
        if count[0] == 6:
            os.kill(os.getpid(), signal.SIGKILL)
        log.write(json.dumps(body["seed"]) + "\\n"); log.flush()
        return httpx.Response(200, json=completion_body(FakeEndpoint.answer_text(body)))
    settings = LLMSettings(base_url="http://llm.test/v1", model="test-model", api_key_env="CPA_TEST_LLM_KEY",
                           cache_dir=sys.argv[1], concurrency=1)
    LLMClient(settings, http_client=httpx.Client(transport=httpx.MockTransport(handler))).complete(requests_for(10))
""")


@pytest.mark.skipif(not hasattr(os, "kill") or sys.platform == "win32", reason="needs SIGKILL")
def test_run_killed_by_sigkill_resumes_from_the_cache(tmp_path):
    answered_log = tmp_path / "answered.log"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "cache"), str(answered_log),
                            str(REPO_ROOT / "tests")], env=env, capture_output=True, timeout=120)
    assert child.returncode == -9, child.stderr.decode()[-2000:]
    answered_before = [json.loads(line) for line in answered_log.read_text().splitlines()]
    assert len(answered_before) == 5
    endpoint = FakeEndpoint()
    with client_for(tmp_path, endpoint, concurrency=1) as client:
        assert client.estimate_calls(requests_for(10)) == 5
        out = client.complete(requests_for(10))
    asked_now = [b["seed"] for b in endpoint.bodies]
    assert len(asked_now) == 5 and not set(asked_now) & set(answered_before)
    assert sum(r.cached for r in out) == 5
