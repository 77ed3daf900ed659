"""The ``cpa`` command line: batch audits, stress tests and the demo data.

Bad input ends the run with a one-line message naming the file, row or column, and exit status 2.
Nothing the command prints contains document text.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

from cpa_core.attack.base import close_clients
from cpa_core.attack.registry import attacker_specs
from cpa_core.audit.configuration import AUDIT_PARAMS
from cpa_core.audit.pipeline import estimate_llm_calls, run_audit
from cpa_core.audit.project import ProjectConfig, declare_audit, load_config, make_llm_client
from cpa_core.cli.history_command import (
    add_audit_history_options,
    add_history_command,
    check_audit_history,
    cmd_history,
    history_paths,
    record_cli_audit,
)
from cpa_core.common.cache_dirs import cache_root
from cpa_core.common.errors import ConfigError, CPAError
from cpa_core.common.params import Param
from cpa_core.common.progress import ProgressBar
from cpa_core.conformal.calibration import confidence_label
from cpa_core.io.candidate_scores import read_candidate_scores
from cpa_core.io.columns import ROW_NUMBERS, redacted_columns
from cpa_core.io.reading import EncodingError, encoding_name
from cpa_core.io.tables import check_release
from cpa_core.llm.client import LLM_PARAMS
from cpa_core.redaction.suggestions import REPLACEMENTS
from cpa_core.report.evidence import audit_explainer, panel_explainers
from cpa_core.report.formatting import counted
from cpa_core.report.metrics import LevelSummary, summarize, threshold_text
from cpa_core.report.verdict import attack_sentence, release_verdict
from cpa_core.store.output_folder import OutputFolder
from cpa_core.store.records import jsonl_lines, write_audit, write_private

EPILOG = """examples:
  cpa audit --documents sample_data/documents.csv --registry sample_data/registry.csv \\
            --config sample_data/audit.toml --knowledge K2 --out out/k2
  cpa stress topk --documents ... --registry ... --config ... --ks 5,10,50 --out topk.csv
  cpa sample-data --out sample_data
"""
SPECIAL_AUDIT_OPTIONS = ("knowledge", "attacker")  # passed to declare_audit by name


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other error of the tool."""

    def error(self, message: str):
        self.exit(2, f"cpa: error: {message} (see '{self.prog} --help')\n")


def _ints(text: str) -> list[int]:
    """Comma-separated integers of at least 0 (seeds, K, n_cal and m values), at least one."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, found '{text}'") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers of at least 0, found '{text}'")
    return values


def _encoding(text: str) -> str:
    try:
        return encoding_name(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _dest(param: Param) -> str:
    return "opt_" + param.option.lstrip("-").replace("-", "_")


def _add_option(group, param: Param, help_text: str | None = None) -> None:
    """An option for a declared parameter (its type from the declaration; its bounds checked later)."""
    text = help_text or param.help
    if param.flag is not None:
        group.add_argument(param.option, dest=_dest(param), action="store_const", const=param.flag, help=text)
        return
    kwargs = {"int": {"type": int}, "float": {"type": float}, "floats": {"type": float, "action": "append"},
              "choice": {"choices": list(param.choices)}, "text": {}, "fields": {}, "bool": {}}[param.kind]
    metavar = None if param.kind == "choice" else param.name.upper()
    group.add_argument(param.option, dest=_dest(param), metavar=metavar, help=text, **kwargs)


def _option_params(params) -> dict[str, list[Param]]:
    """The declared parameters by command-line option (several attackers may share one, e.g. --temperature)."""
    out: dict[str, list[Param]] = {}
    for param in params:
        if param.option:
            out.setdefault(param.option, []).append(param)
    return out


def _attacker_options() -> dict[str, list[tuple[str, Param]]]:
    """``option -> [(attacker name, parameter)]`` over every registered attacker."""
    out: dict[str, list[tuple[str, Param]]] = {}
    for spec in attacker_specs():
        for param in spec.params:
            if param.option:
                out.setdefault(param.option, []).append((spec.name, param))
    return out


def _add_audit_options(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data")
    data.add_argument("--documents", required=True, metavar="FILE",
                      help="released documents (CSV, JSONL or Parquet) with doc_id, text, identity_id [, group]")
    data.add_argument("--registry", required=True, metavar="FILE",
                      help="profile registry (CSV, JSONL or Parquet) with identity_id and profile fields")
    data.add_argument("--documents-encoding", metavar="ENC", type=_encoding,
                      help="text encoding of a CSV or JSONL documents file (also --test-documents): utf-8 (default, "
                           "with or without a byte-order mark; or [inputs.documents] encoding), latin-1, cp1252 or "
                           "another Python codec; Parquet is always UTF-8")
    data.add_argument("--registry-encoding", metavar="ENC", type=_encoding,
                      help="text encoding of a CSV or JSONL registry file (as --documents-encoding)")
    data.add_argument("--number-rows", action="store_true",
                      help="a documents file without a document-id column: its rows numbered 1, 2, … are the "
                           "doc_ids (1 = the first data row, the header excluded), as [columns.documents] doc_id = "
                           "\"<row number>\" declares; the manifest and audit.toml record it")
    data.add_argument("--config", metavar="FILE", help="audit configuration (TOML): knowledge levels, defaults")
    data.add_argument("--drop-invalid", action="store_true",
                      help="drop invalid rows (reported on stderr) instead of stopping at the first one")
    data.add_argument("--scores", metavar="FILE",
                      help="bring your own attacker: long table doc_id, candidate_id, score (attacker 'imported')")
    audit = parser.add_argument_group("audit configuration (overrides [audit] of the configuration file)")
    for param in AUDIT_PARAMS:
        if param.name == "attacker":
            audit.add_argument("--attacker", choices=[spec.name for spec in attacker_specs()], action="append",
                               help="; ".join(f"{spec.name}: {spec.label}" for spec in attacker_specs())
                               + ". Repeat it for an attacker panel (cpa audit): each attacker run and calibrated "
                                 "on its own, the release judged against every one ([audit] attackers = [...]). "
                                 "Default: imported with --scores; else cpa audit runs the default panel (tfidf, "
                                 "lexical_fusion, dense where its model is installed, learned; tfidf and "
                                 "lexical_fusion above 10,000 documents or profiles), other commands tfidf")
        elif param.option is None:  # declared in the file only ([audit] attackers: the CLI repeats --attacker)
            continue
        else:
            _add_option(audit, param)
    audit.add_argument("--fields", metavar="A,B,...", help="custom knowledge level: registry fields the attacker sees")
    attack = parser.add_argument_group("attacker parameters (override [attacker.<name>] of the configuration file)")
    for option, owners in _attacker_options().items():
        names = ", ".join(name for name, _ in owners)
        _add_option(attack, owners[0][1], f"{owners[0][1].help} ({names})")
    attack.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="any parameter of the chosen attacker, VALUE written as in TOML (repeatable)")
    llm = parser.add_argument_group("LLM endpoint (overrides [llm]; LLM attackers and direct_plus_clues levels)")
    for param in LLM_PARAMS:
        if param.option:
            _add_option(llm, param)
    llm.add_argument("--dry-run", action="store_true",
                     help="print the number of LLM calls the run would make (cached answers are free) and stop")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cpa", description="Conformal Privacy Auditing: certified re-identification ambiguity sets for released text.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    audit = commands.add_parser("audit", help="calibrate and certify a release", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Attack, calibrate and certify; writes summary.json, documents.jsonl "
                                            "(calibration.jsonl and test.jsonl with --protocol split), "
                                            "worklist.csv, worklist.json, manifest.json, report.html (the "
                                            "certificate report to sign, static figures) and contents.json (every "
                                            "file's size and SHA-256, written last) to --out. The folder is written "
                                            "aside and put in place whole: --out holds the previous audit or this "
                                            "one, never a mix; a second run on the same --out is refused.")
    _add_audit_options(audit)
    audit.add_argument("--out", required=True, metavar="DIR", help="output folder")
    audit.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the attack on a Dask cluster: a scheduler address (tcp://host:8786), or 'local' "
                            "for two worker processes on this machine; the results are the same")
    add_audit_history_options(audit)
    stress = commands.add_parser("stress", help="stress tests of a configuration (tables as CSV)")
    tests = stress.add_subparsers(dest="test", required=True, metavar="TEST")
    specs = {
        "drift": "calibrate under one configuration, certify under another (--test-knowledge and/or --test-documents)",
        "topk": "miss rate, coverage and set size per top-K truncation (--ks)",
        "scores": "APS vs rank vs probability score at matched splits",
        "ncal": "calibration-size ablation on fixed test documents, averaged over seeds (--n-cals, --seeds)",
        "seeds": "split stability: mean and standard deviation over seeds (--seeds)",
        "budget": "sampling-budget ablation of an LLM attacker: m samples per document (--ms)",
    }
    for name, text in specs.items():
        sub = tests.add_parser(name, help=text, description=text)
        _add_audit_options(sub)
        sub.add_argument("--out", metavar="FILE", help="write the table as CSV (default: print it)")
        if name == "drift":
            sub.add_argument("--test-knowledge", metavar="LEVEL", help="knowledge level of configuration B")
            sub.add_argument("--test-documents", metavar="FILE", help="documents of configuration B (other release mechanism)")
        if name == "topk":
            sub.add_argument("--ks", type=_ints, default=[1, 5, 10, 20, 50, 100], help="comma-separated K values")
        if name == "ncal":
            sub.add_argument("--n-cals", type=_ints, default=[50, 100, 150], help="comma-separated n_cal values")
        if name in ("seeds", "ncal"):
            sub.add_argument("--seeds", type=_ints, default=[0, 1, 2, 3, 4], help="comma-separated seeds")
        if name == "budget":
            sub.add_argument("--ms", type=_ints, default=[1, 3, 5, 10], help="comma-separated sampling budgets m")
    add_history_command(commands)
    redact = commands.add_parser("redact", help="suggest redactions that never raise risk for an audit's flagged "
                                                "documents, or apply a reviewed decisions table, and write the "
                                                "redacted release",
                                 description="Runs the audit of --audit again (its audit.toml and input files). "
                                             "Without --decisions: searches, for each flagged document, the fewest "
                                             "driving terms whose removal makes it acceptable to the release policy "
                                             "under the stored calibration (each step lowers its risk; a document "
                                             "no safe redaction fixes is to be withheld), and writes the decisions "
                                             "table (decisions.csv: every edit and document to withhold, with its "
                                             "effect, accepted), redactions.json, the worklist with each document's "
                                             "suggested edits (worklist.csv, worklist.json). With --decisions: "
                                             "applies that reviewed table (its accepted rows only). Either way it "
                                             "writes the redacted release, <input>-redacted.<ext>, and the "
                                             "audit.toml to audit it again, to --out. An attacker panel's audit is "
                                             "redacted against every attacker (no step raises any one's risk). The "
                                             "redacted release is then audited again, into --out/audit/, with the "
                                             "audit's attackers and one the search never consulted (--held-out), "
                                             "each attacker's first-guess rate before and after said; its verdict "
                                             "is the worst over all of them.")
    redact.add_argument("--audit", required=True, metavar="DIR", help="the output folder of a cpa audit run")
    redact.add_argument("--out", required=True, metavar="DIR", help="output folder")
    redact.add_argument("--decisions", metavar="FILE",
                        help="a decisions table (CSV, JSONL or Parquet, as decisions.csv) of this audit to apply: its "
                             "accepted edits are made and its accepted 'withhold' documents left out; nothing is "
                             "searched. An edit must redact: a no-op (replacement = original) is not applied, and an "
                             "edit that writes words its original does not have is refused unless it is a placeholder "
                             "or a generalisation the registry or --generalization FILE gives")
    redact.add_argument("--encoding", metavar="ENC", type=_encoding,
                        help="text encoding of a CSV or JSONL --decisions file: utf-8 (default, with or without a "
                             "byte-order mark; a file that starts with UTF-16's byte-order mark is read as UTF-16), "
                             "cp1252 or latin-1 (a spreadsheet on Windows), utf-16, or another Python codec")
    redact.add_argument("--deny", action="append", default=[], metavar="WORDS",
                        help="comma-separated words never to redact (e.g. a link token or the release's stop words); "
                             "repeatable")
    redact.add_argument("--common", type=float, default=0.1, metavar="SHARE",
                        help="never redact a word found in more than this share of the released documents, or of "
                             "the documents of its language where they number at least 50 (each document's language "
                             "is detected): it identifies no one (default 0.1; 0 proposes every word of the evidence; "
                             "the rule and what it found are in redactions.json, function_words)")
    redact.add_argument("--allow", action="append", default=[], metavar="WORDS",
                        help="comma-separated words or phrases always to redact, in every document (unless that "
                             "raises the document's risk); repeatable")
    redact.add_argument("--strategy", choices=list(REPLACEMENTS), default="placeholder",
                        help="what each redacted word becomes: nothing (delete); its category from the registry, "
                             "[CITY], [OCCUPATION], [YEAR], [NUMBER], [DATE], [AGE], else [REDACTED] (placeholder, "
                             "the default); or a coarser value where the data allows, a city's region when the "
                             "registry has one, an age's band, a year's decade, else the placeholder (generalize)")
    redact.add_argument("--held-out", metavar="ATTACKER", choices=[spec.name for spec in attacker_specs()],
                        help="the attacker that verifies the redacted release, which the search never consults "
                             "(default: the first of learned, lexical_fusion, bm25, tfidf, dense that is no member "
                             "of the audit's panel)")
    redact.add_argument("--rewrite", action="store_true",
                        help="offer every document the search would withhold to an LLM rewrite through the [llm] "
                             "endpoint of the audit's configuration (or the options below): the rewrite is kept only "
                             "when every attacker of the audit finds it within the policy and none finds it riskier "
                             "than the released text; otherwise the document stays withheld. Sends those documents' "
                             "text to the endpoint")
    redact.add_argument("--rewrite-max", type=int, metavar="N",
                        help="with --rewrite: offer at most the N riskiest documents to withhold (default: every one)")
    rewrite = redact.add_argument_group("LLM endpoint of --rewrite (overrides [llm] of the audit's configuration)")
    for param in LLM_PARAMS:
        if param.option:
            _add_option(rewrite, param)
    add_audit_history_options(redact)
    redact.add_argument("--generalization", metavar="FILE",
                        help="with --strategy generalize: a table (CSV, JSONL or Parquet) of your own "
                             "generalisations, columns value,general and optionally field (a registry field); "
                             "its entries come first. With --decisions: the table the decisions' generalisations "
                             "come from")
    sample = commands.add_parser("sample-data", help="regenerate the synthetic demo data")
    sample.add_argument("--out", default="sample_data", metavar="DIR", help="output folder (default sample_data)")
    sample.add_argument("--seed", type=int, default=20261122, help="generator seed")
    return parser


def _say(text: str) -> None:
    print(f"cpa: {text}", file=sys.stderr)


def _checked_options(args, params) -> dict:
    """The values of the options declared by ``params`` that were given, each within its bounds."""
    out = {}
    for param in params:
        if param.option is None or param.name in SPECIAL_AUDIT_OPTIONS:
            continue
        value = getattr(args, _dest(param))
        if value is None:
            continue
        if not param.accepts(value):
            raise ConfigError(f"{param.option}: expected {param.expected}, found {value!r}")
        out[param.name] = param.check(value, param.option)
    return out


def _toml_value(text: str):
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def _attacker_params(args, attacker: str, panel: tuple[str, ...] = ()) -> dict:
    """The chosen attacker's parameters set on the command line (its options, then --param NAME=VALUE). In a panel
    (``panel``: every member), an option belongs to the members that have it."""
    out = {}
    for option, owners in _attacker_options().items():
        value = getattr(args, _dest(owners[0][1]))
        if value is None:
            continue
        mine = [param for name, param in owners if name == attacker]
        if not mine and any(name in panel for name, _ in owners):
            continue  # another member's option
        if not mine:
            raise ConfigError(f"{option} applies to the {', '.join(name for name, _ in owners)} attacker(s), "
                              f"not to '{attacker}'; add --attacker")
        if not mine[0].accepts(value):
            raise ConfigError(f"{option}: expected {mine[0].expected}, found {value!r}")
        out[mine[0].name] = value
    for item in args.param:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--param: expected NAME=VALUE, found '{item}'")
        out[name.strip()] = _toml_value(text.strip())
    return out


def _decoded(option: str, load, source, **kwargs):
    """``load(source, **kwargs)``; a file that does not decode is said with the option that declares its encoding."""
    try:
        return load(source, **kwargs)
    except EncodingError as error:
        raise error.with_hint(f"declare the file's encoding with {option}, e.g. latin-1 or cp1252") from None


def _load(args, documents_file: str | None = None):
    """The declared inputs and the one attacker of a run (an attacker panel: see :func:`_attackers`)."""
    project, documents, registry, scores = _load_data(args, documents_file)
    names = _attackers(args, project, scores)
    if len(names) > 1:
        raise ConfigError(f"this command runs one attacker; found a panel of {len(names)} ({', '.join(names)}): "
                          "give one --attacker (cpa audit runs a panel)")
    config, chosen = _declare(args, project, documents, registry, scores, names[0])
    return project, documents, registry, config, chosen


def _attackers(args, project: ProjectConfig, scores, release: tuple[int, int] | None = None) -> list[str]:
    """The attackers declared: --attacker (repeatable), else [audit] attackers, else [audit] attacker, else the
    imported attacker with --scores; each once, in declared order. Nothing declared: the default panel for a
    release of ``release`` = (documents, profiles) (:func:`~cpa_core.audit.panel.default_panel`), or TF-IDF for a
    command that runs one attacker (``release`` not given)."""
    from cpa_core.audit.panel import default_panel

    names = args.attacker or project.audit.get("attackers")
    if not names:
        if scores is not None:
            names = ["imported"]
        elif "attacker" in project.audit:
            names = [project.audit["attacker"]]
        else:
            names = ["tfidf"] if release is None else list(default_panel(*release))
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"an attacker panel names each attacker once; found {', '.join(repeated)} more than once")
    if len(names) > 1 and ("imported" in names or scores is not None):
        raise ConfigError("the imported attacker certifies a table of scores on its own; it is no member of a panel")
    return list(names)


def _load_data(args, documents_file: str | None = None):
    """The project file, the documents, the registry and the imported scores of a run."""
    project = load_config(args.config) if args.config else ProjectConfig()
    if args.number_rows:
        numbered = {**project.columns.get("documents", {}), "doc_id": ROW_NUMBERS}
        project = replace(project, columns={**project.columns, "documents": numbered})
    on_invalid = "drop" if args.drop_invalid else "error"
    documents = _decoded("--documents-encoding", project.load_documents, documents_file or args.documents,
                         group_column=args.opt_group_column, on_invalid=on_invalid, encoding=args.documents_encoding)
    registry = _decoded("--registry-encoding", project.load_registry, args.registry, on_invalid=on_invalid,
                        encoding=args.registry_encoding)
    check_release(documents, registry)
    for report in (documents.report, registry.report):
        if report.rejected:
            _say(f"{report.file}: dropped {len(report.rejected)} of {report.n_read} rows "
                 f"(first: row {report.rejected[0].row}, {report.rejected[0].column}: {report.rejected[0].reason})")
        for note in report.notes:
            _say(f"{report.file}: {note}")
    scores = read_candidate_scores(args.scores, columns=project.columns.get("scores")) if args.scores else None
    project = replace(project, llm={**project.llm, **_checked_options(args, LLM_PARAMS)})
    return project, documents, registry, scores


def _declare(args, project, documents, registry, scores, attacker: str, panel: tuple[str, ...] = ()):
    """The configuration and the built attacker ``attacker`` (a member of ``panel``, if any)."""
    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    return declare_audit(project, registry, knowledge=args.opt_knowledge, fields=fields, attacker=attacker,
                         scores=scores, overrides=_checked_options(args, AUDIT_PARAMS),
                         attacker_params=_attacker_params(args, attacker, panel), documents=documents)


def _threshold(entry: LevelSummary) -> str:
    """q_hat as said on stderr: the number, 'infinite', or each stratum's or group's."""
    if entry.strata_thresholds is not None and entry.q_hat is None:
        return "per stratum (" + ", ".join(f"{label} {threshold_text(q)}"
                                           for label, q in entry.strata_thresholds.items()) + ")"
    if entry.groups is not None and entry.q_hat is None:
        return "per group (" + ", ".join(f"{g} {m.threshold}" for g, m in entry.groups.items()) + ")"
    return entry.threshold


def _llm_report(result, attacker):
    """The attacker's LLM counters (counts only) into the result's inputs, hence its manifest; one line said."""
    counters = attacker.counters()
    for where, values in counters.items():
        shown = ", ".join(f"{k} {v}" for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
        _say(f"LLM ({where}): {shown}")
    return result.with_inputs(llm_counters=counters) if counters else result


def _write_attribute_sets(result, attacker, out: Path) -> None:
    """Profile-CPA: the certified attribute value sets of every test document, per confidence level."""
    from cpa_core.attack.attackers.profile import ProfileAttacker, certified_attribute_sets
    if not isinstance(attacker, ProfileAttacker):
        return
    levels = list(result.config.confidences)
    per_level = {confidence_label(c): certified_attribute_sets(result.certificate(c), attacker) for c in levels}
    rows = ({"doc_id": doc_id, "config_id": result.config.config_id,
             "sets": {label: {name: {"values": list(s.values), "any_value": s.any_value}
                              for name, s in level_sets[row].items()}
                      for label, level_sets in per_level.items()}}
            for row, doc_id in enumerate(result.test_split.table.doc_ids.tolist()))
    write_private(out / "attribute_sets.jsonl", jsonl_lines(rows))


def cmd_audit(args) -> int:
    if args.dry_run:
        return _dry_run(args)
    inputs = (args.documents, args.registry, args.config, args.scores)
    writes = {**history_paths(args), "the cache folder": cache_root()}
    with OutputFolder(args.out, "audit", inputs=inputs, writes=writes) as folder:  # before any work: an unusable
        check_audit_history(args)  # folder is said, and so is an unusable audit history
        project, documents, registry, scores = _load_data(args)
        names = _attackers(args, project, scores, (len(documents), len(registry)))
        if len(names) > 1:
            panel, summary = _audit_panel(args, folder, project, documents, registry, names)
        else:
            result = _audit_one(args, folder, project, documents, registry, scores, names[0])
    _say_claimed(folder)
    if len(names) > 1:
        _say_panel(args, panel, summary)
    else:
        _say_audit(args, result)
        record_cli_audit(args, result)
    return 0


def _audit_one(args, folder: OutputFolder, project, documents, registry, scores, name: str):
    """``cpa audit`` with one attacker: attack (on a cluster with --scheduler), certify, write the folder whole."""
    config, attacker = _declare(args, project, documents, registry, scores, name)
    engine = None
    try:
        if args.scheduler:
            from cpa_core.attack.engine import DaskEngine, shipped_attacker
            shipped_attacker(attacker, {})  # an attacker that cannot run on a cluster is said before it starts
            engine = DaskEngine(args.scheduler)
        result = run_audit(documents, registry, attacker, config, ProgressBar(), engine=engine)
        result = _llm_report(result, attacker)
        write_audit(result, folder.staging, audit_explainer(attacker, registry, config), report=True,
                    texts=documents.texts())
        _write_attribute_sets(result, attacker, folder.staging)
    finally:
        close_clients(attacker)
        if engine is not None:
            engine.close()
    folder.complete(config.config_id)
    return result


def _audit_panel(args, folder: OutputFolder, project, documents, registry, names: list[str]):
    """``cpa audit`` with several attackers: each declared, run and calibrated on its own (one progress line per
    member), written to members/<attacker>/, and the panel's summary, worklist and verdict at the top. Returns the
    panel and its summary."""
    from cpa_core.audit.panel import audit_panel
    from cpa_core.store.records import write_panel

    # every member declared before any attack: a bad declaration is said before the work
    members = [_declare(args, project, documents, registry, None, name, tuple(names)) for name in names]

    engine = None
    try:
        if args.scheduler:
            from cpa_core.attack.engine import DaskEngine
            engine = DaskEngine(args.scheduler)
        panel = audit_panel(documents, registry, members, _member_progress(names, engine), finish=_llm_report,
                            held_out=project.audit.get("held_out"), engine=engine)
        explainers = dict(zip(names, panel_explainers(members, registry)))
    finally:
        for _, attacker in members:
            close_clients(attacker)
        if engine is not None:
            engine.close()
    summary = write_panel(panel, folder.staging, explainers, texts=documents.texts())
    folder.complete(panel.config_id)
    return panel, summary


def _say_panel(args, panel, summary: dict) -> None:
    """What a panel's audit computed, each member side by side; each member recorded in the history."""
    from cpa_core.store.records import PANEL_FOLDER

    verdict = summary["verdict"]
    for member in verdict["members"]:
        own = member["verdict"]
        bound = member["remainder_bound"]
        _say(f"{member['attacker']}: first guess right for "
             + ("an unknown share" if own["first_guess_rate"] is None else f"{100 * own['first_guess_rate']:.1f} %")
             + f" of the documents; flags {member['n_flagged']:,}; the panel's remainder linked at most "
             + ("(nothing left)" if bound is None else f"{100 * bound:.1f} %")
             + f" ({100 * verdict['bound_level']:.4g} % upper bound)")
    _say(f"{verdict['n_flagged']} documents flagged by at least one of {len(panel.names)} attackers; results in "
         f"{args.out}")
    _say(f"verdict ({verdict['status']}, decided by {verdict['decided_by']}): {verdict['headline']}")
    for name, member in zip(panel.names, panel.members):  # each member's audit, which the History reopens, marked
        record_cli_audit(args, member, Path(args.out) / PANEL_FOLDER / name)  # as of its panel


def _say_claimed(folder: OutputFolder) -> None:
    """Once the folder is in place, what else was done: leftovers of killed runs removed, a curator's files kept."""
    if folder.recovered:
        _say(f"removed {counted(len(folder.recovered), 'folder')} left beside {folder.out.parent} by interrupted "
             f"runs (they held their documents): {', '.join(p.name for p in folder.recovered[:3])}"
             + (" ..." if len(folder.recovered) > 3 else ""))
    if folder.kept:
        _say(f"keeping in {folder.out} what no cpa run wrote: {', '.join(folder.kept[:3])}"
             + (f" and {len(folder.kept) - 3} more" if len(folder.kept) > 3 else ""))


def _dry_run(args) -> int:
    _, documents, registry, config, attacker = _load(args)
    try:
        calls = estimate_llm_calls(documents, registry, attacker, config)
    finally:
        close_clients(attacker)
    print(f"{calls} LLM calls needed (answers already cached are not counted)")
    return 0


def _say_audit(args, result) -> None:
    """What the run computed (never a file read back: another run may write the folder later)."""
    config = result.config
    summary = summarize(result)
    for warning in dict.fromkeys(w for entry in summary.levels.values() for w in entry.warnings):
        _say(f"warning: {warning}")
    for label, entry in summary.levels.items():
        conditional = entry.coverage_conditional
        _say(f"confidence {label}: coverage {entry.coverage:.3f} (conditional "
             f"{conditional if conditional is None else round(conditional, 3)}), "
             f"median set {entry.median_set_size:g}, q_hat {_threshold(entry)}, "
             f"n_cal {entry.n_cal}, n_test {entry.n_test}")
    flagging = summary.level(config.policy_confidence)
    _say(f"attack: {attack_sentence(flagging)}" + ("" if flagging.top_k_rate is None else
                                                   f"; top {flagging.top_k}: {100 * flagging.top_k_rate:.1f} %"))
    _say(f"strata: {summary.stratification}")
    _say(f"{flagging.n_flagged} documents flagged ({config.policy.rule} at confidence "
         f"{confidence_label(config.policy_confidence)}: {flagging.n_flagged_by_set} by set size, "
         f"{flagging.n_flagged_by_linkage} by linkage probability); results in {args.out}")
    verdict = release_verdict(summary, config.policy_confidence)
    _say(f"verdict ({verdict.status}): {verdict.headline}")
    for check in verdict.failed:
        _say(f"failed check, {check.name}: {check.reason}")


def _check_table_path(args) -> None:
    """``cpa stress --out FILE``, before any work: a file to write, not a folder nor one of the run's inputs."""
    if not args.out:
        return
    target = Path(args.out).expanduser().resolve()
    if target.is_dir():
        raise ConfigError(f"--out {args.out}: is a folder; expected the CSV file to write the table to")
    for option in ("documents", "registry", "config", "scores", "test_documents"):
        given = getattr(args, option, None)
        if given and Path(given).expanduser().resolve() == target:
            raise ConfigError(f"--out {args.out}: is the run's --{option.replace('_', '-')} file, which the table "
                              "would replace; expected another file")


def cmd_stress(args) -> int:
    _check_table_path(args)
    project, documents, registry, config, attacker = _load(args)
    try:
        return _stress(args, project, documents, registry, config, attacker)
    finally:
        close_clients(attacker)


def _stress(args, project, documents, registry, config, attacker) -> int:
    from cpa_core.report import stress
    bar = ProgressBar()
    if args.test == "drift":
        if not args.test_knowledge and not args.test_documents:
            _say("error: drift needs --test-knowledge and/or --test-documents (configuration B)")
            return 2
        result_a = run_audit(documents, registry, attacker, config, bar)
        documents_b = _load(args, args.test_documents)[1] if args.test_documents else documents
        config_b = replace(config, data={})  # bound to release B when it runs: another release, another id
        if args.test_knowledge:
            config_b = replace(config_b, knowledge=project.level(args.test_knowledge))
            config_b.knowledge.check_against(registry)
        table = stress.drift(result_a, run_audit(documents_b, registry, attacker, config_b, bar))
    elif args.test == "budget":
        table = stress.sampling_budget_ablation(documents, registry, config, attacker, args.ms, bar)
    else:
        full = stress.full_attack(documents, registry, attacker, config, bar)
        if args.test == "seeds":
            table = stress.split_stability(documents, registry, config, full, args.seeds)
        elif args.test == "ncal":
            table = stress.ncal_ablation(documents, registry, config, full, args.n_cals, args.seeds)
        else:
            if args.test == "topk":
                field, values = "top_k", args.ks
            else:
                field, values = "score", ["aps", "rank", "probability"]
            table = stress.sweep(documents, registry, config, full, field, values)
    if args.out:
        _write_table(table, Path(args.out))
        _say(f"wrote {len(table)} rows to {args.out}")
    else:
        print(table.to_string(index=False))
    return 0


def _write_table(table, path: Path) -> None:
    """A stress table as CSV, in place at once (written beside, then renamed): never a part of one."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            table.to_csv(stream, index=False)
        os.replace(staging, path)
    except OSError as error:
        Path(staging).unlink(missing_ok=True)
        raise OSError(error.errno, error.strerror, str(path)) from None
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def _words(values: list[str]) -> list[str]:
    return [w.strip() for value in values for w in value.split(",") if w.strip()]


def _audit_manifest(audit_dir: Path) -> dict:
    """The manifest of a complete audit folder, checked for what ``cpa redact`` reads from it."""
    from cpa_core.store.bundle import CONFIG_FILE
    from cpa_core.store.output_folder import complete_folder

    complete_folder(audit_dir, "audit", verify=("manifest.json",))
    where = audit_dir / "manifest.json"
    try:
        manifest = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"{where}: not readable JSON ({error})") from None
    if isinstance(manifest, dict) and manifest.get("kind") == "panel":
        members = manifest.get("members")
        if not isinstance(members, dict) or not members or not all(
                isinstance(info, dict) and isinstance(info.get("config_id"), str) and isinstance(info.get("folder"), str)
                for info in members.values()):
            raise ConfigError(f"{where}: expected 'members' naming each attacker's configuration id and folder")
        complete_folder(audit_dir, "audit", verify=tuple(f"{info['folder']}/{CONFIG_FILE}" for info in members.values()))
        if not isinstance(manifest.get("config_id"), str) or not isinstance(manifest.get("inputs"), dict):
            raise ConfigError(f"{where}: expected the panel's 'config_id' and 'inputs'")
        first = audit_dir / next(iter(members.values()))["folder"] / "manifest.json"
        try:
            manifest = {**manifest, "config": json.loads(first.read_text(encoding="utf-8")).get("config", {})}
        except (OSError, ValueError) as error:
            raise ConfigError(f"{first}: not readable JSON ({error})") from None
    else:
        complete_folder(audit_dir, "audit", verify=(CONFIG_FILE,))
    inputs = manifest.get("inputs") if isinstance(manifest, dict) else None
    config = manifest.get("config") if isinstance(manifest, dict) else None
    roles = ("documents", "registry")
    if not isinstance(inputs, dict) or not all(isinstance(inputs.get(r), dict) and isinstance(inputs[r].get("file"), str)
                                               for r in roles):
        raise ConfigError(f"{where}: expected 'inputs' naming the audit's documents and registry files, found "
                          f"{type(inputs).__name__ if not isinstance(inputs, dict) else sorted(map(str, inputs))}")
    if not isinstance(manifest.get("config_id"), str) or not isinstance(config, dict) \
            or not isinstance(config.get("data", {}), dict):
        raise ConfigError(f"{where}: expected the audit's 'config_id' and 'config', found neither in that form")
    return manifest


def _input_file(manifest: dict, role: str, where: Path) -> Path:
    """The audit's input file of ``role`` (``where``: its manifest): the absolute path the manifest records; in an
    older manifest that records only the file as given, that file from the audit's working directory when the
    manifest records it, else from this one. A file that is not there is said with the path tried and why."""
    info = manifest["inputs"][role]
    given, recorded, base = info["file"], info.get("path"), manifest.get("working_directory")
    if isinstance(recorded, str) and recorded:
        path, how = Path(recorded), "the absolute path the manifest records"
    elif Path(given).is_absolute():
        path, how = Path(given), "as the manifest records it"
    elif isinstance(base, str) and base:
        path, how = Path(base) / given, f"from the audit's working directory, {base}"
    else:
        path, how = Path.cwd() / given, (f"from the current directory, {Path.cwd()}: the manifest records neither "
                                         "the file's absolute path nor the audit's working directory")
    try:
        found = path.is_file()
    except (OSError, ValueError):
        found = False
    if not found:
        raise ConfigError(f"{where}: the audit's {role} file {given} is not at {path} ({how}); expected the file "
                          "the audit read")
    return path


def _audit_members(audit_dir: Path, manifest: dict) -> list[tuple[Path, str]]:
    """Each attacker of an audit folder: its configuration file and configuration id (an attacker panel's members in
    the panel's order; one attacker's audit: its own)."""
    from cpa_core.store.bundle import CONFIG_FILE

    if manifest.get("kind") == "panel":
        return [(audit_dir / info["folder"] / CONFIG_FILE, info["config_id"]) for info in manifest["members"].values()]
    return [(audit_dir / CONFIG_FILE, manifest["config_id"])]


def cmd_redact(args) -> int:
    from cpa_core.audit.panel import audit_panel
    from cpa_core.redaction.decisions import (
        KEPT_LIMIT,
        EditCounts,
        accepted,
        allow_list_kept,
        decisions_csv,
        proposed_decisions,
        redacted_config,
        redaction_log,
        review_decisions,
    )
    from cpa_core.redaction.replacements import load_generalization
    from cpa_core.attack.function_words import function_words
    from cpa_core.redaction.rewrite import Rewriter
    from cpa_core.redaction.suggestions import decided_frame, redacted_release, replacement_for, suggested_worklist
    from cpa_core.redaction.utility import packaged_embedder, release_utility
    from cpa_core.redaction.whatif import release_what_if
    from cpa_core.report.worklist import panel_worklist, worklist, worklist_csv, worklist_json
    from cpa_core.store.bundle import CONFIG_FILE, declared_panel_toml
    from cpa_core.store.records import PANEL_FOLDER

    if args.generalization is not None and args.decisions is None and args.strategy != "generalize":
        raise ConfigError(f"--generalization {args.generalization} applies to --strategy generalize only; "
                          f"expected --strategy generalize, found --strategy {args.strategy}")
    if not 0 <= args.common < 1:
        raise ConfigError(f"--common is a share of the documents; expected a number from 0 to below 1, found "
                          f"{args.common:g}")
    if args.decisions is not None and (args.deny or args.allow):
        raise ConfigError("--decisions applies a reviewed table as it is: --deny and --allow shape a new search; "
                          "give one or the other")
    if args.rewrite_max is not None and (not args.rewrite or args.rewrite_max < 1):
        raise ConfigError(f"--rewrite-max bounds the documents --rewrite offers; expected --rewrite with a count of at "
                          f"least 1, found --rewrite-max {args.rewrite_max}" + ("" if args.rewrite else " alone"))
    if args.rewrite and args.decisions is not None:
        raise ConfigError("--rewrite offers the documents a new search would withhold to an LLM; --decisions applies a "
                          "reviewed table as it is: give one or the other")
    if args.encoding is not None and args.decisions is None:
        raise ConfigError(f"--encoding declares the encoding of the --decisions file; expected --decisions FILE "
                          f"with it, found --encoding {args.encoding} alone")
    audit_dir = Path(args.audit)
    manifest = _audit_manifest(audit_dir)
    inputs = manifest["inputs"]
    audit_id = manifest["config_id"]
    documents_file = _input_file(manifest, "documents", audit_dir / "manifest.json")
    registry_file = _input_file(manifest, "registry", audit_dir / "manifest.json")
    claimed = (audit_dir, documents_file, registry_file, args.decisions, args.generalization)
    writes = {**history_paths(args), "the cache folder": cache_root()}
    with OutputFolder(args.out, "redaction", inputs=claimed, writes=writes) as folder:
        check_audit_history(args)  # the audit of the redacted release is recorded there
        out = folder.staging
        sources = _audit_members(audit_dir, manifest)
        projects = [load_config(config_file) for config_file, _ in sources]
        project = projects[0]
        if "scores" in inputs or any(p.audit.get("attacker") == "imported" for p in projects):
            raise ConfigError("an audit of imported scores cannot be redacted here: the scores of an edited text "
                              "come from the pipeline that made them")
        drop = "drop" if any(isinstance(info, dict) and info.get("dropped_rows")
                             for info in manifest["config"].get("data", {}).values()) else "error"
        documents = project.load_documents(documents_file, on_invalid=drop)
        registry = project.load_registry(registry_file, on_invalid=drop)
        texts = documents.texts()
        table = None if args.generalization is None else load_generalization(args.generalization,
                                                                             registry_fields=registry.fields)
        reviewed, notes = None, []
        if args.decisions is not None:
            reviewed, notes = _decoded("--encoding", review_decisions, args.decisions, texts=texts,
                                       config_id=audit_id, encoding=args.encoding or "utf-8",
                                       generalizer=replacement_for("generalize", registry, table))
        replacer = replacement_for(args.strategy, registry, None if reviewed is not None else table)
        declared = [declare_audit(p, registry, documents=documents) for p in projects]
        for (config_file, config_id), (config, _) in zip(sources, declared):
            if config.config_id != config_id:
                raise ConfigError(f"{audit_dir}: its configuration {config_id} is not what {config_file} declares now "
                                  f"({config.config_id})")
        names = [config.attacker.name for config, _ in declared]
        attackers = [attacker for _, attacker in declared]
        config = declared[0][0]
        held_out = _held_out(args, names)
        held = None if held_out is None else declare_audit(project, registry, attacker=held_out, documents=documents)
        if reviewed is None and all(audit_explainer(a, registry, c) is None for c, a in declared):
            raise ConfigError(f"no attacker of the audit ({', '.join(names)}) says which words drive its matches, so "
                              "no redaction can be suggested; edit the release yourself, or apply a decisions table "
                              "with --decisions")
        suggestions, rewriter = [], None
        if args.rewrite:  # the endpoint is checked before the attack
            rewriter = Rewriter(make_llm_client({**project.llm, **_checked_options(args, LLM_PARAMS)},
                                                purpose="--rewrite"), seed=config.seed, max_documents=args.rewrite_max)
        try:
            panel = audit_panel(documents, registry, declared, _member_progress(names))
            before = {name: member for name, member in zip(names, panel.members)}
            if held is not None:
                _say(f"the held-out attacker, {held_out}, on the release as it is (the search never consults it)")
                before[held_out] = run_audit(documents, registry, held[1], held[0], ProgressBar())
            if reviewed is None:
                bar = ProgressBar()
                decisions, suggestions = proposed_decisions(
                    panel, attackers, registry, texts, strategy=replacer, deny=_words(args.deny),
                    allow=_words(args.allow), common_share=args.common or None,
                    progress=lambda done, total: bar(len(done), total, "searching redactions"), rewriter=rewriter)
            else:
                decisions = reviewed
        finally:
            for attacker in attackers + ([] if held is None else [held[1]]):
                close_clients(attacker)
            if rewriter is not None:
                rewriter.client.close()
        edits, withheld = accepted(decisions)
        write_private(out / "decisions.csv", decisions_csv(decisions, audit_id, held_out))
        log = redaction_log(config, replacer, suggestions, generalization=table, decisions=decisions,
                            deny=_words(args.deny), allow=_words(args.allow), applied=args.decisions,
                            common_share=None if reviewed is not None else (args.common or None), notes=notes,
                            config_id=audit_id, held_out=held_out,
                            function_words=None if reviewed is not None else function_words(texts.values(),
                                                                                            args.common or None),
                            rewrite=None if rewriter is None else rewriter.params())
        utility = release_utility(texts, edits, withheld, packaged_embedder(ProgressBar()))
        log["utility"] = {**utility.summary(), "per_document": [d.to_dict() for d in utility.documents
                                                                if d.withheld or d.edited]}
        if reviewed is None:
            level = config.policy_confidence
            work = (worklist(panel.members[0].certificate(level), config.policy, audit_id,
                             explain=audit_explainer(attackers[0], registry, config)) if len(names) == 1
                    else panel_worklist(panel.certificate(level), config.policy, audit_id))
            work = suggested_worklist(work, suggestions)
            write_private(out / "worklist.csv", worklist_csv(work))
            write_private(out / "worklist.json", worklist_json(work))
            what = release_what_if(panel, suggestions)
            write_private(out / "whatif.csv", what.to_csv(index=False))
            log["what_if"] = what.to_dict(orient="records")
        kept = len(texts) - len(withheld)
        release = redacted_release(documents_file, documents, edits, out, withheld)
        frame = decided_frame(documents.frame, edits, withheld)
        # the redacted release is read as its input was (columns, encoding), but is another file (no checksum)
        read_as = {key: value for key, value in (("columns", redacted_columns(documents.columns)),
                                                 ("encoding", documents.encoding)) if value and value != "utf-8"}
        after = [replace(redacted_config(c, frame), data={**{role: info for role, info in c.data.items()
                                                             if role != "documents"},
                                                          **({"documents": read_as} if read_as else {})})
                 for c in [c for c, _ in declared] + ([] if held is None else [held[0]])]
        write_private(out / CONFIG_FILE, declared_panel_toml(after, held_out))
        verified = None
        if kept and held is not None:
            verified = _verify_redaction(folder, release, out / CONFIG_FILE, registry, drop, before, held_out,
                                         audit_id, log, utility.summary(), inputs["documents"])
        write_private(out / "redactions.json", json.dumps(log, indent=2, ensure_ascii=False))
        folder.complete(audit_id)
    _say_claimed(folder)
    release, out = folder.final_path(release).resolve(), Path(args.out).resolve()
    for note in notes:
        _say(f"warning: {note}")
    n_edits = sum(len(e) for e in edits.values())
    if reviewed is None:
        safe = sum(s.action == "redact" for s in suggestions)
        where = " (audited and calibration documents alike)" if config.protocol == "split" else ""
        against = f" of every attacker of the panel ({', '.join(names)})" if len(names) > 1 else ""
        _say(f"{len(suggestions)} flagged documents{where}: {safe} made acceptable to the policy{against} by their "
             f"suggested edits (indicative, under the stored calibration), {len(suggestions) - safe} to withhold")
        _say_what_if(what, out / "whatif.csv")
        if rewriter is not None:
            rewritten = sum(any(e.kind == "rewrite" for e in s.edits) for s in suggestions)
            refused = sum("an LLM rewrite was refused" in s.reason for s in suggestions)
            _say(f"LLM rewrite: {rewritten} documents the search would withhold are rewritten within the policy of "
                 f"every attacker; {refused} rewrites refused (their documents stay withheld)")
    kinds = {}
    for document in edits.values():
        for edit in document:
            kinds[edit.kind] = kinds.get(edit.kind, 0) + 1
    said = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    apart = "".join(f"{part}; " for part in EditCounts.of(decisions).said())
    _say(f"{n_edits} accepted edits{f' ({said})' if said else ''} in {len(edits)} documents, "
         f"{sum(e.length for d in edits.values() for e in d):,} characters; {apart}{len(withheld)} documents withheld; "
         f"decisions {out / 'decisions.csv'}; redacted release {release} ({kept} documents)")
    _say_utility(utility)
    for reason, ids in allow_list_kept(decisions).items():
        shown = ", ".join(ids[:KEPT_LIMIT]) + (", ..." if len(ids) > KEPT_LIMIT else "")
        _say(f"allow list: its words stay in {len(ids)} released document{'s' if len(ids) > 1 else ''} ({shown}): "
             f"{reason}")
    if kept == 0:
        _say("every document is withheld: the redacted release is empty and there is nothing to audit again")
        return 0
    if verified is not None:
        _say_verified(verified, out / REAUDIT_FOLDER)
        for name, member in zip(verified[2].names, verified[2].members):  # the History reopens each, as of its panel
            record_cli_audit(args, member, out / REAUDIT_FOLDER / PANEL_FOLDER / name)
    _say("audit it again: " + shlex.join(["cpa", "audit", "--documents", str(release), "--registry", str(registry_file),
                                          "--config", str(out / CONFIG_FILE), "--out", "OUT"]))
    return 0


def _say_utility(utility) -> None:
    """What the redacted release keeps, in one line."""
    from cpa_core.report.formatting import kept_text

    _say(f"kept: {kept_text(utility.summary())}")


def _say_what_if(what, path: Path) -> None:
    """The what-if in one line: the documents kept at each end of the acceptable rates at the declared k."""
    declared = what[what.declared].iloc[0]
    at_k = what[what.flag_below == declared.flag_below].sort_values("acceptable_linkage")
    low, high = at_k.iloc[0], at_k.iloc[-1]
    _say(f"what-if (the stored search, no new attack): {int(low.documents_kept):,} documents kept at an acceptable "
         f"rate of {low.acceptable_linkage:g}, {int(declared.documents_kept):,} at the declared "
         f"{declared.acceptable_linkage:.4g}, {int(high.documents_kept):,} at {high.acceptable_linkage:g} (k = "
         f"{int(declared.flag_below)}); every rate and k in {path}")


REAUDIT_FOLDER = "audit"
"""The folder of a redaction's output that holds the audit of the redacted release (the panel and the held-out
attacker)."""


def _held_out(args, names: list[str]) -> str | None:
    """The attacker that verifies the redaction: --held-out, else the first the tool holds out
    (:func:`~cpa_core.audit.panel.held_out_attacker`); never a member of the panel the search reads."""
    from cpa_core.audit.panel import held_out_attacker

    held_out = args.held_out or held_out_attacker(names)
    if held_out in names:
        raise ConfigError(f"--held-out {held_out}: expected an attacker the redaction search never consults, found a "
                          f"member of the audit's panel ({', '.join(names)})")
    if held_out is None:
        _say("warning: every attacker that could verify the redaction is a member of the audit's panel: the redacted "
             "release is not audited by one the search never consulted")
    return held_out


def _member_progress(names: list[str], engine=None):
    """Each panel member's progress: a line naming it (when there are several; where it runs, with an ``engine``
    it cannot use), then its bar."""
    from cpa_core.attack.registry import get_spec

    def progress(i: int, name: str):
        if len(names) > 1:
            here = engine is not None and not get_spec(name).runs_on_cluster
            _say(f"attacker {i + 1} of {len(names)}: {name}"
                 + (" (in this process: it cannot run on a cluster)" if here else ""))
        return ProgressBar()
    return progress


def _verify_redaction(folder, release: Path, config_file: Path, registry, drop: str, before: dict, held_out: str,
                      audit_id: str, log: dict, kept: dict, source: dict):
    """Audit the redacted release with the panel and the held-out attacker (each calibrated on its own, the verdict the
    worst of them), into the redaction's :data:`REAUDIT_FOLDER`; each attacker's first-guess rate before and after
    goes into ``log`` (``redactions.json``) and the audit's summary. Returns what it verified (each attacker before
    and after), the summary and the panel, or ``None`` when the redacted release cannot be audited (said, and the
    redaction kept)."""
    from dataclasses import replace as replaced

    from cpa_core.audit.panel import audit_panel
    from cpa_core.redaction.decisions import redaction_lineage
    from cpa_core.report.metrics import first_guess_figures
    from cpa_core.store.records import write_panel

    project = load_config(config_file)
    names = list(project.audit["attackers"])
    try:
        documents = replaced(project.load_documents(release, on_invalid=drop),
                             file=str(folder.final_path(release).resolve()))
        declared = [declare_audit(project, registry, attacker=name, documents=documents) for name in names]
        _say(f"auditing the redacted release with {', '.join(n for n in names if n != held_out)} and {held_out}, "
             "held out of the search")
        try:
            panel = audit_panel(documents, registry, declared, _member_progress(names), held_out=held_out)
            explainers = dict(zip(names, panel_explainers(declared, registry)))
        finally:
            for _, attacker in declared:
                close_clients(attacker)
    except CPAError as error:
        _say(f"warning: the redacted release was not audited again ({error}); audit it with the command below")
        log["verification"] = {"held_out": held_out, "error": str(error)}
        return None
    attackers = [{"attacker": name, "held_out": name == held_out,
                  "before": first_guess_figures(before[name]) if name in before else None,
                  "after": first_guess_figures(member)} for name, member in zip(names, panel.members)]
    verification = {**redaction_lineage(source, audit_id, log["decisions"], attackers=attackers, held_out=held_out,
                                        kept=kept),
                    "config_id": panel.config_id}
    summary = write_panel(panel, folder.staging / REAUDIT_FOLDER, explainers, redaction=verification,
                          texts=documents.texts())
    log["verification"] = {**verification, "verdict": summary["verdict"]}
    return verification, summary, panel


def _say_verified(verified, folder: Path) -> None:
    """The verdict of the redacted release and each attacker's first-guess rate before and after."""
    verification, summary, _ = verified
    for entry in verification["attackers"]:
        shown = [f"{label} {_rate(entry[label])}" for label in ("before", "after") if entry[label] is not None]
        _say(f"{entry['attacker']}{' (held out of the search)' if entry['held_out'] else ''}: first guess right "
             + ", ".join(shown))
    verdict = summary["verdict"]
    _say(f"the redacted release, audited again in {folder}: verdict ({verdict['status']}, decided by "
         f"{verdict.get('decided_by')}): {verdict['headline']}")


def _rate(figures: dict) -> str:
    if figures["first_guess"] is None:
        return "(no labelled document)"
    return (f"{100 * figures['first_guess']:.1f} % (95 % interval {100 * figures['low']:.1f}-"
            f"{100 * figures['high']:.1f} %, {figures['n']:,} documents)")


def cmd_sample_data(args) -> int:
    from cpa_core.io.synthetic import generate_sample_data
    paths = generate_sample_data(args.out, seed=args.seed)
    for path in paths.values():
        _say(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"audit": cmd_audit, "stress": cmd_stress, "history": cmd_history, "redact": cmd_redact,
                "sample-data": cmd_sample_data}
    try:
        return handlers[args.command](args)
    except CPAError as error:
        _say(f"error: {error}")
        return 2
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        _say(f"error: {where}{error.strerror or error}")
        return 2
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
