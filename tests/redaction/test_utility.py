"""What a redacted release keeps, hand-computed: documents, characters, and the meaning score from an embedder."""

import numpy as np
import pytest

from cpa_core.redaction.suggestions import Edit
from cpa_core.redaction.utility import release_utility


def test_documents_and_characters_kept_hand_computed():
    texts = {"a": "Ann lives in Oslo", "b": "nothing to see", "c": "withheld text"}
    edits = {"a": [Edit(0, 3, "Ann", "[NAME]", "ann"), Edit(13, 4, "Oslo", "", "oslo")], "c": [Edit(0, 8, "withheld",
                                                                                                 "", "withheld")]}
    utility = release_utility(texts, edits, withheld={"c"})
    summary = utility.summary()
    assert (summary["documents"], summary["documents_kept"], summary["edited"]) == (3, 2, 1)
    # a keeps 17 - 7 = 10 characters, b all 14, c (withheld) none of 13
    assert (summary["characters"], summary["characters_kept"]) == (44, 24)
    assert summary["characters_kept_share"] == pytest.approx(24 / 44, abs=1e-4)
    by_id = {d.doc_id: d for d in utility.documents}
    assert by_id["b"].meaning == 1.0 and by_id["a"].meaning is None and by_id["c"].withheld
    assert summary["meaning_edited_mean"] is None  # no model: no meaning score is made up


def test_the_meaning_score_is_the_cosine_of_the_original_and_edited_embeddings():
    def embed(texts):  # a bag of letters, normalised: a hand-made embedder
        rows = np.array([[t.count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], dtype=float)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)
    texts = {"a": "ab ab", "b": "ab"}
    utility = release_utility(texts, {"a": [Edit(3, 2, "ab", "cd", "ab")]}, embed=embed)
    by_id = {d.doc_id: d for d in utility.documents}
    # "ab ab" -> (2, 2, 0, 0); "ab cd" -> (1, 1, 1, 1): cosine 4 / (sqrt(8) * 2)
    assert by_id["a"].meaning == pytest.approx(4 / (np.sqrt(8) * 2))
    assert by_id["b"].meaning == 1.0 and utility.meaning == pytest.approx(by_id["a"].meaning)
