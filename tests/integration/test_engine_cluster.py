"""The attack on a local Dask cluster gives the results of the attack in one process: in the audit pipeline, the
command line and the dashboard; an unreachable scheduler is named quickly. The partitions and the attackers that
may travel: tests/attack/test_engine.py."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from cpa_core.common.errors import ConfigError

CLI = [sys.executable, "-m", "cpa_core.cli"]


@pytest.fixture(scope="module")
def engine():
    from cpa_core.attack.engine import DaskEngine

    with DaskEngine("local") as started:
        yield started


@pytest.fixture(scope="module")
def sample(sample_paths):
    from cpa_core.audit.project import declare_audit, load_config

    project = load_config(sample_paths["config"])
    documents = project.load_documents(sample_paths["documents"])
    registry = project.load_registry(sample_paths["registry"])
    return project, documents, registry, declare_audit


def assert_same_audit(a, b) -> None:
    for x, y in ((a.test_split, b.test_split), (a.calibration_split, b.calibration_split)):
        assert x.table.doc_ids.tolist() == y.table.doc_ids.tolist()
        assert np.array_equal(x.table.candidate_ids, y.table.candidate_ids)
        assert np.array_equal(x.table.candidates, y.table.candidates)
        assert np.array_equal(x.table.weights, y.table.weights)  # bitwise
        assert (x.table.tail_mass is None) == (y.table.tail_mass is None)
        if x.table.tail_mass is not None:
            assert np.array_equal(x.table.tail_mass, y.table.tail_mass)
        assert x.table.queries == y.table.queries
        assert np.array_equal(x.sorted_scores, y.sorted_scores)
    for level in a.config.confidences:
        assert np.array_equal(a.certificate(level).set_sizes, b.certificate(level).set_sizes)
    assert a.inputs.get("learned") == b.inputs.get("learned")


@pytest.mark.parametrize("protocol, top_k, partition_size", [("release", None, 97), ("split", 20, 1000),
                                                              ("release", 50, 1)])
def test_an_audit_on_a_local_cluster_equals_the_audit_in_this_process(engine, sample, protocol, top_k,
                                                                       partition_size):
    """Temperature auto, with and without a shortlist, uneven partitions (the last one short; one document per
    partition; one partition for everything)."""
    from cpa_core.audit.pipeline import run_audit

    project, documents, registry, declare_audit = sample
    if partition_size == 1:  # a thousand tasks of one document: a slice of the release keeps the test short
        documents = replace(documents, frame=documents.frame.iloc[:60].reset_index(drop=True))
    results = []
    for on_cluster in (False, True):
        config, attacker = declare_audit(project, registry, documents=documents)
        config = replace(config, protocol=protocol, top_k=top_k)
        attacker.top_k = top_k
        engine.partition_size = partition_size
        results.append(run_audit(documents, registry, attacker, config, engine=engine if on_cluster else None))
    assert_same_audit(*results)
    assert results[1].inputs["engine"] == {"engine": "dask", "scheduler": "local", "workers": 2}
    assert "engine" not in results[0].inputs


def test_an_unreachable_scheduler_is_named_quickly(monkeypatch):
    from cpa_core.attack import engine as engine_module

    monkeypatch.setattr(engine_module, "CONNECT_TIMEOUT", "1s")
    with pytest.raises(ConfigError, match=r"scheduler tcp://127\.0\.0\.1:9: cannot be reached"):
        engine_module.DaskEngine("tcp://127.0.0.1:9")


def test_cli_audit_on_a_local_cluster_writes_the_same_results(sample_paths, tmp_path):
    outputs = {}
    for name, extra in (("cluster", ["--scheduler", "local"]), ("here", [])):
        out = tmp_path / name
        done = subprocess.run(CLI + ["audit", "--documents", str(sample_paths["documents"]), "--registry",
                                     str(sample_paths["registry"]), "--config", str(sample_paths["config"]),
                                     "--attacker", "tfidf", "--out", str(out), "--no-history", *extra],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        outputs[name] = out
    for file in ("documents.jsonl", "worklist.csv", "worklist.json"):
        assert (outputs["cluster"] / file).read_bytes() == (outputs["here"] / file).read_bytes(), file
    summaries = [json.loads((outputs[n] / "summary.json").read_text(encoding="utf-8")) for n in ("cluster", "here")]
    assert summaries[0]["confidence"] == summaries[1]["confidence"]
    manifest = json.loads((outputs["cluster"] / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["inputs"]["engine"]["scheduler"] == "local"


def test_a_panel_attacks_on_a_local_cluster_where_its_members_can_and_says_which_cannot(sample_paths, tmp_path):
    outputs, said = {}, {}
    for name, extra in (("cluster", ["--scheduler", "local"]), ("here", [])):
        out = tmp_path / name
        done = subprocess.run(CLI + ["audit", "--documents", str(sample_paths["documents"]), "--registry",
                                     str(sample_paths["registry"]), "--config", str(sample_paths["config"]),
                                     "--attacker", "tfidf", "--attacker", "learned", "--out", str(out), "--no-history",
                                     *extra], capture_output=True, text=True)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        outputs[name], said[name] = out, done.stderr
    assert "attacker 2 of 2: learned (in this process: it cannot run on a cluster)" in said["cluster"]
    assert "in this process" not in said["here"]
    for member in ("tfidf", "learned"):
        for file in ("documents.jsonl", "worklist.json"):
            assert (outputs["cluster"] / "members" / member / file).read_bytes() == \
                (outputs["here"] / "members" / member / file).read_bytes(), (member, file)
    engines = {member: json.loads((outputs["cluster"] / "members" / member / "manifest.json").read_text(
        encoding="utf-8"))["inputs"].get("engine", {}).get("engine") for member in ("tfidf", "learned")}
    assert engines["tfidf"] == "dask" and engines["learned"] != "dask"


def test_the_dashboard_runs_the_attack_on_a_local_cluster_with_the_same_results():
    from apptest import assert_clean, new_app

    from cpa_core.audit.pipeline import run_audit
    from cpa_ui import nav
    from cpa_ui.cache import audit

    audit.clear()  # an audit of the same declared configuration, cached by another test, would be served as is
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.multiselect(key="w.threat.attackers").set_value(["tfidf"]).run()  # one attacker (the default is a panel)
    at.switch_page(nav.CALIBRATE).run()
    at.text_input(key="calibrate.scheduler").set_value("local").run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    run, data = at.session_state["cpa.run"], at.session_state["cpa.data"]
    assert run.result.inputs["engine"]["scheduler"] == "local"
    here = run_audit(data.documents, data.registry, replace(run.attacker), run.result.config)  # a fresh attacker
    assert_same_audit(run.result, here)


def test_the_dashboard_names_an_unreachable_scheduler(monkeypatch):
    from apptest import new_app, shown

    from cpa_ui import nav

    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.multiselect(key="w.threat.attackers").set_value(["tfidf"]).run()  # one attacker (the default is a panel)
    at.switch_page(nav.CALIBRATE).run()
    at.text_input(key="calibrate.scheduler").set_value("tcp://127.0.0.1:9").run()
    at.button(key="calibrate.run").click().run()
    assert not at.exception
    assert any("scheduler tcp://127.0.0.1:9: cannot be reached" in shown(e) for e in at.error), [shown(e) for e in at.error]
    assert at.session_state["cpa.run"] is None
