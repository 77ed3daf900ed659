"""A benchmark's section of RESULTS.md, put in place of its previous version, else just before the standalone
benchmarks' marker (the end of what ``run.py`` writes)."""

from __future__ import annotations

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
