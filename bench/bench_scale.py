"""Benchmark: a whole TF-IDF audit as the documents grow, stage by stage, and the CLI's peak memory.

Each measured run is a fresh subprocess (its peak RSS is its own, ``VmHWM``); the data are generated once per
size by ``cpa_core.io.synthetic`` (1,000 registry people by default; documents about them).

    python bench/bench_scale.py [WORKDIR] [--documents 10000,30000,100000] [--people 1000] [--top-k none]
    python bench/bench_scale.py [WORKDIR] --cli --documents 20000 --people 5000 --top-k none

``stages``: load, attack (TF-IDF, temperature ``auto``), scoring and calibration, the summary, the worklist with
its evidence (explained in one batch), the records (streamed to disk), the worklist files and the manifest: each
timed, with the process's peak memory. ``--cli``: ``cpa audit`` itself, wall time and peak RSS of the command.

Workers: ``stages DIR TOP_K OUT`` and ``cli DIR TOP_K OUT`` print one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tfidf import StepMemory, _load, run_script_worker  # noqa: E402
from bench_tfidf import run_worker as _run_tfidf_worker

REPO = Path(__file__).resolve().parents[1]


def _top_k(value: str) -> int | None:
    return None if value in ("none", "0", "") else int(value)


def worker_stages(data: str, top_k: str, out: str, temperature: str = "auto") -> dict:
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import attack_documents, run_audit
    from cpa_core.report.evidence import audit_explainer
    from cpa_core.report.verdict import summary_document
    from cpa_core.report.worklist import worklist, worklist_csv, worklist_json
    from cpa_core.store.records import jsonl_lines, manifest, record_splits, records, write_private

    timings: dict[str, float] = {}

    def timed(name, fn):
        start = time.perf_counter()
        value = fn()
        timings[name] = time.perf_counter() - start
        return value

    started = time.perf_counter()
    documents, registry, level = timed("load", lambda: _load(Path(data)))
    k = _top_k(top_k)
    attacker = TfidfAttacker(top_k=k, temperature=temperature if temperature == "auto" else float(temperature))
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), top_k=k, flag_below=11)
    with StepMemory() as memory:
        table, _ = timed("attack", lambda: attack_documents(documents, registry, attacker, level))
        result = timed("score_calibrate", lambda: run_audit(documents, registry, attacker, config, table=table))
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        timed("summary", lambda: write_private(folder / "summary.json",
                                               json.dumps(summary_document(result), indent=2)))
        declared = result.config  # with its inputs' checksums
        explainer = audit_explainer(attacker, registry, declared)
        work = timed("worklist_evidence", lambda: worklist(result.certificate(declared.policy_confidence),
                                                           declared.policy, declared.config_id, explain=explainer))
        timed("records", lambda: [write_private(folder / f"{name}.jsonl",
                                                jsonl_lines(records(result, name, work=work)))
                                  for name in record_splits(result)])
        timed("worklist_files", lambda: (write_private(folder / "worklist.csv", worklist_csv(work)),
                                         write_private(folder / "worklist.json", worklist_json(work))))
        timed("manifest", lambda: write_private(folder / "manifest.json",
                                                json.dumps(manifest(result), indent=2, default=str)))
    total = time.perf_counter() - started
    sizes = {path.name: path.stat().st_size for path in Path(out).iterdir()}
    return {"seconds": total, "stages": timings, **memory.figures(), "n_documents": len(documents),
            "n_registry": len(registry), "n_flagged": len(work), "bytes": sizes}


def worker_cli(data: str, top_k: str, out: str, history: str = "no") -> dict:
    """``cpa audit`` on the data (the sample configuration's K2 and levels, ``--top-k`` when given; the audit
    history and its snapshot written when ``history`` is "yes"); the command's peak RSS is this worker's only
    child's."""
    command = [str(Path(sys.executable).with_name("cpa")), "audit", "--documents", f"{data}/documents.csv",
               "--registry", f"{data}/registry.csv", "--config", str(REPO / "sample_data" / "audit.toml"),
               "--out", out]
    command += ["--history", f"{out}/history.jsonl"] if history == "yes" else ["--no-history"]
    k = _top_k(top_k)
    if k is not None:
        command += ["--top-k", str(k)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        raise RuntimeError(f"cpa audit failed ({done.returncode}): {done.stderr[-2000:]}")
    sizes = {path.name: path.stat().st_size for path in Path(out).iterdir()}
    return {"seconds": seconds, "peak_mib": peak, "bytes": sizes, "message": done.stderr.strip().splitlines()[-1:]}


def run_worker(*args) -> dict:
    return run_script_worker(__file__, *args)


def dataset(workdir: Path, people: int, documents: int) -> Path:
    data = workdir / f"p{people}-d{documents}"
    if not (data / "documents.csv").exists():
        _run_tfidf_worker("generate", data, people, documents, 20261124)
    return data


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("stages", "cli"):
        worker = {"stages": worker_stages, "cli": worker_cli}[sys.argv[1]]
        print(json.dumps(worker(*sys.argv[2:])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", default="/tmp/cpa_bench_scale")
    parser.add_argument("--documents", default="10000,30000,100000")
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--top-k", default="none")
    parser.add_argument("--temperature", default="auto", help="the attacker's temperature (stages only)")
    parser.add_argument("--cli", action="store_true", help="time `cpa audit` itself (peak RSS of the command)")
    parser.add_argument("--history", action="store_true", help="--cli: also record the audit history and snapshot")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"cores: {os.cpu_count()}, load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    for n in (int(x) for x in args.documents.split(",")):
        data = dataset(workdir, args.people, n)
        out = workdir / f"out-{args.people}-{n}-{args.top_k}-{'cli' if args.cli else 'stages'}"
        extra = ("yes" if args.history else "no") if args.cli else args.temperature
        row = run_worker("cli" if args.cli else "stages", data, args.top_k, out, extra)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        records = sum(size for name, size in row["bytes"].items() if name.endswith(".jsonl")) / 2**20
        if args.cli:
            print(f"  {n:>7} docs x {args.people} people, top-K {args.top_k}, history {extra}: cpa audit "
                  f"{row['seconds']:.1f} s, "
                  f"peak {row['peak_mib']:.0f} MiB, records {records:.0f} MiB (load {load})")
        else:
            stages = ", ".join(f"{name} {seconds:.1f}" for name, seconds in row["stages"].items())
            print(f"  {n:>7} docs x {row['n_registry']} people, top-K {args.top_k}, T {extra}: {row['seconds']:.1f} s "
                  f"({stages}), peak {row['process_peak_mib']:.0f} MiB, {row['n_flagged']} flagged, "
                  f"records {records:.0f} MiB (load {load})")
        print("    " + json.dumps(row))


if __name__ == "__main__":
    main()
