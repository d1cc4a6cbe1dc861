"""How search reads text into words: the same for the index, a query and a snippet.

Properties over generated text: every run of characters a text holds, CJK or not, is found
by a query of it, with its place marked in the snippet; no text makes the reading fail.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnstore.rules.search_text import index_text, normal, query_words, snippet, words

CJK = "東京の天気はどうですか明北有雨ガイド서울날씨"
LATIN = ["tide", "Café", "naïve", "ΦΆΡΟΣ", "x2", "keeper"]


@st.composite
def texts_and_a_part(draw: st.DrawFn) -> tuple[str, str]:
    """A text of CJK runs and Latin words, and a run of it a user could type."""
    pieces = draw(
        st.lists(
            st.one_of(st.text(alphabet=CJK, min_size=1, max_size=8), st.sampled_from(LATIN)),
            min_size=1,
            max_size=8,
        )
    )
    separators = draw(st.lists(st.sampled_from([" ", "", ", ", "\n"]), min_size=len(pieces)))
    # A Latin word stands apart (two run together are one word); CJK runs may touch.
    spaced = [f" {piece} " if piece in LATIN else piece for piece in pieces]
    text = "".join(piece + separator for piece, separator in zip(spaced, separators, strict=False))
    chosen = draw(st.integers(0, len(pieces) - 1))
    piece = pieces[chosen]
    if piece in LATIN:
        return text, piece.upper()
    start = draw(st.integers(0, len(piece) - 1))
    end = draw(st.integers(start + 1, len(piece)))
    return text, piece[start:end]


@given(texts_and_a_part())
def test_every_run_a_text_holds_is_found_and_marked(case: tuple[str, str]) -> None:
    """A query of any run of a CJK piece, or any word in another case, matches the text."""
    text, part = case
    shown = snippet(text, [query_words(part, prefix=False)])
    assert shown.marks, (text, part, index_text(text))


@given(st.text())
def test_no_text_fails_to_be_read_and_every_word_is_one_index_word(text: str) -> None:
    """Words hold no white space, and each comes from where the text says."""
    for word in words(text):
        assert word.form
        assert not any(char.isspace() for char in word.form)
        assert 0 <= word.start < word.end <= len(text)
    assert index_text(text) == " ".join(word.form for word in words(normal(text)))


def test_the_words_of_each_script() -> None:
    """Accents and case fold, compatibility forms read plainly, CJK runs as pairs."""
    assert index_text("Café NAÏVE ＴＯＫＹＯ x² φάρος") == "cafe naive tokyo x2 φαροσ"
    assert index_text("東京の天気") == "東京 京の の天 天気 気"
    assert index_text("ｶﾞｲﾄﾞ") == "ガイ イド ド"
    assert index_text("が") == "が"  # a Japanese mark is no accent
    assert query_words("天気", False) == (("天気",), False)
    assert query_words("天", False) == (("天",), True)
    assert query_words("東京tower", False) == (("東京", "京", "tower"), False)
    assert index_text("don't find_keeper example.com 3.14") == "don t find keeper example com 3 14"
