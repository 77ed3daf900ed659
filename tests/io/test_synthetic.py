"""The synthetic demo data: the same seed writes the same bytes, another seed other data; every document's subject
is a registry person except the open-world share (outsiders, ids ``X...``); ids are unique and consistent, groups
are the three release mechanisms, and the files load as a release."""

from __future__ import annotations

import pandas as pd
import pytest

from cpa_core.io.synthetic import GROUPS, OPEN_WORLD_SHARE, generate_sample_data
from cpa_core.io.tables import check_release, load_documents, load_registry

SMALL = {"n_people": 20, "n_documents": 50}


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
    assert documents["doc_id"].tolist() == [f"D{i:05d}" for i in range(1, 51)]
    outsiders = documents[~documents["identity_id"].isin(registry["identity_id"])]
    assert len(outsiders) == round(OPEN_WORLD_SHARE * 50) == 2  # 3 % of 50, rounded
    assert outsiders["identity_id"].str.fullmatch(r"X\d{4}").all()
    assert set(documents["group"]) <= set(GROUPS) and documents["text"].str.strip().ne("").all()


def test_the_files_load_as_a_release(small):
    documents, registry = load_documents(small["documents"]), load_registry(small["registry"])
    assert len(documents) == 50 and len(registry) == 20 and documents.has_groups
    assert check_release(documents, registry) == pytest.approx(48 / 50)


@pytest.mark.parametrize("sizes", [{"n_people": 0, "n_documents": 5}, {"n_people": 5, "n_documents": 0}])
def test_sizes_must_be_positive(tmp_path, sizes):
    with pytest.raises(ValueError, match="must be positive"):
        generate_sample_data(tmp_path, **sizes)
    assert not any(tmp_path.iterdir())  # nothing written
