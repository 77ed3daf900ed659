"""A release's function words: words in more than a share of its documents, or of the documents of one language,
where they number at least MIN_DOCUMENTS; by hand on small releases, and through the evidence every surface shows."""

from __future__ import annotations

from cpa_core.attack.function_words import MIN_DOCUMENTS, UNDETERMINED, function_words, language

ENGLISH = ["I walked the dog in the park this morning and it rained all day long, urlLink",
           "My sister called about the weekend plans and the weather forecast again",
           "We watched a film at home and cooked pasta for dinner with friends"]
PORTUGUESE = ["Eu fui ao mercado com a minha mãe e os meus irmãos, que foi muito bom para nós",
              "Hoje o dia foi longo e eu estou cansado, mas se tudo correr bem amanhã vou à praia"]


def test_the_language_of_a_text_and_of_too_few_letters():
    assert language(ENGLISH[0]) == "en" and language(PORTUGUESE[0]) == "pt"
    assert language("urlLink 2004") == UNDETERMINED and language("") == UNDETERMINED


def test_common_words_of_the_release_and_of_a_language_by_hand():
    english = [ENGLISH[i % 3] + f" Zed{i}" for i in range(60)]  # Zed0..Zed59: each in one document
    portuguese = [PORTUGUESE[i % 2] + f" Ana{i}" for i in range(MIN_DOCUMENTS)]
    found = function_words(english + portuguese, 0.1)
    assert found.documents == {"en": 60, "pt": MIN_DOCUMENTS}
    # in more than 10 % of the 110 documents: each English sentence's words (in 20) and the Portuguese ones (25)
    assert {"urllink", "the", "weather", "que", "mae"} <= found.release  # folded: case and accents aside
    assert not {w for w in found.release if w.startswith(("zed", "ana"))}  # one document each: never common
    assert found.of(ENGLISH[0]) == found.release
    # a minority language's own: Portuguese words in more than 10 % of its 50 documents and not of the release
    few = function_words(english * 4 + portuguese, 0.1)  # 240 English posts: each Portuguese word in 25 of 290
    assert "que" not in few.release and "que" in few.by_language["pt"] and "que" in few.of(PORTUGUESE[1])
    assert "que" not in few.of(ENGLISH[1])
    assert few.describe()["documents_by_language"] == {"en": 240, "pt": MIN_DOCUMENTS}


def test_a_small_release_or_language_has_no_function_words():
    assert function_words(ENGLISH * 3, 0.1).words == frozenset()  # 9 documents: too few to tell
    english = [ENGLISH[i % 3] + f" Zed{i}" for i in range(200)]
    few = function_words(english + PORTUGUESE * 5, 0.1)  # 10 Portuguese documents: perhaps one person's words
    assert "pt" not in few.by_language and "que" not in few.of(PORTUGUESE[0])
    assert function_words(english, None).words == frozenset() and function_words(english, 0).words == frozenset()
