"""Internal: the words of search text, read one way for both backends.

Both backends index the words this module writes of an item's text (`index_text`) and look
for the words it makes of a query (`query_words`), so SQLite's FTS5 and PostgreSQL's
`tsvector` find the same items whatever their own tokenizers would do with the text:

- text is read in its compatibility form (`normal`: `ｶﾞ` is `ガ`, `ﬁ` is `fi`, `x²` is `x2`);
- a word is a run of letters and digits (Python's own: `str.isalnum`), with the
  combining marks that follow them (Devanagari vowel signs, Thai tone marks); it is case
  folded and loses the diacritics of the Latin, Greek and Cyrillic scripts (`café` is
  `cafe`), so a query finds it however it was accented or capitalised;
- Chinese, Japanese and Korean are written without spaces between words, so a run of their
  characters (`CJK`) is indexed as its overlapping pairs of characters, then its last
  character alone (`東京の天気` is `東京 京の の天 天気 気`), the way CJK analyzers index it.
  A query's run is its pairs (`天気`), which appear in that order wherever the text holds it;
  a run of one character, or the last one of a query, matches as a prefix (`天*`), so a
  one-character word is found too. A run in the middle of a query keeps its last character,
  as the text does before the next word (`東京tower`).

Snippets are cut here too (`snippet`), from the item's own text, with the words a query
matched marked: the index keeps words, not text to show.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import NamedTuple

WORD_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl"})
"""The Unicode categories that start a word: letters, decimal digits and letter numbers."""
MARK_CATEGORIES = frozenset({"Mn", "Mc", "Me"})
"""Combining marks, part of the word they follow."""
CJK: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x318F),  # Bopomofo, Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo extended, Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFFDC),  # halfwidth Katakana and Hangul
    (0x20000, 0x3134F),  # CJK extensions B to G
)
"""Code point ranges of the scripts written without spaces between words."""
SNIPPET_WORDS = 24
"""The most index words a snippet shows."""
_BEFORE = 4
"""Index words a snippet shows before its first match, when the text has them."""
_DIACRITICS = (
    (0x0300, 0x036F),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
)
"""The combining diacritical marks a word loses (`é` is `e`); other marks stay."""


class Word(NamedTuple):
    """One word of the index as it is written, and where it comes from in the text."""

    form: str
    start: int
    end: int


def normal(text: str) -> str:
    """`text` in Unicode's compatibility composition (NFKC), which every reading starts from:
    full-width letters, halfwidth kana, ligatures and superscripts as their plain forms."""
    return unicodedata.normalize("NFKC", text)


def is_word_char(char: str) -> bool:
    """Whether `char` starts a word (a letter, digit or letter number)."""
    return unicodedata.category(char) in WORD_CATEGORIES


def _in(ranges: tuple[tuple[int, int], ...], char: str) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in ranges)


def is_cjk(char: str) -> bool:
    """Whether `char` is of a script written without spaces (`CJK`)."""
    return _in(CJK, char)


def _fold(word: str) -> str:
    """A word as indexed: case folded, without Latin, Greek and Cyrillic diacritics."""
    if word.isascii():
        return word.lower()
    spread = unicodedata.normalize("NFD", word.casefold())
    kept = "".join(char for char in spread if not _in(_DIACRITICS, char))
    return unicodedata.normalize("NFC", kept)


def _ranges(points: list[int]) -> str:
    """A regular expression character class body for sorted code points, as ranges."""
    parts: list[str] = []
    run_start = previous = -2
    for point in [*points, -1]:
        if point == previous + 1:
            previous = point
            continue
        if run_start >= 0:
            parts.append(re.escape(chr(run_start)))
            if previous > run_start:
                parts.append("-" + re.escape(chr(previous)))
        run_start = previous = point
    return "".join(parts)


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Runs of word characters with their marks, a mark, and the CJK and other parts of a
    run.

    A run starts with a letter or digit (`re`'s own, in C) and goes on through letters,
    digits and combining marks; the marks are listed once, on first use (about 20 ms), from
    the Unicode database of this Python."""
    limit = 0x20000
    categories = list(map(unicodedata.category, map(chr, range(limit))))
    mark = [point for point, category in enumerate(categories) if category in MARK_CATEGORIES]
    # `re` tests a class of the first plane against a bitmap, one beyond it range by range.
    near = _ranges([point for point in mark if point < 0x10000])
    far = _ranges([*(point for point in mark if point >= 0x10000), *range(0xE0100, 0xE01F0)])
    marks = f"[{near}]|[{far}]"
    cjk = "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in CJK)
    runs = re.compile(f"[^\\W_](?:[^\\W_]|{marks})*")
    # A run's parts: CJK characters with their marks, or anything else.
    parts = re.compile(f"(?P<cjk>[{cjk}](?:[{cjk}]|{marks})*)|(?:(?![{cjk}]).)+", re.DOTALL)
    return runs, re.compile(marks), parts


_ASCII_WORD = re.compile(r"[a-z0-9]+")


def _cjk_words(text: str, start: int, end: int, last: bool) -> Iterator[Word]:
    """A CJK run's overlapping pairs, then (with `last`) its last character alone. After
    NFKC a CJK character is its own folded form: case and accents are not theirs."""
    if _patterns()[1].search(text, start, end) is None:
        chars = [(at, at + 1) for at in range(start, end)]
    else:
        chars = []
        for at in range(start, end):
            if unicodedata.category(text[at]) in MARK_CATEGORIES and chars:
                chars[-1] = (chars[-1][0], at + 1)  # a mark is part of its character
            else:
                chars.append((at, at + 1))
    for (a, _), (_, b) in itertools.pairwise(chars):
        yield Word(text[a:b], a, b)
    if last and chars:
        a, b = chars[-1]
        yield Word(text[a:b], a, b)


def _split(text: str, start: int, end: int) -> Iterator[tuple[int, int, bool]]:
    """(start, end, whether CJK) of each part of a run that is all CJK or none of it; a
    mark goes with the character before it."""
    if text.isascii():
        yield start, end, False
        return
    for part in _patterns()[2].finditer(text, start, end):
        yield *part.span(), part.lastgroup == "cjk"


def _parts(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, whether CJK) of every run of word characters, CJK and other apart."""
    return [part for run in _patterns()[0].finditer(text) for part in _split(text, *run.span())]


def words(text: str, *, query: bool = False) -> list[Word]:
    """The index words of `text` (already `normal`), in order. A query's last CJK run leaves
    out its last character alone, which the text may follow with more of the run."""
    runs = _parts(text)
    found: list[Word] = []
    for number, (start, end, cjk) in enumerate(runs):
        if not cjk:
            found.append(Word(_fold(text[start:end]), start, end))
            continue
        ends_query = query and number == len(runs) - 1
        pairs = list(_cjk_words(text, start, end, last=not ends_query))
        if ends_query and not pairs:  # a lone character ending a query: a prefix
            pairs = list(_cjk_words(text, start, end, last=True))
        found.extend(pairs)
    return found


def index_text(text: str) -> str:
    """What the index holds of an item's text: its words, one space apart."""
    if text.isascii():  # most text: its words are its runs of ASCII letters and digits
        return " ".join(_ASCII_WORD.findall(text.lower()))
    runs, marks, parts = _patterns()
    found: list[str] = []
    # As `words` reads it, run by run, without placing each word in the text.
    for run in runs.findall(normal(text)):
        if run.isascii():
            found.append(run.lower())
            continue
        for part in parts.finditer(run):
            piece = part.group()
            if part.lastgroup != "cjk":
                found.append(_fold(piece))
            elif marks.search(piece) is None:
                found += [piece[at : at + 2] for at in range(len(piece) - 1)]
                found.append(piece[-1])
            else:
                found += (word.form for word in _cjk_words(piece, 0, len(piece), True))
    return " ".join(found)


class QueryWords(NamedTuple):
    """One term of a query as index words: all of them, in order; the last a prefix if
    `prefix`."""

    forms: tuple[str, ...]
    prefix: bool


def query_words(term: str, prefix: bool) -> QueryWords:
    """A query term's index words, and whether its last is a prefix: asked for (`word*`), or
    a query ending in a lone CJK character, which may begin a pair in the text."""
    found = words(normal(term), query=True)
    forms = tuple(word.form for word in found)
    last = found[-1].form if found else ""
    alone = len(last) == 1 and is_cjk(last) and _ends_in_cjk(term)
    return QueryWords(forms, prefix or alone)


def _ends_in_cjk(term: str) -> bool:
    runs = _parts(normal(term))
    return bool(runs) and runs[-1][2]


def _matches(found: Sequence[Word], term: QueryWords, at: int) -> bool:
    forms = term.forms
    if at + len(forms) > len(found):
        return False
    for offset, form in enumerate(forms):
        have = found[at + offset].form
        last = offset == len(forms) - 1
        if not (have == form or (last and term.prefix and have.startswith(form))):
            return False
    return True


class Snippet(NamedTuple):
    """A run of an item's text to show, and the (start, end) of each match in it."""

    text: str
    marks: list[tuple[int, int]]


def snippet(text: str, terms: Sequence[QueryWords]) -> Snippet:
    """Up to `SNIPPET_WORDS` words of `text` around its first match of any of `terms`, with
    `…` where the text goes on and no white space at its ends; its first words when nothing
    matches."""
    text = normal(text)
    found = words(text)
    if not found:
        return Snippet(text.strip()[:200], [])
    matched: list[tuple[int, int]] = []
    first: int | None = None
    for at in range(len(found)):
        for term in terms:
            if term.forms and _matches(found, term, at):
                matched.append((found[at].start, found[at + len(term.forms) - 1].end))
                first = at if first is None else first
    begin = 0 if first is None else max(0, first - _BEFORE)
    end = min(len(found), begin + SNIPPET_WORDS)
    begin = max(0, min(begin, end - SNIPPET_WORDS))
    left = 0 if begin == 0 else found[begin].start
    right = len(text) if end == len(found) else found[end - 1].end
    # Where the run starts in the text shown: after white space cut off, after a `…`.
    left += len(text[left:right]) - len(text[left:right].lstrip())
    right = left + len(text[left:right].rstrip())
    before = "…" if begin > 0 else ""
    shown = before + text[left:right] + ("…" if end < len(found) else "")
    shift = len(before) - left
    return Snippet(shown, [(a + shift, b + shift) for a, b in _merged(matched, left, right)])


def _merged(spans: list[tuple[int, int]], left: int, right: int) -> list[tuple[int, int]]:
    """The spans within `left:right`, sorted, those that overlap merged."""
    kept: list[list[int]] = []
    for a, b in sorted(spans):
        a, b = max(a, left), min(b, right)
        if a >= b:
            continue
        if kept and a <= kept[-1][1]:
            kept[-1][1] = max(kept[-1][1], b)
        else:
            kept.append([a, b])
    return [(a, b) for a, b in kept]
