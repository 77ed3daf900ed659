"""The Data page under Streamlit's AppTest: the column mapping guessed from the column names (the text column from
the content when no name says it), the load button held until every required column is mapped, a release without
ids numbered when the curator asks, and files in Latin-1 or Windows-1252."""

from __future__ import annotations

import re

import pandas as pd
from apptest import TIMEOUT_S

from cpa_ui import nav

APP = "app.py"
ACCENTED = "Zoë Müller met Bézier"


def shown(element) -> str:
    return re.sub(r"\\(.)", r"\1", element.value)


def data_page():
    from conftest import REPO_ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO_ROOT / APP), default_timeout=TIMEOUT_S).run()
    at.switch_page(nav.DATA).run()
    return at


def upload(at, key: str, name: str, data: bytes):
    at.file_uploader(key=key).set_value((name, data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def documents_csv(header: tuple[str, str, str], encoding: str = "utf-8", text: str = "a note") -> bytes:
    """Three documents about people of the sample registry, under the given column names."""
    frame = pd.DataFrame({header[0]: ["D1", "D2", "D3"], header[1]: [text, "second note", "third note"],
                          header[2]: ["P0001", "P0002", "P0003"]})
    return frame.to_csv(index=False).encode(encoding)


def choices(at, kind: str) -> dict[str, str | None]:
    prefix = f"map.{kind}."
    return {s.key[len(prefix):]: s.value for s in at.selectbox if s.key and s.key.startswith(prefix)}


def captions(at) -> str:
    return " | ".join(shown(c) for c in at.caption)


def test_obvious_columns_are_guessed_said_and_loaded(sample_paths):
    at = upload(data_page(), "upload.documents", "notes.csv", documents_csv(("doc", "note", "subject")))
    assert not at.error
    assert choices(at, "documents") == {"doc_id": "doc", "text": "note", "identity_id": "subject",
                                        "group": "(no groups)"}
    assert "doc_id = doc, text = note, identity_id = subject: guessed from the column names; check" in captions(at)
    assert not at.button(key="upload.load").disabled
    upload(at, "upload.registry", "people.csv", b"pid,age\nP0001,30\nP0002,40\nP0003,50\n")
    assert choices(at, "registry") == {"identity_id": "pid"}
    at.button(key="upload.load").click().run()
    assert not at.exception and not at.error, [shown(e) for e in at.error]
    data = at.session_state["cpa.data"]
    assert data.source == "upload" and data.documents.frame["doc_id"].tolist() == ["D1", "D2", "D3"]
    assert data.registry.ids.tolist() == ["P0001", "P0002", "P0003"]


def test_the_load_button_waits_for_every_required_column(sample_paths):
    at = upload(data_page(), "upload.documents", "notes.csv", documents_csv(("doc", "words", "who")))
    assert choices(at, "documents")["identity_id"] is None
    assert at.button(key="upload.load").disabled
    assert "Cannot load yet: no column chosen for 'identity_id'" in captions(at)
    at.selectbox(key="map.documents.identity_id").set_value("doc").run()  # the same column twice
    assert at.button(key="upload.load").disabled
    assert "the column 'doc' is chosen for both 'doc_id' and 'identity_id'" in captions(at)
    at.selectbox(key="map.documents.identity_id").set_value("who").run()
    assert not at.button(key="upload.load").disabled and "Cannot load yet" not in captions(at)
    at.button(key="upload.load").click().run()
    assert not at.error, [shown(e) for e in at.error]
    assert at.session_state["cpa.data"].documents.frame["text"].tolist()[1] == "second note"


def test_a_new_file_gets_fresh_guesses(sample_paths):
    at = upload(data_page(), "upload.documents", "a.csv", documents_csv(("a", "b", "c")))
    # no name is recognised; the text column is guessed from the content
    assert choices(at, "documents") == {"doc_id": None, "text": "b", "identity_id": None, "group": "(no groups)"}
    assert "text = b: guessed from the columns' content (the longest free text); check" in captions(at)
    assert at.button(key="upload.load").disabled
    upload(at, "upload.documents", "b.csv", documents_csv(("id", "text", "person_id")))
    assert choices(at, "documents") == {"doc_id": "id", "text": "text", "identity_id": "person_id",
                                        "group": "(no groups)"}
    assert not at.button(key="upload.load").disabled


def test_a_file_with_too_few_columns_is_refused_with_its_columns(sample_paths):
    """Row numbers may give the ids, never the text or the identity: one column is too few."""
    at = upload(data_page(), "upload.documents", "docs.csv", b"note\na note\n")
    errors = " ".join(shown(e) for e in at.error)
    assert "required column 'identity_id' is missing" in errors and "found columns ['note']" in errors
    assert "mapping used: text = 'note'" in errors
    assert at.button(key="upload.load").disabled


def test_a_latin1_file_is_explained_and_loads_once_its_encoding_is_chosen(sample_paths):
    data = documents_csv(("doc_id", "text", "identity_id"), "latin-1", ACCENTED)
    at = upload(data_page(), "upload.documents", "latin.csv", data)
    errors = " ".join(shown(e) for e in at.error)
    assert "latin.csv, row 1: text is not valid UTF-8" in errors and "choose the file's encoding" in errors
    assert ACCENTED not in errors
    preview = at.dataframe[-1].value
    assert preview["Latin-1 (ISO-8859-1)"].tolist()[:3] == ["Zoë", "Müller", "Bézier"]
    assert at.button(key="upload.load").disabled
    assert at.selectbox(key="upload.documents.encoding").value == "utf-8"  # never picked for the curator
    at.selectbox(key="upload.documents.encoding").set_value("latin-1").run()
    assert not at.error and not at.button(key="upload.load").disabled
    at.button(key="upload.load").click().run()
    assert not at.error and not at.exception
    documents = at.session_state["cpa.data"].documents
    assert documents.encoding == "latin-1" and documents.frame["text"].tolist()[0] == ACCENTED
    assert "read as Latin-1 (ISO-8859-1)" in captions(at)


def test_a_utf8_file_declared_latin1_is_warned_about(sample_paths):
    at = upload(data_page(), "upload.documents", "utf8.csv", documents_csv(("doc_id", "text", "identity_id"),
                                                                          "utf-8", ACCENTED))
    assert not at.error and not at.warning
    at.selectbox(key="upload.documents.encoding").set_value("latin-1").run()
    assert any("also valid UTF-8" in shown(w) for w in at.warning)


def blog_csv() -> bytes:
    """A release as a blog archive exports it: who wrote each post and the post, no document id."""
    frame = pd.DataFrame({"author": ["P0001", "P0002", "P0003"],
                          "post": ["went hiking with the dog again today", "my sister visited from the coast",
                                   "new recipe for the bakery stall"]})
    return frame.to_csv(index=False).encode()


def test_a_release_without_ids_is_numbered_on_request(sample_paths):
    at = upload(data_page(), "upload.documents", "blog.csv", blog_csv())
    assert not at.error, [shown(e) for e in at.error]
    assert choices(at, "documents") == {"doc_id": None, "text": "post", "identity_id": "author",
                                        "group": "(no groups)"}  # never numbered unasked
    said = captions(at)
    assert "text = post, identity_id = author: guessed from the column names; check" in said
    assert "no column chosen for 'doc_id' (a file without doc_ids: number the rows)" in said
    assert at.button(key="upload.load").disabled
    doc_id = at.selectbox(key="map.documents.doc_id")
    assert doc_id.options[0] == "(number the rows: 1, 2, …)"
    doc_id.set_value("<row number>").run()
    assert "doc_id: the row number of each document in its file: 1 for the first data row, the header excluded" \
        in captions(at)
    at.button(key="upload.load").click().run()
    assert not at.exception and not at.error, [shown(e) for e in at.error]
    documents = at.session_state["cpa.data"].documents
    assert documents.frame["doc_id"].tolist() == ["1", "2", "3"]
    assert documents.frame["identity_id"].tolist() == ["P0001", "P0002", "P0003"]
    assert documents.frame["text"].tolist()[0] == "went hiking with the dog again today"
    assert dict(documents.columns) == {"doc_id": "<row number>", "text": "post", "identity_id": "author"}
