"""The ``cpa`` command line: batch audits, stress tests and the demo data.

Bad input ends the run with a one-line message naming the file, row or column, and exit status 2.
Nothing the command prints contains document text.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from .attackers.imported import load_candidate_scores
from .audit import estimate_llm_calls, run_audit
from .config import ATTACKERS, ProjectConfig, declare_audit, load_config
from .conformal import confidence_label
from .data import load_documents, load_registry
from .errors import CalibrationWarning, CPAError
from .progress import ProgressBar
from .scores import SCORES

EPILOG = """examples:
  cpa audit --documents sample_data/documents.csv --registry sample_data/registry.csv \\
            --config sample_data/audit.toml --knowledge K2 --out out/k2
  cpa stress topk --documents ... --registry ... --config ... --ks 5,10,50 --out topk.csv
  cpa sample-data --out sample_data
"""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other error of the tool."""

    def error(self, message: str):
        self.exit(2, f"cpa: error: {message} (see '{self.prog} --help')\n")


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, found '{text}'") from None


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a confidence level such as 0.95, found '{text}'") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"a confidence level must lie strictly between 0 and 1, found {text}")
    return value


def _add_audit_options(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data")
    data.add_argument("--documents", required=True, metavar="FILE",
                      help="released documents (CSV, JSONL or Parquet) with doc_id, text, identity_id [, group]")
    data.add_argument("--registry", required=True, metavar="FILE",
                      help="profile registry (CSV, JSONL or Parquet) with identity_id and profile fields")
    data.add_argument("--config", metavar="FILE", help="audit configuration (TOML): knowledge levels, defaults")
    data.add_argument("--drop-invalid", action="store_true",
                      help="drop invalid rows (reported on stderr) instead of stopping at the first one")
    threat = parser.add_argument_group("threat configuration")
    threat.add_argument("--knowledge", metavar="LEVEL", help="knowledge level declared in the config (K1, K2, K3, ...)")
    threat.add_argument("--fields", metavar="A,B,...", help="custom knowledge level: registry fields the attacker sees")
    threat.add_argument("--query-mode", choices=["direct", "direct_plus_clues"],
                        help="direct: the released text is the query; direct_plus_clues: an LLM's clues are appended "
                             "(default: the knowledge level's)")
    threat.add_argument("--attacker", choices=list(ATTACKERS),
                        help="attacker (default tfidf; dense: sentence embeddings; imported with --scores)")
    threat.add_argument("--model", metavar="PATH_OR_NAME",
                        help="sentence-transformers model of the dense attacker (default: the packaged all-MiniLM-L6-v2)")
    threat.add_argument("--scores", metavar="FILE", help="bring your own attacker: long table doc_id, candidate_id, score")
    threat.add_argument("--scores-kind", choices=["probability", "score", "rank"], default="probability",
                        help="what the imported score column holds (default probability)")
    llm = parser.add_argument_group("LLM attackers (forced_choice, profile, direct_plus_clues levels)")
    llm.add_argument("--llm-url", metavar="URL", help="OpenAI-compatible endpoint (base_url); the key comes from "
                     "the environment variable named by [llm] api_key_env (default OPENAI_API_KEY)")
    llm.add_argument("--llm-model", metavar="NAME", help="model name at the endpoint")
    llm.add_argument("--samples", type=int, metavar="M", help="LLM samples per document (forced choice, profile)")
    llm.add_argument("--shortlist-k", type=int, metavar="K", help="forced choice: options shown to the LLM")
    llm.add_argument("--logprobs", action="store_true", help="forced choice: use option log-probabilities")
    llm.add_argument("--call-budget", type=int, metavar="N", help="refuse a run needing more LLM calls than N")
    llm.add_argument("--dry-run", action="store_true",
                     help="print the number of LLM calls the run would make (cached answers are free) and stop")
    threat.add_argument("--temperature", type=float, help="softmax temperature over similarities")
    threat.add_argument("--top-k", type=int, metavar="K", help="truncate each candidate pool to its top K")
    protocol = parser.add_argument_group("calibration protocol")
    protocol.add_argument("--score", choices=sorted(SCORES), help="nonconformity score (default aps; given: the attacker's own score)")
    protocol.add_argument("--confidence", type=_confidence, action="append", metavar="LEVEL",
                          help="confidence level, repeatable (default 0.90 0.95 0.99)")
    protocol.add_argument("--n-cal", type=int, metavar="N", help="calibration documents (default: half)")
    protocol.add_argument("--n-test", type=int, metavar="N", help="test documents (default: the rest)")
    protocol.add_argument("--group-column", metavar="C", help="calibrate separately per value of this column (Mondrian)")
    protocol.add_argument("--seed", type=int, help="seed of the calibration/test split (default 0)")
    protocol.add_argument("--miss-policy", choices=["infinite", "exclude"],
                          help="calibration documents whose truth is outside the pool: score +inf (default) or excluded")
    policy = parser.add_argument_group("release policy")
    policy.add_argument("--flag-below", type=int, metavar="K", help="flag documents whose set has fewer than K members (default 11)")
    policy.add_argument("--flag-confidence", type=_confidence, metavar="LEVEL",
                        help="confidence level at which documents are flagged (default: the lowest audited level)")
    policy.add_argument("--leakage-threshold", type=float, metavar="L", help="also flag documents whose leakage proxy exceeds L")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cpa", description="Conformal Privacy Auditing: certified re-identification ambiguity sets for released text.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    audit = commands.add_parser("audit", help="calibrate and certify a release", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Attack, calibrate and certify; writes summary.json, calibration.jsonl, "
                                            "test.jsonl, worklist.csv, worklist.json and manifest.json to --out.")
    _add_audit_options(audit)
    audit.add_argument("--out", required=True, metavar="DIR", help="output folder")
    stress = commands.add_parser("stress", help="stress tests of a configuration (tables as CSV)")
    tests = stress.add_subparsers(dest="test", required=True, metavar="TEST")
    specs = {
        "drift": "calibrate under one configuration, certify under another (--test-knowledge and/or --test-documents)",
        "topk": "miss rate, coverage and set size per top-K truncation (--ks)",
        "scores": "APS vs rank vs probability score at matched splits",
        "ncal": "calibration-size ablation (--n-cals)",
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
        if name == "seeds":
            sub.add_argument("--seeds", type=_ints, default=[0, 1, 2, 3, 4], help="comma-separated seeds")
        if name == "budget":
            sub.add_argument("--ms", type=_ints, default=[1, 3, 5, 10], help="comma-separated sampling budgets m")
    sample = commands.add_parser("sample-data", help="regenerate the synthetic demo data")
    sample.add_argument("--out", default="sample_data", metavar="DIR", help="output folder (default sample_data)")
    sample.add_argument("--seed", type=int, default=20261122, help="generator seed")
    return parser


def _say(text: str) -> None:
    print(f"cpa: {text}", file=sys.stderr)


def _load(args, documents_file: str | None = None):
    project = load_config(args.config) if args.config else ProjectConfig()
    columns = project.columns
    on_invalid = "drop" if args.drop_invalid else "error"
    group_column = args.group_column or project.audit.get("group_column")
    documents = load_documents(documents_file or args.documents, columns=columns.get("documents"),
                               group_column=group_column if group_column and group_column != "group" else None,
                               on_invalid=on_invalid)
    registry = load_registry(args.registry, columns=columns.get("registry"), on_invalid=on_invalid)
    for report in (documents.report, registry.report):
        if report.rejected:
            _say(f"{report.file}: dropped {len(report.rejected)} of {report.n_read} rows "
                 f"(first: row {report.rejected[0].row}, {report.rejected[0].column}: {report.rejected[0].reason})")
    imported = None
    if args.scores:
        imported = load_candidate_scores(args.scores, kind=args.scores_kind, columns=columns.get("scores"),
                                         temperature=args.temperature or 1.0)
    overrides = {"score": args.score, "confidence": args.confidence, "n_cal": args.n_cal, "n_test": args.n_test,
                 "seed": args.seed, "group_column": args.group_column, "top_k": args.top_k,
                 "miss_policy": args.miss_policy, "flag_below": args.flag_below,
                 "leakage_threshold": args.leakage_threshold, "flag_confidence": args.flag_confidence, "model": args.model, "query_mode": args.query_mode, "temperature": args.temperature}
    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    project = _with_llm_options(project, args)
    config, attacker = declare_audit(project, registry, knowledge=args.knowledge, fields=fields,
                                     attacker=args.attacker, imported=imported, overrides=overrides)
    return project, documents, registry, config, attacker


def _with_llm_options(project: ProjectConfig, args) -> ProjectConfig:
    """The project configuration with the command line's LLM options applied."""
    from dataclasses import replace
    llm = {**project.llm, **{k: v for k, v in (("base_url", args.llm_url), ("model", args.llm_model),
                                                 ("call_budget", args.call_budget)) if v is not None}}
    attackers = {name: dict(params) for name, params in project.attackers.items()}
    forced = attackers.setdefault("forced_choice", {})
    for key, value in (("m", args.samples), ("shortlist_k", args.shortlist_k),
                       ("mode", "logprobs" if args.logprobs else None)):
        if value is not None:
            forced[key] = value
    if args.samples is not None:
        attackers.setdefault("profile", {})["m"] = args.samples
    return replace(project, llm=llm, attackers=attackers)


def _explainer(attacker, registry, level):
    """Driving terms from the TF-IDF index over the level's profile texts."""
    from .attackers.tfidf import TfidfIndex
    from .knowledge import profile_texts
    index = getattr(attacker, "index_", None) or TfidfIndex().fit(profile_texts(registry, level))
    return lambda query, rows: index.shared_terms(query, [r for r in rows if r < index.profiles_.shape[0]])


def _close_llm(attacker) -> None:
    from .attackers.llm_clues import attacker_clients
    for client in attacker_clients(attacker):
        client.close()


def _llm_report(result, attacker):
    """The attacker's LLM counters (counts only) into the result's inputs, hence its manifest; one line said."""
    from dataclasses import replace
    from .attackers.llm_clues import run_counters
    counters = run_counters(attacker)
    for where, values in counters.items():
        shown = ", ".join(f"{k} {v}" for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
        _say(f"LLM ({where}): {shown}")
    return replace(result, inputs={**result.inputs, "llm_counters": counters}) if counters else result


def _write_attribute_sets(result, attacker, out: str) -> None:
    """Profile-CPA: the certified attribute value sets of every test document, per confidence level."""
    from .attackers.profile import ProfileAttacker, certified_attribute_sets
    if not isinstance(attacker, ProfileAttacker):
        return
    levels = list(result.config.confidences)
    per_level = {confidence_label(c): certified_attribute_sets(result.certificate(c), attacker) for c in levels}
    path = Path(out) / "attribute_sets.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for row, doc_id in enumerate(result.test_split.table.doc_ids.tolist()):
            record = {"doc_id": doc_id, "sets": {label: {name: {"values": list(s.values), "any_value": s.any_value}
                                                         for name, s in sets[row].items()}
                                                 for label, sets in per_level.items()}}
            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")


def cmd_audit(args) -> int:
    _, documents, registry, config, attacker = _load(args)
    try:
        return _audit(args, documents, registry, config, attacker)
    finally:
        _close_llm(attacker)


def _audit(args, documents, registry, config, attacker) -> int:
    from .records import write_audit
    if args.dry_run:
        calls = estimate_llm_calls(documents, registry, attacker, config)
        print(f"{calls} LLM calls needed (answers already cached are not counted)")
        return 0
    result = run_audit(documents, registry, attacker, config, ProgressBar())
    for note in result.calibration.warnings_:
        _say(f"warning: {note}")
    result = _llm_report(result, attacker)
    paths = write_audit(result, args.out, _explainer(attacker, registry, config.knowledge))
    _write_attribute_sets(result, attacker, args.out)
    summary = json.loads(paths["summary.json"].read_text(encoding="utf-8"))  # as written, not recomputed
    for label, entry in summary["confidence"].items():
        _say(f"confidence {label}: coverage {entry['coverage']:.3f} (conditional "
             f"{entry['coverage_conditional'] if entry['coverage_conditional'] is None else round(entry['coverage_conditional'], 3)}), "
             f"median set {entry['median_set_size']:g}, q_hat {entry['q_hat']}, "
             f"n_cal {entry['n_cal']}, n_test {entry['n_test']}")
    flagged = json.loads(paths["worklist.json"].read_text(encoding="utf-8"))
    _say(f"{len(flagged)} documents flagged (set smaller than {config.flag_below} at confidence "
         f"{confidence_label(config.policy_confidence)}); results in {args.out}")
    return 0


def cmd_stress(args) -> int:
    project, documents, registry, config, attacker = _load(args)
    try:
        return _stress(args, project, documents, registry, config, attacker)
    finally:
        _close_llm(attacker)


def _stress(args, project, documents, registry, config, attacker) -> int:
    from . import stress
    bar = ProgressBar()
    if args.test == "drift":
        if not args.test_knowledge and not args.test_documents:
            _say("error: drift needs --test-knowledge and/or --test-documents (configuration B)")
            return 2
        result_a = run_audit(documents, registry, attacker, config, bar)
        documents_b = _load(args, args.test_documents)[1] if args.test_documents else documents
        config_b = config
        if args.test_knowledge:
            from dataclasses import replace
            config_b = replace(config, knowledge=project.level(args.test_knowledge))
            config_b.knowledge.check_against(registry)
        table = stress.drift(result_a, run_audit(documents_b, registry, attacker, config_b, bar))
    elif args.test == "budget":
        table = stress.sampling_budget_ablation(documents, registry, config, attacker, args.ms, bar)
    else:
        full = stress.full_attack(documents, registry, attacker, config, bar)
        if args.test == "topk":
            table = stress.topk_sweep(documents, registry, config, full, args.ks)
        elif args.test == "scores":
            table = stress.score_ablation(documents, registry, config, full)
        elif args.test == "ncal":
            table = stress.ncal_ablation(documents, registry, config, full, args.n_cals)
        else:
            table = stress.split_stability(documents, registry, config, full, args.seeds)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
        _say(f"wrote {len(table)} rows to {args.out}")
    else:
        print(table.to_string(index=False))
    return 0


def cmd_sample_data(args) -> int:
    from .synthetic import generate_sample_data
    paths = generate_sample_data(args.out, seed=args.seed)
    for path in paths.values():
        _say(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"audit": cmd_audit, "stress": cmd_stress, "sample-data": cmd_sample_data}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationWarning)
            return handlers[args.command](args)
    except CPAError as error:
        _say(f"error: {error}")
        return 2
    except OSError as error:
        _say(f"error: {error.filename or ''}: {error.strerror}")
        return 2
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
