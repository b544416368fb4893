"""Key matching: whole words, CJK substrings, folding, regex keys, one automaton, caching."""
from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings, strategies as st

from retrieval.engine.matching import (
    CompileCache,
    KeyMatcher,
    KeyPattern,
    book_set_key,
    is_word_char,
    parse_regex_key,
    required_literal,
    text_fold,
)
from retrieval.engine.values import Book, Entry


def found(keys: list[KeyPattern], text: str, *, fold_width: bool = False) -> set[str]:
    matcher = KeyMatcher(keys, fold_width=fold_width)
    return {keys[i].text for i in matcher.find(text)}


def key(text: str, **options: bool) -> KeyPattern:
    return KeyPattern(text=text, **options)


# --- whole words (C-8) and CJK substrings (W-3 reuses this) ---------------


def test_whole_word_key_is_not_found_inside_longer_words() -> None:
    keys = [key("fuego")]
    assert found(keys, "balas de fogueo junto al cortafuegos") == set()
    assert found(keys, "¡Fuego! gritó.") == {"fuego"}
    assert found(keys, "fuego") == {"fuego"}


def test_substring_key_matches_inside_words() -> None:
    assert found([key("fuego", whole_words=False)], "junto al cortafuegos") == {"fuego"}


def test_cjk_key_matches_inside_cjk_text_even_with_whole_words() -> None:
    keys = [key("小红帽"), key("星見塔")]
    assert found(keys, "从前有个小红帽住在森林里") == {"小红帽"}
    assert found(keys, "星見塔の鐘が三度鳴った。") == {"星見塔"}


def test_latin_key_next_to_cjk_character_still_matches() -> None:
    assert found([key("wyrm")], "これはwyrmです") == {"wyrm"}


def test_hangul_key_matches_with_a_particle_attached() -> None:
    assert found([key("서울")], "서울에서 만나요") == {"서울"}


def test_multiword_key_and_punctuation_edges() -> None:
    keys = [key("Orden del Alba"), key("/a+/")]
    assert found(keys, "Un emisario de la orden del alba llegó.") == {"Orden del Alba"}
    # Punctuation edges need no word boundary: the key is found between spaces or glued to text.
    assert found(keys, "escribí/a+/ya") == {"/a+/"}


def test_digits_count_as_word_characters() -> None:
    assert found([key("hangar 7")], "el hangar 77") == set()
    assert found([key("hangar 7")], "el hangar 7, ya") == {"hangar 7"}


def test_overlapping_keys_are_all_found() -> None:
    keys = [key("Torre"), key("Torre de Sal"), key("de Sal"), key("sal", whole_words=False)]
    assert found(keys, "la torre de sal") == {"Torre", "Torre de Sal", "de Sal", "sal"}


# --- folding (S-3) -----------------------------------------------------------


def test_case_is_folded_including_accented_capitals() -> None:
    assert found([key("Nebulosa Carmesí"), key("ORÁCULO")], "¡la NEBULOSA CARMESÍ! pregunta al oráculo") == {
        "Nebulosa Carmesí",
        "ORÁCULO",
    }


def test_case_sensitive_key_needs_the_same_case() -> None:
    keys = [key("Ceniza", case_sensitive=True)]
    assert found(keys, "la ceniza cae") == set()
    assert found(keys, "Puerto Ceniza") == {"Ceniza"}


def test_composed_and_decomposed_accents_are_the_same_letter() -> None:
    decomposed = unicodedata.normalize("NFD", "ámbar")
    assert found([key("ámbar")], f"el bosque de {decomposed}") == {"ámbar"}
    assert found([key(decomposed)], "el bosque de ámbar") == {decomposed}


def test_width_forms_match_only_when_width_folding_is_on() -> None:
    keys = [key("ｍｉｔｈｒｉｌ"), key("カタナ"), key("hangar 7")]
    text = "cota de Mithril, mi ｶﾀﾅ y el ＨＡＮＧＡＲ ７"
    assert found(keys, text, fold_width=True) == {"ｍｉｔｈｒｉｌ", "カタナ", "hangar 7"}
    assert found(keys, text, fold_width=False) == set()


# --- regex keys (classic) and literal keys (server, S-7) -------------------


def test_regex_key_acts_as_regex_only_when_allowed() -> None:
    text = "grité Drakon y luego dragon"
    assert found([key("/dra(g|k)on/i", regex=True)], text) == {"/dra(g|k)on/i"}
    assert found([key("/dra(g|k)on/", regex=False)], text) == set()
    assert found([key("/a+/", regex=False)], "escribí /a+/ en la consola") == {"/a+/"}
    assert found([key("/a+/", regex=False)], "aaaa") == set()


def test_regex_flags_decide_case() -> None:
    assert found([key("/Kael/", regex=True)], "kael llega") == set()
    assert found([key("/Kael/i", regex=True)], "kael llega") == {"/Kael/i"}


def test_regex_anchors_apply_per_message() -> None:
    matcher = KeyMatcher([key("/^Hola/", regex=True)])
    assert matcher.find_first(["adiós", "Hola, Kael"]) == {0: 1}
    assert matcher.find_first(["dije Hola"]) == {}


def test_invalid_regex_is_matched_literally_and_reported() -> None:
    matcher = KeyMatcher([key("/(sin cerrar/", regex=True)])
    assert matcher.warnings and "does not compile" in matcher.warnings[0]
    assert matcher.find("escribí /(sin cerrar/ aquí") == {0}


def test_regex_prefilter_handles_dotless_i() -> None:
    # re.IGNORECASE matches "i" with dotless "ı", which casefold keeps apart.
    assert re.search("kilim", "kılım", re.IGNORECASE)
    assert found([key("/kilim/i", regex=True)], "un kılım rojo") == {"/kilim/i"}


def test_regex_prefilter_leaves_non_ascii_out_of_case_insensitive_literals() -> None:
    # re.IGNORECASE lets dotless "ı" match "I", but casefold("ı") is "ı": a "kılım"
    # prefilter would hide "KILIM" from the regex.
    assert re.search("kılım", "KILIM", re.IGNORECASE)
    assert found([key("/kılım/i", regex=True)], "un KILIM rojo") == {"/kılım/i"}
    assert found([key("/İstanbul/i", regex=True)], "en istanbul") == {"/İstanbul/i"}


def test_a_key_never_spans_two_texts_even_across_the_separator() -> None:
    matcher = KeyMatcher([key("a\x00b", whole_words=False)])
    assert matcher.find_first(["a", "b"]) == {}
    assert matcher.find_first(["a\x00b"]) == {0: 0}


def test_required_literal_is_a_mandatory_piece_of_the_regex() -> None:
    assert required_literal(re.compile("ancla(s)? de plata", re.I)) == " de plata"
    assert required_literal(re.compile("dra(g|k)on")) == "dra"
    assert required_literal(re.compile("gato|perro")) is None
    assert required_literal(re.compile(r"\d+")) is None


def test_parse_regex_key_shapes() -> None:
    assert parse_regex_key("fuego") is None
    assert parse_regex_key("/x/q") is None  # not a regex flag
    compiled = parse_regex_key("/ab+c/gi")
    assert compiled is not None and compiled.flags & re.IGNORECASE


_PARTS = st.sampled_from(list("abcio ıIKß日本é.-") + ["e\u0301"])
_PIECES = st.sampled_from(["a", "b", "ca", "io", "K", "ß", "日本", " ", "(a|b)", "c?", "i+", r"\b", "[ab]", ".", "^", "$"])


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(_PIECES, min_size=1, max_size=5),
    flags=st.sampled_from(["", "i"]),
    texts=st.lists(st.lists(_PARTS, max_size=12).map("".join), min_size=1, max_size=4),
)
def test_regex_prefilter_never_changes_what_a_regex_matches(pieces: list[str], flags: str, texts: list[str]) -> None:
    pattern = "".join(pieces)
    regex = parse_regex_key(f"/{pattern}/{flags}")
    assert regex is not None
    expected = next(
        (i for i, text in enumerate(texts) if regex.search(unicodedata.normalize("NFC", text))), None
    )
    got = KeyMatcher([key(f"/{pattern}/{flags}", regex=True)]).find_first(texts)
    assert got.get(0) == expected


def _naive_first(keys: list[KeyPattern], texts: list[str], fold_width: bool) -> dict[int, int]:
    first: dict[int, int] = {}
    for index, pattern in enumerate(keys):
        needle = text_fold(pattern.text.strip(), casefold=not pattern.case_sensitive, fold_width=fold_width)
        if not needle:
            continue
        for position, raw in enumerate(texts):
            text = text_fold(raw, casefold=not pattern.case_sensitive, fold_width=fold_width)
            start = text.find(needle)
            while start != -1:
                end = start + len(needle)
                ok = not pattern.whole_words or (
                    not (is_word_char(needle[0]) and start > 0 and is_word_char(text[start - 1]))
                    and not (is_word_char(needle[-1]) and end < len(text) and is_word_char(text[end]))
                )
                if ok:
                    break
                start = text.find(needle, start + 1)
            if start != -1:
                first[index] = position
                break
    return first


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(
        st.builds(
            KeyPattern,
            text=st.text(st.sampled_from(list("ab AB.é日")), min_size=1, max_size=4),
            case_sensitive=st.booleans(),
            whole_words=st.booleans(),
        ),
        min_size=1,
        max_size=6,
    ),
    texts=st.lists(st.text(st.sampled_from(list("ab AB.é日x\x00")), max_size=15), max_size=4),
    fold_width=st.booleans(),
)
def test_automaton_agrees_with_a_naive_scan(keys: list[KeyPattern], texts: list[str], fold_width: bool) -> None:
    assert KeyMatcher(keys, fold_width=fold_width).find_first(texts) == _naive_first(keys, texts, fold_width)


def test_find_first_reports_the_newest_text_and_never_spans_two_texts() -> None:
    matcher = KeyMatcher([key("lobo"), key("puente"), key("viejo ahora")])
    texts = ["crucemos el puente viejo", "ahora", "un lobo aúlla", "otro lobo"]
    # "viejo" ends one text and "ahora" starts the next: key 2 is not found.
    assert matcher.find_first(texts) == {0: 2, 1: 0}


def test_duplicate_keys_of_different_entries_are_each_reported() -> None:
    matcher = KeyMatcher([key("cuerno"), key("Cuerno"), key("cuerno", whole_words=False)])
    assert matcher.find("el cuerno suena") == {0, 1, 2}


def test_many_keys_compile_into_one_matcher() -> None:
    keys = [key(f"clave{n}") for n in range(5000)]
    matcher = KeyMatcher(keys)
    assert matcher.find("aquí clave4999 y clave17 pero no clave50000") == {4999, 17}


# --- caching -----------------------------------------------------------------


def test_compile_cache_reuses_until_the_book_version_changes() -> None:
    cache: CompileCache[KeyMatcher] = CompileCache(maxsize=2)
    builds: list[int] = []

    def build(version: int) -> KeyMatcher:
        builds.append(version)
        return KeyMatcher([key("faro")])

    book = Book(id="b1", name="Puertos", version=3, entries=(Entry(id="e1", keys=("faro",)),))
    first = cache.get(book_set_key([book], "classic"), lambda: build(3))
    again = cache.get(book_set_key([book], "classic"), lambda: build(3))
    edited = Book(id="b1", name="Puertos", version=4, entries=(Entry(id="e1", keys=("faro", "luz")),))
    cache.get(book_set_key([edited], "classic"), lambda: build(4))
    assert first is again and builds == [3, 4]


def test_unversioned_books_are_keyed_by_content() -> None:
    one = Book(id="b", name="B", entries=(Entry(id="e1", keys=("faro",)),))
    same = Book(id="b", name="B", entries=(Entry(id="e1", keys=("faro",)),))
    other = Book(id="b", name="B", entries=(Entry(id="e1", keys=("luz",)),))
    assert book_set_key([one]) == book_set_key([same]) != book_set_key([other])


def test_compile_cache_evicts_least_recently_used() -> None:
    cache: CompileCache[int] = CompileCache(maxsize=2)
    cache.get("a", lambda: 1)
    cache.get("b", lambda: 2)
    cache.get("a", lambda: 99)  # hit: "a" becomes the most recent
    cache.get("c", lambda: 3)  # evicts "b"
    assert cache.get("a", lambda: 98) == 1
    assert cache.get("b", lambda: 20) == 20


@pytest.mark.parametrize(("ch", "word"), [("a", True), ("7", True), ("_", True), ("é", True), ("日", False), (" ", False), ("-", False)])
def test_word_characters(ch: str, word: bool) -> None:
    assert is_word_char(ch) is word


def test_the_text_caches_stay_bounded() -> None:
    from retrieval.engine.matching import TextCache

    cache: TextCache[str] = TextCache(limit_chars=100)
    for n in range(50):
        cache.put(f"Mensaje {n:02d} ÁÉ", f"value {n}")
    assert cache._chars <= 100
    assert cache.get("Mensaje 49 ÁÉ") == "value 49"


def test_remembered_keys_give_the_same_answer_as_a_fresh_scan() -> None:
    """A text seen before is answered from memory; the answer must not change with that."""
    keys = [KeyPattern(text="fuego"), KeyPattern(text="agua"), KeyPattern(text="/ti(e|a)rra/i", regex=True)]
    texts = ["El fuego y el agua.", "Nada aquí.", "La TIERRA tiembla; fuego otra vez."]
    fresh = KeyMatcher(keys).find_first(texts)
    warm = KeyMatcher(keys)
    warm.find_first(texts[1:])  # the last two texts are now remembered, the first is not
    assert warm.find_first(texts) == fresh == {0: 0, 1: 0, 2: 2}
    # Order still decides "first": newest-first input gives the distance back.
    assert warm.find_first(list(reversed(texts))) == {0: 0, 1: 2, 2: 0}
