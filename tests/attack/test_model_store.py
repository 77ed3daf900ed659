"""The sentence-transformer model's store: the fingerprint of a model (a local folder's files, a name), what it
depends on and what it does not, and where the packaged model comes from (the real model: tests/integration/
test_dense_model.py)."""

from __future__ import annotations

import os

from dense_encoders import HashingEncoder
from packaged_model import HAS_PACKAGED_MODEL

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.model_store import (
    PACKAGED_ALIASES,
    PACKAGED_MODEL,
    fingerprint_model,
    package_version,
    packaged_model_zip,
)


def test_local_model_directory_fingerprint(tmp_path):
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "config.json").write_text('{"a": 1}')
    (model / "1_Pooling" / "config.json").write_text("{}")
    first = fingerprint_model(model)
    moved = tmp_path / "moved"
    model.rename(moved)
    assert fingerprint_model(moved) == first                     # a move keeps the cache valid
    (moved / "config.json").write_text('{"a": 2}')                # same size, other content
    stat = (moved / "config.json").stat()                           # (a later edit: coarse file clocks may
    os.utime(moved / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # not tick in a test)
    assert fingerprint_model(moved) != first
    dense = DenseAttacker(model=str(moved), encoder=HashingEncoder(), cache_dir=str(tmp_path / "c"))
    assert dense.params()["model_source"] == "local directory"
    assert dense.params()["model_fingerprint"] == fingerprint_model(moved)


def files(folder, contents: dict[str, bytes]):
    for name, data in contents.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def test_a_folder_is_identified_by_its_files_names_sizes_and_contents(tmp_path):
    model = files(tmp_path / "model", {"config.json": b"{}", "weights/w.bin": b"0123"})
    first = fingerprint_model(model)
    assert len(first) == 64 and int(first, 16) >= 0
    twin = files(tmp_path / "twin", {"config.json": b"{}", "weights/w.bin": b"0123"})
    assert fingerprint_model(twin) == first  # the same files elsewhere: the same model
    files(model, {".cache/lock": b"x", ".DS_Store": b"y"})  # hidden files and folders are not the model
    assert fingerprint_model(model) == first
    assert fingerprint_model(files(tmp_path / "renamed", {"config.json": b"{}", "weights/v.bin": b"0123"})) != first
    assert fingerprint_model(files(tmp_path / "larger", {"config.json": b"{}", "weights/w.bin": b"01234"})) != first
    assert fingerprint_model(files(tmp_path / "other", {"config.json": b"{}", "weights/w.bin": b"0124"})) != first
    assert fingerprint_model(files(tmp_path / "more", {"config.json": b"{}", "weights/w.bin": b"0123",
                                                       "extra.txt": b""})) != first


def test_a_model_known_only_by_its_name_is_identified_by_its_name(tmp_path):
    assert HAS_PACKAGED_MODEL in (True, False)  # the Hugging Face libraries are offline: nothing is downloaded
    name = "cpa-test/no-such-model-anywhere"
    assert fingerprint_model(name) == fingerprint_model(name)
    assert fingerprint_model(name) != fingerprint_model(name + "-2")
    assert fingerprint_model(str(tmp_path / "not-a-folder")) != fingerprint_model(str(tmp_path / "not-a-folder-2"))


def test_the_packaged_model_is_found_without_importing_it():
    archive = packaged_model_zip()
    if HAS_PACKAGED_MODEL:
        assert archive is not None and archive.name == "model.zip" and archive.is_file()
        assert package_version() != "unknown"
        # every name of the packaged model is the same model
        assert fingerprint_model(PACKAGED_MODEL) == fingerprint_model(f"sentence-transformers/{PACKAGED_MODEL}")
        assert PACKAGED_ALIASES == {PACKAGED_MODEL, f"sentence-transformers/{PACKAGED_MODEL}"}
    else:
        assert archive is None and package_version() == "unknown"
