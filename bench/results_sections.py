"""A benchmark's section of RESULTS.md, put in place of its previous version, else just before the standalone
benchmarks' marker (the end of what ``run.py`` writes)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
STANDALONE_MARKER = "<!-- standalone benchmarks below"


def write_section(text: str, heading: str, results_file: Path = RESULTS) -> None:
    """Replace the section that starts with ``heading`` by ``text`` (or insert it before the standalone marker)."""
    lines = results_file.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is not None:
        stop = next((i for i in range(start + 1, len(lines))
                     if lines[i].startswith("## ") or lines[i].startswith(STANDALONE_MARKER)), len(lines))
        lines[start:stop] = [text.rstrip() + "\n\n"]
    else:
        at = next((i for i, line in enumerate(lines) if line.startswith(STANDALONE_MARKER)), len(lines))
        lines[at:at] = [text.rstrip() + "\n\n"]
    results_file.write_text("".join(lines), encoding="utf-8")


def log(message: str) -> None:
    """Progress, on stderr."""
    print(message, file=sys.stderr, flush=True)


def standalone(argv, description: str, quick_help: str, run, markdown, heading: str, prefix: str) -> int:
    """A benchmark run alone: ``run(workdir, quick=, log=)`` in a temporary folder, its ``markdown`` printed and,
    with ``--write``, put into RESULTS.md under ``heading``."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--write", action="store_true", help="put the section into bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        text = markdown(run(workdir, quick=args.quick, log=log))
    print(text)
    if args.write:
        write_section(text, heading)
        log(f"wrote {RESULTS}")
    return 0


def script_entry(main, workers: dict) -> int:
    """A benchmark file run as a script: ``script WORKER ARGS...`` runs one worker and prints its JSON answer (the
    measurements of a fresh interpreter, see ``bench_tfidf.run_script_worker``); anything else is ``main()``."""
    import json

    if len(sys.argv) > 1 and sys.argv[1] in workers:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        print(json.dumps(workers[sys.argv[1]](*sys.argv[2:])))
        return 0
    return main()


def run_line(results: dict) -> str:
    """When and where a benchmark ran, and the machine's load before and after (``results``: ``started``,
    ``machine`` and ``load``, a pair of ``uptime`` lines)."""
    return (f"Run {results['started']} on {results['machine']}. `uptime` at start: `{results['load'][0]}`; at end: "
            f"`{results['load'][1]}` (the machine is shared: wall times move with the load).")


def uptime() -> str:
    """The machine's ``uptime`` line (its load), or the load averages where ``uptime`` cannot run."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    """The CPU model, the cores this process may use, the memory, Python and the platform, in one line."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo") as f:
            memory = next((f", {int(line.split()[1]) / 2**20:.1f} GiB" for line in f if line.startswith("MemTotal")),
                          "")
    except OSError:
        pass
    return (f"{model}, nproc = {len(os.sched_getaffinity(0))}{memory}, Python {platform.python_version()}, "
            f"{platform.platform()}")


def percent(value) -> str:
    """A share as a percent with one decimal; empty for ``None``."""
    return "" if value is None else f"{100 * value:.1f} %"


def size(value) -> str:
    """A set size as short as it reads (``4.5``, ``100``); empty for ``None``."""
    return "" if value is None else f"{value:g}"
