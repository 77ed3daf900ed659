"""Benchmark of the dense retrieval attacker (all-MiniLM-L6-v2, packaged) on the sample data.

(a) Cold cache: a whole audit with the dense attacker (profile and query encoding, caching, ranking,
    calibration) against raw ``SentenceTransformer.encode`` of the same texts with the same model
    object and batch size. Target: within 1.1x. Runs alternate (raw, ours, raw, ours, ...) so that
    load changes on the machine hit both; the best of each is compared.
(b) Warm cache: the same audit again with a new attacker object: encoder passes (target 0) and
    wall time; and once more in a fresh Python process, which must not even load the model.

Standalone::

    .venv/bin/python bench/bench_dense.py [--documents 1000] [--repeats 2] [--knowledge K3]

Prints a markdown table (and progress on stderr). Nothing printed contains a text.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.model_store import load_sentence_transformer, packaged_model_path
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import load_config
from cpa_core.io.knowledge import profile_texts
from cpa_core.io.tables import Documents, load_documents, load_registry

FRESH_PROCESS = """
import json, os, sys, time
start = time.perf_counter()
sys.path.insert(0, {repo!r})
from cpa_core import AttackerConfig, AuditConfig, load_config, load_documents, load_registry, run_audit
from cpa_core.attack import model_store
from cpa_core.attack.attackers import dense as dense_module
documents = load_documents({documents!r})
documents = documents.__class__(documents.frame.iloc[:{n}].reset_index(drop=True), documents.file, documents.sha256,
                                documents.report)
registry = load_registry({registry!r})
level = load_config({config!r}).level({knowledge!r})
attacker = dense_module.DenseAttacker(temperature=0.05, batch_size={batch_size}, cache_dir={cache!r})
config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), n_cal={n_cal}, n_test={n_test}, seed=7, protocol="split")
audit_start = time.perf_counter()
run_audit(documents, registry, attacker, config)
print(json.dumps({{"encoder_calls": attacker.encoder_calls_, "encoded_texts": attacker.encoded_texts_,
                  "audit_s": time.perf_counter() - audit_start, "process_s": time.perf_counter() - start,
                  "model_loaded": bool(model_store._MODELS)}}))
"""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1000, help="sample documents to audit (default 1000)")
    parser.add_argument("--repeats", type=int, default=2, help="cold runs of each side, alternated (default 2)")
    parser.add_argument("--knowledge", default="K3", help="knowledge level of sample_data/audit.toml (default K3)")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)

    scratch_dir = tempfile.TemporaryDirectory(prefix="cpa-bench-dense-")
    scratch = scratch_dir.name
    paths = {}
    for name in ("documents.csv", "registry.csv", "audit.toml"):  # a snapshot: the data may be regenerated meanwhile
        paths[name] = Path(scratch) / name
        shutil.copyfile(REPO / "sample_data" / name, paths[name])
    full = load_documents(paths["documents.csv"])
    documents = Documents(full.frame.iloc[: args.documents].reset_index(drop=True), full.file, full.sha256, full.report)
    registry = load_registry(paths["registry.csv"])
    level = load_config(paths["audit.toml"]).level(args.knowledge)
    n_cal = len(documents) // 2
    n_test = len(documents) - n_cal
    profiles = profile_texts(registry, level)
    queries = documents.frame["text"].tolist()
    n_texts = len(profiles) + len(queries)

    import torch
    start = time.perf_counter()
    model = load_sentence_transformer(packaged_model_path())
    load_s = time.perf_counter() - start
    model.encode(queries[:16], batch_size=args.batch_size, show_progress_bar=False)  # first-call warm-up
    say(f"model loaded in {load_s:.1f}s; {len(profiles)} profiles + {len(queries)} documents; "
        f"torch threads {torch.get_num_threads()}")

    def raw() -> tuple[float, float]:
        begin, cpu = time.perf_counter(), time.process_time()
        for texts in (profiles, queries):
            model.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, normalize_embeddings=True,
                         show_progress_bar=False)
        return time.perf_counter() - begin, time.process_time() - cpu

    def audit(cache: str):
        attacker = DenseAttacker(temperature=0.05, batch_size=args.batch_size, cache_dir=cache)
        config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), n_cal=n_cal, n_test=n_test,
                             seed=7, protocol="split")
        begin, cpu = time.perf_counter(), time.process_time()
        result = run_audit(documents, registry, attacker, config)
        return (time.perf_counter() - begin, time.process_time() - cpu), attacker, result

    load_before = os.getloadavg()[0]
    raw_times, cold_times = [], []
    with scratch_dir:
        for repeat in range(args.repeats):
            raw_times.append(raw())
            say(f"[{repeat + 1}/{args.repeats}] raw encode {raw_times[-1][0]:.1f}s (cpu {raw_times[-1][1]:.1f}s)")
            cache = os.path.join(scratch, f"cold-{repeat}")
            seconds, cold, result = audit(cache)
            cold_times.append(seconds)
            say(f"[{repeat + 1}/{args.repeats}] dense audit, cold cache {seconds[0]:.1f}s (cpu {seconds[1]:.1f}s; "
                f"{cold.encoder_calls_} encoder calls, {cold.encoded_texts_} texts)")
        (warm_s, _), warm, _ = audit(cache)
        say(f"dense audit, warm cache {warm_s:.2f}s ({warm.encoder_calls_} encoder calls)")
        script = FRESH_PROCESS.format(repo=str(REPO), documents=str(paths["documents.csv"]), n=args.documents,
                                      registry=str(paths["registry.csv"]), config=str(paths["audit.toml"]),
                                      knowledge=args.knowledge, batch_size=args.batch_size, cache=cache,
                                      n_cal=n_cal, n_test=n_test)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            say(done.stderr[-2000:])
            return 1
        fresh = json.loads(done.stdout.strip().splitlines()[-1])
        say(f"dense audit, warm cache, fresh process: {fresh}")

    top1 = float((result.test_split.truth_positions == 0).mean())
    load_after = os.getloadavg()[0]
    best_raw, best_cold = min(t for t, _ in raw_times), min(t for t, _ in cold_times)
    ratio = best_cold / best_raw
    cpu_ratio = min(c for _, c in cold_times) / min(c for _, c in raw_times)
    rows = [
        ("texts encoded per cold pass", f"{n_texts} ({len(profiles)} profiles, {len(queries)} documents, "
                                        f"{args.knowledge})", ""),
        ("raw `SentenceTransformer.encode` (best of %d)" % args.repeats,
         f"{best_raw:.1f} s ({n_texts / best_raw:.0f} texts/s)", ""),
        ("dense attacker, whole audit, cold cache (best of %d)" % args.repeats,
         f"{best_cold:.1f} s ({n_texts / best_cold:.0f} texts/s)", ""),
        ("cold audit / raw encode, wall time", f"{ratio:.3f}x", "PASS" if ratio <= 1.1 else "FAIL (target <= 1.1x)"),
        ("cold audit / raw encode, CPU time (robust to load)", f"{cpu_ratio:.3f}x",
         "PASS" if cpu_ratio <= 1.1 else "FAIL (target <= 1.1x)"),
        ("second audit, warm cache: encoder passes", f"{warm.encoder_calls_} ({warm.encoded_texts_} texts)",
         "PASS" if warm.encoder_calls_ == 0 else "FAIL (target 0)"),
        ("second audit, warm cache: wall time", f"{warm_s:.2f} s ({best_cold / max(warm_s, 1e-9):.0f}x faster)", ""),
        ("warm audit in a fresh process: encoder passes / model loaded",
         f"{fresh['encoder_calls']} / {'yes' if fresh['model_loaded'] else 'no'}",
         "PASS" if fresh["encoder_calls"] == 0 and not fresh["model_loaded"] else "FAIL"),
        ("warm audit in a fresh process: audit / whole process",
         f"{fresh['audit_s']:.2f} s / {fresh['process_s']:.2f} s", ""),
        ("model load (once per process)", f"{load_s:.1f} s", ""),
        ("test top-1 (K3, %d test documents)" % len(result.test_split), f"{top1:.1%}", ""),
        ("raw encode runs, wall / CPU", ", ".join(f"{t:.1f} / {c:.1f}" for t, c in raw_times) + " s", ""),
        ("cold audit runs, wall / CPU", ", ".join(f"{t:.1f} / {c:.1f}" for t, c in cold_times) + " s", ""),
        ("machine load average (1 min) before / after", f"{load_before:.1f} / {load_after:.1f} "
                                                        f"on {os.cpu_count()} CPUs", ""),
    ]
    print(f"\n### Dense attacker (all-MiniLM-L6-v2, CPU, torch threads {torch.get_num_threads()}, "
          f"batch size {args.batch_size})\n")
    print("| measure | value | check |")
    print("|---|---|---|")
    for measure, value, check in rows:
        print(f"| {measure} | {value} | {check} |")
    return 0 if min(ratio, cpu_ratio) <= 1.1 and warm.encoder_calls_ == 0 and fresh["encoder_calls"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
