"""Benchmark of the LLM attackers against a local OpenAI-compatible server (llama.cpp, SmolLM2-135M-Instruct).

For each LLM attacker (TF-IDF with LLM clues, forced choice by sampling, forced choice by logprobs,
Profile-CPA) on the first ``--documents`` sample documents:

- cold cache, client concurrency 1, then 4 (a fresh cache directory each time): wall time of
  ``attacker.attack`` and the HTTP requests sent;
- warm cache: the same attack with a fresh client on the concurrency-4 cache directory: wall time and
  HTTP requests (target 0).

The server is started as the test fixture starts it (``python -m llama_cpp.server`` on a loopback port, one
thread unless ``--server-threads``) and stopped at the end. Runs of the two concurrency settings alternate
per attacker, so that load changes on the machine hit both.

Standalone::

    .venv/bin/python bench/bench_llm.py [--documents 30] [--m 2] [--attackers clues,sampling,logprobs,profile]

Prints a markdown table on stdout and progress on stderr: counts and timings only, never a text, prompt or
answer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from llm_server import MODEL_ALIAS, free_port, missing_requirement, model_path  # noqa: E402

from cpa_core.attack.attackers.forced_choice import ForcedChoiceAttacker
from cpa_core.attack.attackers.profile import ProfileAttacker, attributes_from_registry
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.clues import LLMClueExtractor
from cpa_core.audit.project import load_config
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.llm.client import LLMClient, LLMSettings

ATTACKERS = ("clues", "sampling", "logprobs", "profile")
KEY_ENV = "CPA_BENCH_LLM_KEY"  # unset: the local server needs no key


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Server:
    """``python -m llama_cpp.server`` on a free loopback port, as tests/llm_server.py starts it."""

    def __init__(self, threads: int, timeout_s: float = 120.0):
        import httpx

        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--model_alias",
                   MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads",
                   str(threads), "--n_threads_batch", str(threads), "--interrupt_requests", "False",
                   "--verbose", "False"]
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit("bench_llm: the llama.cpp server did not start")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()


def build(name: str, client: LLMClient, registry, m: int, shortlist_k: int):
    if name == "clues":
        return TfidfAttacker(temperature=0.1, clue_extractor=LLMClueExtractor(client, max_clues=3, retries=1))
    if name in ("sampling", "logprobs"):
        return ForcedChoiceAttacker(TfidfAttacker(temperature=0.1), client, m=m, shortlist_k=shortlist_k, mode=name,
                                    max_tokens=4)
    return ProfileAttacker(client, attributes_from_registry(registry, ["gender", "age_band"]), m=m, max_tokens=6)


def level_for(name: str, project):
    from dataclasses import replace
    if name == "clues":
        return replace(project.level("K2"), name="K2+clues", query_mode="direct_plus_clues")
    return project.level("K1")


def measure(name: str, base_url: str, cache_dir: str, concurrency: int, data, args) -> dict:
    project, doc_ids, texts, registry = data
    settings = LLMSettings(base_url=base_url, model=MODEL_ALIAS, api_key_env=KEY_ENV, max_tokens=32, timeout_s=300.0,
                           max_retries=1, concurrency=concurrency, cache_dir=cache_dir)
    with LLMClient(settings) as client:
        attacker = build(name, client, registry, args.m, args.shortlist_k)
        level = level_for(name, project)
        expected = attacker.estimate_calls(doc_ids, texts, registry, level)
        started = time.perf_counter()
        attacker.attack(doc_ids, texts, registry, level)
        wall = time.perf_counter() - started
        return {"wall": wall, "calls": client.calls_made_, "retries": client.retries_, "estimated": expected,
                "requests": client.calls_made_ - client.retries_}


def warm_up(base_url: str, cache_dir: str, data) -> None:
    """One LLM request and one TF-IDF attack, not measured: the server's first request and the imports."""
    from cpa_core.llm.client import LLMRequest
    project, doc_ids, texts, registry = data
    TfidfAttacker(temperature=1.0).attack(doc_ids[:2], texts[:2], registry, project.level("K1"))
    settings = LLMSettings(base_url=base_url, model=MODEL_ALIAS, api_key_env=KEY_ENV, max_tokens=2, cache_dir=cache_dir)
    with LLMClient(settings) as client:
        client.complete([LLMRequest(messages=({"role": "user", "content": "Say OK."},), seed=1)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=30, help="sample documents attacked (default 30)")
    parser.add_argument("--m", type=int, default=2, help="samples per document (forced choice, Profile-CPA)")
    parser.add_argument("--shortlist-k", type=int, default=4, help="forced-choice shortlist (default 4)")
    parser.add_argument("--attackers", default=",".join(ATTACKERS), help=f"subset of {','.join(ATTACKERS)}")
    parser.add_argument("--server-threads", type=int, default=int(os.environ.get("CPA_LLM_SERVER_THREADS", "1")))
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.attackers.split(",") if n.strip()]
    unknown = [n for n in names if n not in ATTACKERS]
    if unknown:
        parser.error(f"unknown attacker(s) {unknown}; expected a subset of {', '.join(ATTACKERS)}")
    reason = missing_requirement()
    if reason:
        raise SystemExit(f"bench_llm: {reason}; install it with: bash scripts/install_llm_server.sh")

    project = load_config(REPO / "sample_data" / "audit.toml")
    documents = load_documents(REPO / "sample_data" / "documents.csv")
    registry = load_registry(REPO / "sample_data" / "registry.csv")
    frame = documents.frame.iloc[: args.documents]
    data = (project, frame["doc_id"].tolist(), frame["text"].tolist(), registry)

    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    log(f"bench_llm: starting the llama.cpp server ({args.server_threads} thread(s))")
    server = Server(args.server_threads)
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="cpa-bench-llm-"))
    try:
        warm_up(server.base_url, str(scratch / "warm-up"), data)
        for name in names:
            results = {}
            for concurrency in (1, 4):
                cache = scratch / f"{name}-c{concurrency}"
                log(f"bench_llm: {name}, concurrency {concurrency}, cold cache ...")
                results[concurrency] = measure(name, server.base_url, str(cache), concurrency, data, args)
                log(f"bench_llm:   {results[concurrency]['wall']:.1f} s, {results[concurrency]['calls']} calls")
            log(f"bench_llm: {name}, warm cache ...")
            warm = measure(name, server.base_url, str(scratch / f"{name}-c4"), 4, data, args)
            rows.append((name, results[1], results[4], warm))
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    load_end = os.getloadavg()[0]

    print(f"LLM attackers on {args.documents} sample documents, m = {args.m}, shortlist {args.shortlist_k}; "
          f"llama.cpp server (SmolLM2-135M-Instruct Q4_1) with {args.server_threads} thread(s); "
          f"load average {load_start:.1f} -> {load_end:.1f}; total {time.perf_counter() - started:.0f} s.\n")
    print("| attacker | requests (cold) | cold, concurrency 1 | cold, concurrency 4 | speed-up 1 -> 4 | "
          "warm cache (concurrency 4) | warm HTTP calls (target 0) |")
    print("|---|---|---|---|---|---|---|")
    labels = {"clues": "TF-IDF + LLM clues (K2)", "sampling": "forced choice, sampling (K1)",
              "logprobs": "forced choice, logprobs (K1)", "profile": "Profile-CPA, 2 attributes (K1)"}
    for name, one, four, warm in rows:
        print(f"| {labels[name]} | {one['requests']} | {one['wall']:.1f} s ({one['calls']} calls, "
              f"{one['wall'] / max(one['calls'], 1):.2f} s/call) | {four['wall']:.1f} s ({four['calls']} calls, "
              f"{four['wall'] / max(four['calls'], 1):.2f} s/call) | {one['wall'] / four['wall']:.2f}x | "
              f"{warm['wall']:.2f} s | {warm['calls']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
