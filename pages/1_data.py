"""Step 1: the released documents and the profile registry: upload, map columns, validate, preview."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from cpa_core.audit.project import ProjectConfig
from cpa_core.common.errors import CPAError
from cpa_core.io.columns import (
    DOCUMENT_COLUMNS,
    DOCUMENT_SYNONYMS,
    REGISTRY_ID,
    REGISTRY_SYNONYMS,
    ROW_NUMBERED,
    ROW_NUMBERING,
    ROW_NUMBERS,
    check_columns,
    guess_columns,
    mapping_problems,
)
from cpa_core.io.reading import ENCODINGS, FORMATS, EncodingError, encoding_preview
from cpa_core.io.tables import check_release, registry_share
from cpa_core.report.formatting import counted
from cpa_core.report.help import HELP
from cpa_ui.analysis import preview
from cpa_ui.cache import (
    config_from_upload,
    documents_from_upload,
    fingerprint,
    load_sample,
    registry_from_upload,
    table_columns,
)
from cpa_ui.components import adopt_data, show_error
from cpa_ui.state import DataSet, forget_widgets, state, value_changed
from cpa_ui.text import plain

UPLOAD_TYPES = sorted({suffix.lstrip(".") for suffix in FORMATS})
ROW_POLICIES = {"error": "Stop at the first invalid row (nothing is replaced)",
                "drop": "Drop invalid rows and list them in the validation report"}
NO_GROUP = "(no groups)"
NUMBER_ROWS = "(number the rows: 1, 2, …)"
ENCODING_HELP = ("How the file's text is encoded. UTF-8 is the usual one; files saved by Excel or older systems "
                 "are often Windows-1252 or Latin-1. A file that does not decode is refused, never read with "
                 "replaced characters.")

st.title("Data")
st.markdown("The released documents (with the true identity of each, for calibration and testing) and the "
            "registry of candidate profiles the attacker ranks. The bundled synthetic sample is loaded by "
            "default; upload your own files below.")


def validation_report(report, what: str) -> None:
    columns = st.columns(3)
    columns[0].metric(f"{what} read", f"{report.n_read:,}", help=HELP["n_read"])
    columns[1].metric("Kept", f"{report.n_kept:,}", help=HELP["n_kept"])
    columns[2].metric("Rejected", f"{len(report.rejected):,}", help=HELP["n_rejected"])
    if report.rejected:
        st.dataframe(report.to_frame(), hide_index=True, width="stretch",
                     column_config={"row": st.column_config.NumberColumn("row", help="Row in the file, header "
                                                                                    "excluded"),
                                    "reason": st.column_config.TextColumn("reason", width="large")})
    for note in report.notes:
        st.caption(plain(note))


def encoding_label(encoding: str) -> str:
    return ENCODINGS.get(encoding, plain(encoding))


def current_data(data: DataSet) -> None:
    source = "the bundled synthetic sample" if data.source == "sample" else "uploaded files"
    st.success(f"Auditing {len(data.documents):,} documents against {len(data.registry):,} profiles from {source}.",
               icon=":material/check_circle:")
    missing = 1 - registry_share(data.documents, data.registry)
    st.caption(f"{missing:.1%} of the documents are about people absent from the registry (open world): no "
               "certified set can contain them, and they count against unconditional coverage.")
    documents_tab, registry_tab = st.tabs([f"Documents · {plain(data.documents.file)}",
                                           f"Registry · {plain(data.registry.file)}"])
    with documents_tab:
        st.caption(f"SHA-256 {data.documents.sha256}; read as {encoding_label(data.documents.encoding)}")
        validation_report(data.documents.report, "Rows")
        if data.documents.has_groups:
            counts = data.documents.frame["group"].value_counts().rename_axis("group").reset_index(name="documents")
            st.dataframe(counts, hide_index=True, column_config={"documents": st.column_config.NumberColumn(
                help="Documents per group (e.g. per release mechanism)")})
        st.markdown("**Preview** (document text is only shown in a flagged document's drill-down)")
        st.dataframe(preview(data.documents), hide_index=True, width="stretch", height=260,
                     column_config={"text_characters": st.column_config.NumberColumn(
                                        "characters", help="Length of the released text, in characters."),
                                    "text_words": st.column_config.NumberColumn(
                                        "words", help="Length of the released text, in words.")})
    with registry_tab:
        st.caption(f"SHA-256 {data.registry.sha256}; read as {encoding_label(data.registry.encoding)}; "
                   f"fields: {plain(', '.join(data.registry.fields))}")
        validation_report(data.registry.report, "Rows")
        st.markdown("**Preview**")
        st.dataframe(data.registry.frame.head(50), hide_index=True, width="stretch", height=260)


def column_choice(label: str, default: str | None, theirs: list[str], key: str, optional: bool = False,
                  numbered: bool = False) -> str | None:
    """A file column for one of ours (``numbered``: or :data:`ROW_NUMBERS`, the rows numbered, never preselected)."""
    options = ([NO_GROUP] if optional else []) + ([ROW_NUMBERS] if numbered else []) + theirs
    default = default if default is not None else (NO_GROUP if optional else None)
    labels = {**{option: option for option in options}, ROW_NUMBERS: NUMBER_ROWS}
    choice = st.selectbox(label, options, index=None if default is None else options.index(default), key=key,
                          placeholder="choose a column", format_func=labels.get)
    return None if choice in (None, NO_GROUP) else choice


def file_columns(uploaded, column, kind: str, synonyms: dict,
                 required: tuple[str, ...]) -> tuple[list[str] | None, str, dict[str, float]]:
    """The uploaded table's columns (``None``: nothing uploaded; ``[]``: not usable as it is, said on the page),
    the encoding chosen for it and its free-text columns' mean lengths."""
    if uploaded is None:
        return None, "utf-8", {}
    data = uploaded.getvalue()
    encoding = "utf-8"
    if FORMATS.get(Path(uploaded.name).suffix.lower()) != "parquet":  # Parquet text is always UTF-8
        encoding = column.selectbox("Encoding", list(ENCODINGS), format_func=ENCODINGS.get,
                                    key=f"upload.{kind}.encoding", help=ENCODING_HELP)
    with column:
        try:
            columns, rows, notes, lengths = table_columns(data, uploaded.name, encoding)
            from_file = [ours for ours in required if ours not in ROW_NUMBERED]  # the others may be row numbers
            if len(columns) < len(from_file):  # no mapping can supply every required column: say which is missing
                guess = guess_columns(columns, synonyms, lengths)
                check_columns(uploaded.name, columns, {ours: guess[ours] for ours in from_file if guess[ours]},
                              from_file)
        except EncodingError as error:
            show_error(error.with_hint("choose the file's encoding in the Encoding box above"))
            st.markdown("Words with accented or special characters as each encoding reads them; choose the "
                        "encoding whose column looks right:")
            st.dataframe(encoding_preview(data).fillna("(does not decode)").rename(columns=ENCODINGS),
                         hide_index=True)
            return [], encoding, {}
        except CPAError as error:
            show_error(error)
            return [], encoding, {}
        st.caption(f"{counted(rows, 'row')}; columns: {plain(', '.join(columns))}")
        for note in notes:
            st.warning(plain(note), icon=":material/warning:")
    return columns, encoding, lengths


def mapping_form(column, kind: str, columns: list[str], lengths: dict[str, float], synonyms: dict,
                 required: tuple[str, ...]):
    """A file column for each of ours, guesses preselected (from the column names, and the text column from the
    columns' content when no name gives it); the rows numbered on request for an id: the mapping ``{ours: theirs
    or None}`` and whether it can be loaded. Captions say what was guessed and what is missing."""
    marker = f"upload.{kind}.mapped_columns"
    if value_changed(marker, columns):  # another file: forget the choices made for the previous one
        forget_widgets(f"map.{kind}.")
    by_name = guess_columns(columns, synonyms)
    guess = guess_columns(columns, synonyms, lengths)
    mapping = {}
    with column:
        for ours in synonyms:
            optional = ours not in required
            label = f"Column holding the {ours} (optional)" if optional else f"Column holding '{ours}'"
            mapping[ours] = column_choice(label, guess[ours], columns, key=f"map.{kind}.{ours}", optional=optional,
                                          numbered=ours in ROW_NUMBERED)
        guessed = {ours: theirs for ours, theirs in mapping.items()
                   if theirs is not None and theirs == guess[ours] and theirs != ours}
        for how, names in (("the column names", [o for o in guessed if guessed[o] == by_name[o]]),
                           ("the columns' content (the longest free text)",
                            [o for o in guessed if guessed[o] != by_name[o]])):
            if names:
                said = ", ".join(f"{ours} = {guessed[ours]}" for ours in names)
                st.caption(f"{plain(said)}: guessed from {how}; check")
        for ours in [o for o, theirs in mapping.items() if theirs == ROW_NUMBERS]:
            st.caption(plain(f"{ours}: {ROW_NUMBERING}; the audit records it"))
        problems = mapping_problems(mapping, required)
        if problems:
            st.caption(plain(f"Cannot load yet: {'; '.join(problems)}."))
    return mapping, not problems


def upload_form(data: DataSet | None) -> None:
    limit = st.get_option("server.maxUploadSize")
    st.markdown(f"CSV or JSONL (UTF-8, Latin-1 or Windows-1252: choose under each file) or Parquet, up to {limit} "
                "MB per file. A file replaces only its part: upload just the documents to audit them against the "
                "current registry, or both.")
    left, right = st.columns(2)
    documents_file = left.file_uploader("Released documents", type=UPLOAD_TYPES, key="upload.documents",
                                        help="Columns: a document id (or none: number the rows), the released text, "
                                             "the true identity id, and optionally a group (e.g. the release "
                                             "mechanism).")
    registry_file = right.file_uploader("Profile registry", type=UPLOAD_TYPES, key="upload.registry",
                                        help="Columns: an identity id and any profile fields the attacker may know.")
    config_file = st.file_uploader("Audit configuration (optional TOML: knowledge levels and defaults)", type=["toml"],
                                   key="upload.config")
    mapping_documents, mapping_registry, group_column = {}, {}, None
    documents_columns, documents_encoding, documents_lengths = file_columns(documents_file, left, "documents",
                                                                             DOCUMENT_SYNONYMS, DOCUMENT_COLUMNS)
    registry_columns, registry_encoding, registry_lengths = file_columns(registry_file, right, "registry",
                                                                          REGISTRY_SYNONYMS, (REGISTRY_ID,))
    ready = documents_columns != [] and registry_columns != []
    if documents_columns:
        mapping_documents, complete = mapping_form(left, "documents", documents_columns, documents_lengths,
                                                   DOCUMENT_SYNONYMS, DOCUMENT_COLUMNS)
        group_column = mapping_documents.pop("group")
        ready = ready and complete
    if registry_columns:
        mapping_registry, complete = mapping_form(right, "registry", registry_columns, registry_lengths,
                                                  REGISTRY_SYNONYMS, (REGISTRY_ID,))
        ready = ready and complete
    on_invalid = st.radio("Invalid rows (missing or duplicate ids, empty text)", list(ROW_POLICIES),
                          format_func=ROW_POLICIES.get, key="upload.on_invalid", horizontal=True)
    nothing = documents_file is None and registry_file is None and config_file is None
    if st.button("Load these files", type="primary", disabled=nothing or not ready, key="upload.load"):
        load_uploads(data, documents_file, registry_file, config_file, mapping_documents, mapping_registry,
                     group_column, on_invalid, documents_encoding, registry_encoding)


def _renames(mapping: dict[str, str | None]) -> tuple[tuple[str, str], ...]:
    return tuple((ours, theirs) for ours, theirs in mapping.items() if theirs is not None and theirs != ours)


def load_uploads(data, documents_file, registry_file, config_file, mapping_documents, mapping_registry,
                 group_column, on_invalid, documents_encoding, registry_encoding) -> None:
    """Validate the uploads; on any problem say what is wrong and keep the data as it was."""
    if data is None and (documents_file is None or registry_file is None):
        st.error("Upload both the documents and the registry.", icon=":material/error:")
        return
    try:
        # new files without a configuration never inherit the sample's (its levels, temperature, k)
        project = config_from_upload(config_file.getvalue(), config_file.name) if config_file else \
            data.project if data is not None and data.source == "upload" else ProjectConfig()
        if documents_file is not None:
            documents = documents_from_upload(documents_file.getvalue(), documents_file.name,
                                              _renames(mapping_documents), group_column, on_invalid,
                                              documents_encoding)
            documents_key = (documents.sha256, _renames(mapping_documents), group_column, on_invalid,
                             documents.encoding)
            documents_source = documents_file.getvalue()
        else:
            documents, documents_key = data.documents, data.fingerprint
            group_column, documents_source = data.group_column, data.documents_source
        if registry_file is not None:
            registry = registry_from_upload(registry_file.getvalue(), registry_file.name,
                                            _renames(mapping_registry), on_invalid, registry_encoding)
            registry_key = (registry.sha256, _renames(mapping_registry), on_invalid, registry.encoding)
        else:
            registry, registry_key = data.registry, data.fingerprint
        check_release(documents, registry)
    except CPAError as error:
        show_error(error, "Nothing was replaced: ")
        return
    if documents.has_groups and group_column is None:
        group_column = "group"
    adopt_data(DataSet(documents, registry, project, "upload", fingerprint(documents_key, registry_key, repr(project)),
                       group_column, documents_source))
    state.notice = "New data loaded and validated; results computed on the earlier data were cleared."
    st.rerun()


data = state.data
if state.notice:
    st.success(state.notice, icon=":material/check_circle:")
    state.notice = None
if state.data_error and data is None:
    st.error(f"The bundled sample data could not be loaded: {plain(state.data_error)}", icon=":material/error:")
if data is not None:
    current_data(data)
with st.expander(f"Upload your own documents and registry (CSV, JSONL or Parquet, up to "
                 f"{st.get_option('server.maxUploadSize')} MB each)", expanded=data is None or data.source == "upload",
                 icon=":material/upload:"):
    upload_form(data)
if data is not None and data.source == "upload":
    if st.button("Go back to the bundled sample data", key="data.reset_sample"):
        try:
            adopt_data(load_sample())
        except CPAError as error:
            show_error(error)
        else:
            state.notice = "Back to the bundled sample data; results computed on the uploaded data were cleared."
            st.rerun()
