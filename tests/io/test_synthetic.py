"""The synthetic demo data: the same seed writes the same bytes, another seed other data; every document's subject
is a registry person except the open-world share (outsiders, ids ``X...``); ids are unique and consistent, groups
are the three release mechanisms, and the files load as a release."""

from __future__ import annotations

import pandas as pd
import pytest

from cpa_core.io.synthetic import GROUPS, OPEN_WORLD_SHARE, generate_sample_data
from cpa_core.io.tables import check_release, load_documents, load_registry

SMALL = {"n_people": 20, "n_documents": 200}


def read(paths) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (pd.read_csv(paths["documents"], dtype=str, keep_default_na=False),
            pd.read_csv(paths["registry"], dtype=str, keep_default_na=False))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return generate_sample_data(tmp_path_factory.mktemp("synthetic") / "out", seed=7, **SMALL)


def test_the_same_seed_writes_the_same_bytes(small, tmp_path):
    assert set(small) == {"registry", "documents"}
    assert small["registry"].name == "registry.csv" and small["documents"].name == "documents.csv"
    again = generate_sample_data(tmp_path / "again", seed=7, **SMALL)
    for name in ("registry", "documents"):
        assert again[name].read_bytes() == small[name].read_bytes(), name
    other = generate_sample_data(tmp_path / "other", seed=8, **SMALL)
    assert other["documents"].read_bytes() != small["documents"].read_bytes()


def test_ids_are_unique_and_every_subject_is_known_or_an_outsider(small):
    documents, registry = read(small)
    assert list(documents.columns) == ["doc_id", "text", "identity_id", "group"]
    assert registry.columns[0] == "identity_id" and len(registry.columns) > 3
    assert registry["identity_id"].tolist() == [f"P{i:04d}" for i in range(1, 21)]
    assert documents["doc_id"].tolist() == [f"D{i:05d}" for i in range(1, 201)]
    outsiders = documents[~documents["identity_id"].isin(registry["identity_id"])]
    assert len(outsiders) == round(OPEN_WORLD_SHARE * 200) == 2  # 1 % of 200
    assert outsiders["identity_id"].str.fullmatch(r"X\d{4}").all()
    assert set(documents["group"]) <= set(GROUPS) and documents["text"].str.strip().ne("").all()


def test_the_files_load_as_a_release(small):
    documents, registry = load_documents(small["documents"]), load_registry(small["registry"])
    assert len(documents) == 200 and len(registry) == 20 and documents.has_groups
    assert check_release(documents, registry) == pytest.approx(198 / 200)


@pytest.mark.parametrize("sizes", [{"n_people": 0, "n_documents": 5}, {"n_people": 5, "n_documents": 0}])
def test_sizes_must_be_positive(tmp_path, sizes):
    with pytest.raises(ValueError, match="must be positive"):
        generate_sample_data(tmp_path, **sizes)
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_bundled_sample_is_what_the_generator_writes(tmp_path):
    """``sample_data/`` is ``cpa sample-data``'s output at its defaults, byte for byte: the documentation's figures
    and the tests that follow the sample describe the generator."""
    from pathlib import Path

    bundled = Path(__file__).resolve().parents[2] / "sample_data"
    written = generate_sample_data(tmp_path)
    for name in ("registry", "documents"):
        assert written[name].read_bytes() == (bundled / f"{name}.csv").read_bytes(), name
    documents, registry = read(written)
    outside = ~documents["identity_id"].isin(registry["identity_id"])
    assert int(outside.sum()) == round(OPEN_WORLD_SHARE * len(documents)) == 10
