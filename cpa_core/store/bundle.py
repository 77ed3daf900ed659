"""The declared configuration as a file and a command that run the same audit again.

:func:`declared_toml` writes an :class:`~cpa_core.audit.configuration.AuditConfig` as the configuration file that
declares it: parsed with :func:`~cpa_core.audit.project.parse_config` and declared with
:func:`~cpa_core.audit.project.declare_audit` on the same files, it gives the same configuration id (a test
holds it to that). Its ``[inputs]`` tables pin the files' SHA-256, so the command refuses other files.
:func:`reproduce_command` is the ``cpa audit`` command that reads it, and :func:`audit_bundle` the
files a curator archives with a report: the configuration, the command, the checksums and the figures the
run must reproduce.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import tomllib
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING

import tomli_w

from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS
from cpa_core.report.verdict import summary_document

if TYPE_CHECKING:
    import pandas as pd

    from cpa_core.audit.configuration import AuditConfig
    from cpa_core.audit.results import AuditResult

INPUT_OPTIONS = {"documents": "--documents", "registry": "--registry", "scores": "--scores"}
CONFIG_FILE = "audit.toml"


def _present(table: Mapping) -> dict:
    """A TOML table: ``None`` has no TOML spelling, and an absent key declares the default."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in table.items() if value is not None}


def declared_toml(config: AuditConfig) -> str:
    """The configuration file declaring ``config`` (knowledge level, attacker tables, ``[audit]``, how the
    inputs are read, their checksums, the LLM endpoint without key, and ``[evidence]`` placeholders when they
    are not the default list)."""
    level = config.knowledge
    audit = {"knowledge": level.name, "attacker": config.attacker.name, "score": config.score,
             "confidence": [float(c) for c in config.confidences], "protocol": config.protocol,
             "n_cal": config.n_cal, "n_test": config.n_test, "seed": config.seed,
             "group_column": config.group_column, "certainty_bins": config.certainty_bins, "top_k": config.top_k,
             "miss_policy": config.miss_policy, "flag_below": config.flag_below,
             "leakage_threshold": config.leakage_threshold, "acceptable_linkage": config.acceptable_linkage,
             "flag_confidence": None if config.flag_confidence is None else float(config.flag_confidence)}
    document = {
        "knowledge": {level.name: _present({"fields": list(level.fields), "query_mode": level.query_mode,
                                            "description": level.description})},
        "attacker": {name: _present(table) for name, table in config.attacker.tables.items()},
        "audit": _present(audit),
    }
    columns = {role: dict(info["columns"]) for role, info in config.data.items() if info.get("columns")}
    if columns:
        document["columns"] = columns
    inputs = {role: _present({"sha256": info.get("sha256"), "encoding": info.get("encoding")})
              for role, info in config.data.items()}
    if inputs:
        document["inputs"] = inputs
    if config.attacker.llm:
        document["llm"] = _present(config.attacker.llm)
    if tuple(config.placeholders) != DEFAULT_PLACEHOLDERS:  # absent: the default list
        document["evidence"] = {"placeholders": list(config.placeholders)}
    header = (f"# Configuration {config.config_id}: the declared threat model, protocol and release policy of one\n"
              "# audit, and the files it certifies (their SHA-256). `cpa audit --config audit.toml` on the same files\n"
              "# declares the same configuration; other files are refused.\n\n")
    return header + tomli_w.dumps(document)


def declared_panel_toml(configs: Sequence[AuditConfig], held_out: str | None = None) -> str:
    """The configuration file declaring an attacker panel whose members are declared by ``configs`` (one per
    attacker, alike but for it): :func:`declared_toml` of the first, with every member's attacker table and
    ``[audit] attackers`` in the members' order (``held_out``: the member a redaction search never consulted)."""
    if len(configs) == 1 and held_out is None:
        return declared_toml(configs[0])
    document = tomllib.loads(declared_toml(configs[0]))
    for config in configs[1:]:
        document["attacker"].update({name: _present(table) for name, table in config.attacker.tables.items()})
    document["audit"].pop("attacker", None)
    document["audit"]["attackers"] = [config.attacker.name for config in configs]
    if held_out is not None:
        document["audit"]["held_out"] = held_out
    names = ", ".join(document["audit"]["attackers"])
    header = (f"# An attacker panel ({names}): the declared threat model, protocol and release policy, each member\n"
              "# run and calibrated on its own, and the files it certifies (their SHA-256). `cpa audit --config\n"
              "# audit.toml` on the same files declares the same panel; other files are refused.\n\n")
    return header + tomli_w.dumps(document)


def reproduce_command(config: AuditConfig, files: Mapping[str, str], out: str = "out/reproduced",
                      config_file: str = CONFIG_FILE) -> str:
    """The ``cpa audit`` command that runs ``config`` again (``files``: the input files by role)."""
    args = ["cpa", "audit"]
    for role, option in INPUT_OPTIONS.items():
        if role in files:
            args += [option, files[role]]
    args += ["--config", config_file]
    if any(info.get("dropped_rows") for info in config.data.values()):
        args.append("--drop-invalid")
    args += ["--out", out]
    return shlex.join(args)


def input_files(result: AuditResult) -> dict[str, str]:
    """The input files of an audit by role, as its inputs name them."""
    return {role: str(info["file"]) for role, info in result.inputs.items()
            if role in INPUT_OPTIONS and info.get("file")}


def audit_bundle(result: AuditResult, redacted_from: AuditResult | None = None,
                 decisions: pd.DataFrame | None = None) -> bytes:
    """A zip archive that re-runs the audit: ``audit.toml``, ``reproduce.sh`` (the command, after checking
    the files' SHA-256), ``SHA256SUMS`` and ``expected-summary.json`` (the figures the run must give).

    The input files are named as the audit read them, without folders: the command runs in a folder that
    holds them next to ``audit.toml``.

    An audit of a redacted release (``redacted_from``: the audit it was redacted from, ``decisions``: the table
    that made it) reproduces the whole chain: ``original/audit.toml`` audits the original files, ``cpa redact
    --decisions decisions.csv`` makes the redacted release from them, and ``audit.toml`` audits it; SHA256SUMS pins
    the original files and the decisions, and the redacted release is checked against the SHA-256 its audit
    certified. ``decisions.csv`` holds the redacted words: handle the archive like the release.
    """
    config = result.config
    buffer = io.BytesIO()
    if redacted_from is None:
        files = {role: PurePath(name).name for role, name in input_files(result).items()}
        sums = "".join(f"{config.data[role]['sha256']}  {name}\n" for role, name in files.items()
                       if config.data.get(role, {}).get("sha256"))
        script = ("#!/bin/sh\n"
                  f"# Re-runs audit {config.config_id}. Run it in a folder holding the input files and audit.toml.\n"
                  "set -e\n"
                  "sha256sum -c SHA256SUMS\n"
                  f"{reproduce_command(config, files)}\n")
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(CONFIG_FILE, declared_toml(config))
            archive.writestr("reproduce.sh", script)
            archive.writestr("SHA256SUMS", sums)
            archive.writestr("expected-summary.json", json.dumps(summary_document(result), indent=2))
        return buffer.getvalue()
    if decisions is None:
        raise ValueError("an audit of a redacted release is reproduced from its decisions table")
    from cpa_core.redaction.decisions import decisions_csv

    before = redacted_from.config
    originals = {role: PurePath(name).name for role, name in input_files(redacted_from).items()}
    files = {role: PurePath(name).name for role, name in input_files(result).items()}
    table = decisions_csv(decisions, before.config_id)
    sums = "".join(f"{before.data[role]['sha256']}  {name}\n" for role, name in originals.items()
                   if before.data.get(role, {}).get("sha256"))
    sums += f"{hashlib.sha256(table.encode('utf-8')).hexdigest()}  decisions.csv\n"
    redacted = files.get("documents", "documents-redacted.csv")
    after_sum = config.data.get("documents", {}).get("sha256")
    script = ("#!/bin/sh\n"
              f"# Re-runs audit {config.config_id} of a redacted release: the original audit ({before.config_id}),\n"
              "# the redaction its decisions table makes, and the audit of the redacted release. Run it in a folder\n"
              "# holding the original input files, audit.toml, original/ and decisions.csv.\n"
              "set -e\n"
              "sha256sum -c SHA256SUMS\n"
              f"{reproduce_command(before, originals, out='out/original', config_file='original/' + CONFIG_FILE)}\n"
              f"{shlex.join(['cpa', 'redact', '--audit', 'out/original', '--decisions', 'decisions.csv', '--out', 'out/redacted'])}\n"
              + (f"echo '{after_sum}  out/redacted/{redacted}' | sha256sum -c -\n" if after_sum else "")
              + f"{reproduce_command(config, {**files, 'documents': 'out/redacted/' + redacted})}\n")
    expected = summary_document(result)
    expected.pop("redaction", None)  # what it was redacted from is the chain itself, not a figure of the run
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(CONFIG_FILE, declared_toml(config))
        archive.writestr(f"original/{CONFIG_FILE}", declared_toml(before))
        archive.writestr("decisions.csv", table)
        archive.writestr("reproduce.sh", script)
        archive.writestr("SHA256SUMS", sums)
        archive.writestr("expected-summary.json", json.dumps(expected, indent=2))
    return buffer.getvalue()
