"""The classic profile, rule by rule (SPEC §2, C-1 .. C-15)."""
from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest

from retrieval.engine import assemble
from retrieval.engine.classic import classic_assemble
from retrieval.engine.keyword import probability_roll
from retrieval.engine.tokenizers import tokenizer_by_name
from retrieval.engine.values import (
    Book,
    BookSettings,
    Entry,
    Message,
    Names,
    Selection,
    TimedState,
    TurnRequest,
)

CEIL4 = tokenizer_by_name("ceil-chars-4")


def entry(entry_id: str, *keys: str, content: str | None = None, **fields: Any) -> Entry:
    return Entry(id=entry_id, keys=keys, content=content or f"Lore of {entry_id}.", **fields)


def book(name: str, *entries: Entry, version: int | None = None, **settings: Any) -> Book:
    settings.setdefault("scan_depth", 4)
    settings.setdefault("token_budget", 1000)
    return Book(id=name, name=name, entries=entries, settings=BookSettings(**settings), version=version)


def chat(*texts: str) -> tuple[Message, ...]:
    """Alternating messages, the last one from the user (so the first is the greeting when odd)."""
    count = len(texts)
    return tuple(
        Message(role="user" if (count - 1 - n) % 2 == 0 else "assistant", name="", text=text)
        for n, text in enumerate(texts)
    )


def run(
    books: list[Book] | Book,
    messages: tuple[Message, ...],
    *,
    tokenizer: str = "ceil-chars-4",
    state: TimedState | None = None,
    seed: str = "chat-1",
    names: Names | None = None,
) -> Selection:
    request = TurnRequest(
        profile="classic",
        books=tuple(books) if isinstance(books, list) else (books,),
        chat=messages,
        names=names or Names(user="Ana", char="Kael"),
        seed=seed,
        state=state or TimedState(),
    )
    return classic_assemble(request, tokenizer=tokenizer_by_name(tokenizer))


def ids(selection: Selection) -> list[str]:
    return [injection.entry for injection in selection.injections]


def outcome(selection: Selection, entry_id: str) -> str:
    return next(r.outcome for r in selection.request_log if r.entry == entry_id)


def record(selection: Selection, entry_id: str) -> Any:
    return next(r for r in selection.request_log if r.entry == entry_id)


def test_c1_attached_books_are_one_group_placed_together() -> None:
    puertos = book("Puertos", entry("p1", "faro", order=200))
    mareas = book("Mareas", entry("m1", "ceniza", order=300), entry("m2", "marea", order=100))
    selection = run([puertos, mareas], chat("hola", "Ceniza, marea y faro"))
    assert ids(selection) == ["m1", "p1", "m2"]


def test_c2_scan_depth_counts_messages_of_both_sides() -> None:
    costa = book("Costa", entry("e1", "niebla"), entry("e2", "lobo"), entry("e3", "puente"), scan_depth=2)
    selection = run(costa, chat("la niebla", "un lobo", "el puente"))
    assert ids(selection) == ["e2", "e3"] and outcome(selection, "e1") == "not_matched"


def test_c2_scan_depth_zero_scans_nothing_and_entry_depth_overrides_the_book() -> None:
    costa = book(
        "Costa",
        entry("e1", "puente"),
        entry("e2", "niebla", scan_depth=3),
        entry("e3", "eclipse", constant=True),
        scan_depth=0,
    )
    selection = run(costa, chat("la niebla", "un lobo", "el puente"))
    assert ids(selection) == ["e2", "e3"]


def test_c3_the_highest_budget_among_attached_books_wins() -> None:
    norte = book("Norte", entry("n1", "glaciar", content="x" * 240, priority=30), token_budget=100)
    sur = book("Sur", entry("s1", "palmera", content="y" * 240, priority=10), token_budget=200)
    sin = book("Sin", entry("z1", "foca", content="z" * 40, priority=20), token_budget=None)
    selection = run([norte, sur, sin], chat("glaciar, palmera y foca"))
    # 60 + 60 + 10 = 130 tokens: over Norte's 100, within Sur's 200; Sin sets no budget.
    assert sorted(ids(selection)) == ["n1", "s1", "z1"]


def test_c3_a_book_without_budget_does_not_lift_an_explicit_one() -> None:
    norte = book("Norte", entry("n1", "glaciar", content="x" * 600), token_budget=100)
    sin = book("Sin", entry("z1", "foca"), token_budget=None)
    assert outcome(run([norte, sin], chat("glaciar")), "n1") == "over_budget"


def _chain(recursive: bool) -> Book:
    links = ["ancla de plata", "fragua de Vania", "pozo Hondo", "ciudad de Lumbre", "trono de vidrio"]
    entries = [
        entry(f"k{n + 1}", key, content=f"Texto sobre {key}." + (f" Lleva a {links[n + 1]}." if n + 1 < len(links) else ""),
              order=500 - n * 100)
        for n, key in enumerate(links)
    ]
    return book("Cadena", *entries, recursive=recursive)


def test_c4_recursion_off_never_rescans_activated_content() -> None:
    selection = run(_chain(False), chat("hola", "Encontré un ancla de plata"))
    assert ids(selection) == ["k1"]
    assert outcome(selection, "k2") == "not_matched"
    assert "recursive scanning off" in record(selection, "k2").detail


def test_c4_recursion_makes_three_passes_after_the_chat_scan() -> None:
    selection = run(_chain(True), chat("hola", "Encontré un ancla de plata"))
    assert ids(selection) == ["k1", "k2", "k3", "k4"]
    k5 = record(selection, "k5")
    assert k5.outcome == "recursion" and k5.via_entry == "k4"
    assert record(selection, "k2").via_entry == "k1"


def test_c4_recursion_reaches_other_books_and_follows_the_source_book_setting() -> None:
    lore = book("Lore", entry("a", "Orden", content="La Orden guarda la Torre de Sal."), recursive=True)
    towers = book("Torres", entry("b", "Torre de Sal", content="La torre tiene un faro."), recursive=False)
    lights = book("Luces", entry("c", "faro"), recursive=True)
    selection = run([lore, towers, lights], chat("la Orden llegó"))
    # a (recursive book) activates b in another book; b's own book does not recurse, so c stays out.
    assert sorted(ids(selection)) == ["a", "b"] and outcome(selection, "c") == "not_matched"


def test_c4_recursed_lore_can_satisfy_a_secondary_key() -> None:
    lore = book(
        "Lore",
        entry("a", "espada", content="La espada está rota."),
        entry("b", "espada", secondary_keys=("rota",)),
        recursive=True,
    )
    assert sorted(ids(run(lore, chat("mi espada")))) == ["a", "b"]


def test_c5_any_primary_key_activates_and_content_is_injected_unchanged() -> None:
    criaturas = book("Criaturas", entry("d1", "dragón", "wyrm", "竜", content="Los dragones comen azufre."))
    selection = run(criaturas, chat("Vi un wyrm"))
    assert [i.content for i in selection.injections] == ["Los dragones comen azufre."]
    assert record(selection, "d1").key == "wyrm"


def test_c6_secondary_logic_in_all_four_modes() -> None:
    modes = ["and_any", "and_all", "not_any", "not_all"]
    armeria = book(
        "Armería",
        *[entry(mode, "reactor", secondary_keys=("fuga", "alarma"), secondary_logic=mode) for mode in modes],
    )
    selection = run(armeria, chat("el reactor tiene una fuga"))
    assert sorted(ids(selection)) == ["and_any", "not_all"]
    assert outcome(selection, "and_all") == outcome(selection, "not_any") == "secondary_failed"
    assert "1 of 2 secondary keys" in record(selection, "and_all").detail


@pytest.mark.parametrize(
    ("message", "passing"),
    [
        ("el reactor", {"not_any", "not_all"}),
        ("el reactor tiene una fuga", {"and_any", "not_all"}),
        ("el reactor: fuga y alarma", {"and_any", "and_all"}),
    ],
)
def test_c6_secondary_logic_truth_table(message: str, passing: set[str]) -> None:
    modes = ["and_any", "and_all", "not_any", "not_all"]
    armeria = book(
        "Armería",
        *[entry(mode, "reactor", secondary_keys=("fuga", "alarma"), secondary_logic=mode) for mode in modes],
    )
    selection = run(armeria, chat(message))
    assert set(ids(selection)) == passing
    assert {outcome(selection, m) for m in modes if m not in passing} <= {"secondary_failed"}


def test_c6_a_secondary_key_alone_never_activates() -> None:
    selection = run(book("B", entry("s3", "yelmo", secondary_keys=("espada",))), chat("mi espada"))
    assert ids(selection) == [] and outcome(selection, "s3") == "not_matched"


def test_c7_constant_entries_skip_matching_and_disabled_entries_never_fire() -> None:
    brasa = book(
        "Brasa",
        entry("k1", "eclipse", constant=True, order=100),
        entry("k2", "piratas", enabled=False),
        entry("k3", constant=True, enabled=False),
        entry("k4", "muelle", order=200),
    )
    selection = run(brasa, chat("los piratas atacaron el muelle"))
    assert ids(selection) == ["k4", "k1"]
    assert outcome(selection, "k2") == outcome(selection, "k3") == "disabled"


def test_c7_keywordless_entry_that_is_not_constant_never_fires() -> None:
    selection = run(book("B", entry("k0")), chat("lo que sea"))
    assert ids(selection) == [] and outcome(selection, "k0") == "not_matched"


def test_c8_whole_words_per_entry_and_per_book() -> None:
    guerra = book("Guerra", entry("w1", "fuego"), entry("w2", "fuego", whole_words=False), entry("w3", "fogueo"))
    selection = run(guerra, chat("balas de fogueo junto al cortafuegos"))
    assert sorted(ids(selection)) == ["w2", "w3"]
    assert sorted(ids(run(guerra, chat("los fuegos del puerto")))) == ["w2"]  # a word that only starts with the key
    partial = book("Parcial", entry("w4", "fuego"), whole_words=False)
    assert ids(run(partial, chat("el cortafuegos"))) == ["w4"]


def test_c8_case_sensitivity_per_book_and_entry() -> None:
    strict = book("Estricto", entry("c1", "Ceniza"), entry("c2", "Ceniza", case_sensitive=False), case_sensitive=True)
    assert ids(run(strict, chat("la ceniza cae"))) == ["c2"]


def test_c9_the_title_never_reaches_the_model_nor_decides_placement() -> None:
    gobierno = book(
        "Gobierno",
        entry("n2", "faro", title="AA Faro", order=100, content="El faro guía."),
        entry("n1", "gobernador", title="ZZ nota interna: no revelar", order=200, content="Un autómata."),
    )
    selection = run(gobierno, chat("el gobernador junto al faro"))
    assert ids(selection) == ["n1", "n2"]
    assert all("nota interna" not in i.content and "AA" not in i.content for i in selection.injections)


def test_c10_lowest_priority_drops_first_whatever_its_order() -> None:
    mar = book(
        "Mar",
        entry("p1", "tormenta", content="a" * 160, order=300, priority=10),
        entry("p2", "naufragio", content="b" * 160, order=200, priority=30),
        entry("p3", "sirena", content="c" * 160, order=100, priority=20),
        token_budget=100,
    )
    selection = run(mar, chat("tormenta, naufragio, sirena"))
    assert ids(selection) == ["p2", "p3"]
    dropped = record(selection, "p1")
    assert dropped.outcome == "over_budget" and "100-token budget" in dropped.detail


def test_c10_eviction_drops_lowest_priorities_until_the_rest_fits() -> None:
    # 90 + 20 + 5 = 115 > 100: C (priority 10) goes first, still 110, then B (20) goes.
    mar = book(
        "Mar",
        entry("A", "a", content="a" * 360, priority=30),
        entry("B", "b", content="b" * 80, priority=20),
        entry("C", "c", content="c" * 20, priority=10),
        token_budget=100,
    )
    selection = run(mar, chat("a b c"))
    assert ids(selection) == ["A"]
    assert outcome(selection, "B") == outcome(selection, "C") == "over_budget"


def test_c10_equal_priorities_drop_the_later_placed_entry_first() -> None:
    mar = book(
        "Mar",
        entry("hi", "a", content="a" * 240, order=300),
        entry("lo", "b", content="b" * 240, order=100),
        token_budget=100,
    )
    assert ids(run(mar, chat("a b"))) == ["hi"]


def test_c11_order_then_priority_then_entry_id() -> None:
    mercado = book(
        "Mercado",
        entry("t10", "especias", order=100, priority=5),
        entry("t5", "perlas", order=50, priority=99),
        entry("t9", "telas", order=100, priority=5),
        entry("t4", "mercado", order=250, priority=1),
        entry("t2", "sedas", order=100, priority=9),
    )
    selection = run(mercado, chat("mercado con especias, perlas, telas y sedas"))
    assert ids(selection) == ["t4", "t2", "t9", "t10", "t5"]  # t9 before t10: ids compare as numbers


def test_c12_one_lorebook_slot_one_message_per_entry_with_its_role() -> None:
    taberna = book(
        "Taberna",
        entry("m1", "taberna", role="system", order=300),
        entry("m2", "taberna", role="user", order=200, placement="before_persona"),
        entry("m3", "taberna", role="assistant", order=100, placement="after_persona"),
    )
    selection = run(taberna, chat("entremos en la taberna"))
    assert [(i.entry, i.slot, i.role) for i in selection.injections] == [
        ("m1", "lorebook", "system"),
        ("m2", "lorebook", "user"),
        ("m3", "lorebook", "assistant"),
    ]


# --- C-13 decorators -----------------------------------------------------------


def test_c13_probability_roll_is_stable_within_a_turn_and_changes_between_turns() -> None:
    many = book("Muchas", *[entry(f"e{n}", "pantano", content=f"@@probability 50\nLore {n}.") for n in range(400)])
    messages = chat("cruzamos el pantano")
    first = run(many, messages, seed="chat-9")
    random.seed(12345)  # Python's random state plays no part
    again = run(many, messages, seed="chat-9")
    assert ids(first) == ids(again)
    assert 150 <= len(first.injections) <= 250
    other_turn = run(many, chat("hola", "otra vez", "cruzamos el pantano"), seed="chat-9")
    other_chat = run(many, messages, seed="chat-10")
    assert set(ids(other_turn)) != set(ids(first)) and set(ids(other_chat)) != set(ids(first))
    assert all(outcome(first, f"e{n}") in {"injected", "probability"} for n in range(400))


def test_c13_probability_roll_is_a_pure_function_of_chat_turn_and_entry() -> None:
    assert probability_roll("chat-1", 3, "e1") == probability_roll("chat-1", 3, "e1")
    assert 0 <= probability_roll("chat-1", 3, "e1") < 100
    assert probability_roll("chat-1", 3, "e1") != probability_roll("chat-1", 4, "e1")


def test_c13_probability_decorator_overrides_the_field_and_zero_never_injects() -> None:
    pantano = book(
        "Pantano",
        entry("d1", "pantano", content="@@probability 0\nNiebla.", probability=100),
        entry("d2", "pantano", content="@@probability 100\nBrea.", probability=0),
        entry("d3", "pantano", probability=0),
    )
    selection = run(pantano, chat("el pantano"))
    assert ids(selection) == ["d2"]
    assert outcome(selection, "d1") == outcome(selection, "d3") == "probability"
    assert selection.injections[0].content == "Brea."


def test_c13_scan_depth_decorator_widens_or_narrows_one_entry() -> None:
    cielo = book(
        "Cielo",
        entry("d1", "faro", content="@@scan_depth 3\nFaro lejano."),
        entry("d2", "faro"),
        entry("d3", "grulla", content="@@scan_depth 1\nGrullas cerca."),
        entry("d4", "grulla"),
        scan_depth=2,
    )
    selection = run(cielo, chat("mira el faro", "una grulla", "sigamos"))
    assert sorted(ids(selection)) == ["d1", "d4"]


def test_c13_order_priority_and_role_decorators_override_fields() -> None:
    volcan = book(
        "Volcán",
        entry("e1", "volcán", content="v" * 192, order=100, priority=50),
        entry("e2", "lava", content="@@priority 90\n@@order 900\n@@role assistant\n" + "l" * 160, order=1, priority=1),
        entry("e3", "ceniza", content="c" * 160, order=200, priority=40),
        token_budget=100,
    )
    selection = run(volcan, chat("volcán, lava y ceniza"))
    assert ids(selection) == ["e2", "e1"] and outcome(selection, "e3") == "over_budget"
    assert selection.injections[0].role == "assistant" and "@@" not in selection.injections[0].content


def _turns(book_: Book, chats: list[tuple[Message, ...]]) -> list[Selection]:
    state = TimedState()
    results = []
    for messages in chats:
        selection = run(book_, messages, state=state)
        state = selection.state
        results.append(selection)
    return results


def test_c13_activate_only_after_counts_chat_messages_from_n() -> None:
    espectros = book("Espectros", entry("a1", "espectros", content="@@activate_only_after 4\nTardíos."), entry("a2", "espectros"))
    three = run(espectros, chat("hola", "¿y?", "espectros"))
    four = run(espectros, chat("hola", "¿y?", "nada", "espectros"))
    assert ids(three) == ["a2"] and outcome(three, "a1") == "decorator"
    assert ids(four) == ["a1", "a2"]


def test_c13_activate_only_every_fires_on_multiples_of_n() -> None:
    mareas = book("Mareas", entry("v1", "marea", content="@@activate_only_every 3\nCíclica."))
    fired = [bool(run(mareas, chat(*(["x"] * (n - 1) + ["marea"]))).injections) for n in range(1, 10)]
    assert fired == [False, False, True, False, False, True, False, False, True]


def test_c13_keep_stays_active_after_its_first_match_and_state_carries() -> None:
    bruja = book("Bruja", entry("k1", "maldición", content="@@keep\nFija."), entry("k2", "maldición"), scan_depth=1)
    first, second, third = _turns(
        bruja,
        [chat("hola", "¿esa maldición?"), chat("hola", "¿esa maldición?", "no", "al mercado"),
         chat("hola", "¿esa maldición?", "no", "al mercado", "cerrado", "a la posada")],
    )
    assert ids(first) == ["k1", "k2"] and first.state.kept == {"k1"}
    assert ids(second) == ids(third) == ["k1"]
    assert outcome(second, "k2") == "not_matched"
    # Without the chat's state (another chat), keep has not started.
    assert ids(run(bruja, chat("hola", "al mercado"))) == []


def test_c13_dont_activate_after_match_fires_once() -> None:
    muralla = book("Muralla", entry("o1", "cuerno", content="@@dont_activate_after_match\nUna vez."), entry("o2", "cuerno"))
    first, second = _turns(muralla, [chat("escucha", "el cuerno"), chat("escucha", "el cuerno", "corren", "otra vez el cuerno")])
    assert ids(first) == ["o1", "o2"] and ids(second) == ["o2"]
    assert outcome(second, "o1") == "decorator" and "already fired" in record(second, "o1").detail


def test_c13_is_greeting_only_while_at_the_greeting() -> None:
    posada = book("Posada", entry("g1", "Cuervo Azul", content="@@is_greeting\nSopa gratis."), entry("g2", "Cuervo Azul"))
    greeting = (Message(role="assistant", text="Bienvenida al Cuervo Azul"),)
    later = greeting + chat("¿Cuervo Azul?", "por el cartel", "más del Cuervo Azul")
    assert ids(run(posada, greeting)) == ["g1", "g2"]
    assert ids(run(posada, later)) == ["g2"] and outcome(run(posada, later), "g1") == "decorator"


def test_c13_unknown_decorators_are_reported_not_fatal_and_not_sent() -> None:
    ranas = book("Ranas", entry("d3", "pantano", content="@@sticky 2\nLas ranas croan."))
    selection = run(ranas, chat("el pantano"))
    assert [i.content for i in selection.injections] == ["Las ranas croan."]
    assert any("unknown decorator @@sticky" in w for w in record(selection, "d3").warnings)
    assert any("@@sticky" in w for w in selection.warnings)


def test_c14_budget_counts_what_the_model_sees_with_the_models_tokenizer() -> None:
    prose = "international " * 30  # 420 characters, about 30 cl100k tokens
    libro = book("Libro", entry("big", "clave", content=f"@@role user\n{prose}"), token_budget=100)
    by_chars = run(libro, chat("la clave"), tokenizer="ceil-chars-4")
    by_model = run(libro, chat("la clave"), tokenizer="cl100k_base")
    assert outcome(by_chars, "big") == "over_budget"  # 105 counted by characters
    assert ids(by_model) == ["big"]
    assert by_model.injections[0].tokens == tokenizer_by_name("cl100k_base").count(prose)
    assert by_model.tokenizer == "cl100k_base" and not by_model.tokens_estimated


def test_c14_unknown_model_budget_is_labelled_an_estimate() -> None:
    selection = run(book("B", entry("e", "x")), chat("x"), tokenizer="estimate")
    assert selection.tokens_estimated


def test_c15_every_entry_of_every_book_gets_one_log_record_with_its_trigger() -> None:
    a = book("A", entry("a1", "faro"), entry("a2", "ámbar"), entry("a3", "x", enabled=False))
    b = book("B", entry("b1", "muelle"))
    selection = run([a, b], chat("¿ves el faro?", "sí, desde el muelle"))
    assert [(r.book, r.entry) for r in selection.request_log] == [("A", "a1"), ("A", "a2"), ("A", "a3"), ("B", "b1")]
    faro = record(selection, "a1")
    assert (faro.outcome, faro.key, faro.message) == ("injected", "faro", 0)
    assert record(selection, "b1").message == 1
    assert [r.outcome for r in selection.request_log] == ["injected", "not_matched", "disabled", "injected"]


def test_name_macros_are_replaced_in_what_the_model_sees() -> None:
    libro = book("Libro", entry("m", "muelle", content="{{char}} espera a {{user}} en el muelle. {{time}}"))
    selection = run(libro, chat("al muelle"), names=Names(user="Ana", char="Kael"))
    assert selection.injections[0].content == "Kael espera a Ana en el muelle. {{time}}"


def test_timed_state_is_an_immutable_value_in_and_out() -> None:
    bruja = book("Bruja", entry("k1", "maldición", content="@@keep\nFija."))
    start = TimedState()
    selection = run(bruja, chat("la maldición"), state=start)
    assert start == TimedState() and selection.state.to_dict() == {"kept": ["k1"]}
    assert TimedState.from_dict(selection.state.to_dict()) == selection.state


def test_a_new_book_version_is_compiled_again() -> None:
    old = book("Libro", entry("e", "faro"), version=1)
    new = book("Libro", entry("e", "muelle"), version=2)
    assert ids(run(old, chat("el muelle"))) == []
    assert ids(run(new, chat("el muelle"))) == ["e"]


def test_assemble_dispatches_on_the_profile() -> None:
    request = TurnRequest(profile="classic", books=(book("B", entry("e", "faro")),), chat=chat("el faro"))
    assert [i.entry for i in assemble(request, tokenizer=CEIL4).injections] == ["e"]


def test_the_engine_imports_no_django() -> None:
    code = (
        "import sys, retrieval.engine.classic, retrieval.engine.server, retrieval.engine.cases, retrieval.adapter.cli;"
        "assert not any(m == 'django' or m.startswith('django.') for m in sys.modules), 'django imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
