"""The server profile, rule by rule (SPEC §3, S-3 .. S-13)."""
from __future__ import annotations

from typing import Any

import pytest

from retrieval.engine.server import channel_check, server_assemble
from retrieval.engine.tokenizers import tokenizer_by_name
from retrieval.engine.values import Book, BookSettings, Channel, Entry, Message, Names, Selection, TurnRequest

GENERAL = Channel(id="general")


def entry(entry_id: str, *keys: str, content: str | None = None, **fields: Any) -> Entry:
    fields.setdefault("scan_depth", 4)
    return Entry(id=entry_id, keys=keys, content=content or f"Lore of {entry_id}.", **fields)


def book(name: str, *entries: Entry, scope: str = "server", active: bool = True, channels: tuple[str, ...] = ()) -> Book:
    return Book(
        id=name,
        name=name,
        scope=scope,  # type: ignore[arg-type]
        entries=entries,
        settings=BookSettings(active=active, channels=channels),
    )


def chat(*texts: str) -> tuple[Message, ...]:
    count = len(texts)
    return tuple(
        Message(role="user" if (count - 1 - n) % 2 == 0 else "assistant", text=text) for n, text in enumerate(texts)
    )


def run(books: list[Book] | Book, messages: tuple[Message, ...], *, channel: Channel | None = GENERAL) -> Selection:
    request = TurnRequest(
        profile="server",
        books=tuple(books) if isinstance(books, list) else (books,),
        chat=messages,
        names=Names(user="Ana", char="Kael"),
        channel=channel,
        seed="guild-1",
    )
    return server_assemble(request, tokenizer=tokenizer_by_name("ceil-chars-4"))


def slot(selection: Selection, name: str) -> list[str]:
    return [i.entry for i in selection.injections if i.slot == name]


def outcome(selection: Selection, entry_id: str) -> str:
    return next(r.outcome for r in selection.request_log if r.entry == entry_id)


def detail(selection: Selection, entry_id: str) -> str:
    return next(r.detail for r in selection.request_log if r.entry == entry_id)


def test_s3_matching_ignores_case_and_width_forms() -> None:
    orion = book(
        "Orión",
        entry("e1", "Nebulosa Carmesí"),
        entry("e2", "ｍｉｔｈｒｉｌ"),
        entry("e3", "カタナ"),
        entry("e4", "hangar 7"),
        entry("e5", "oricalco"),
    )
    selection = run(orion, chat("¡la NEBULOSA CARMESÍ!", "cota de Mithril", "mi ｶﾀﾅ", "el ＨＡＮＧＡＲ ７"))
    assert slot(selection, "recent") == ["e1", "e2", "e3", "e4"]
    assert outcome(selection, "e5") == "not_matched"


def test_s3_case_sensitive_flags_from_imports_do_not_apply() -> None:
    selection = run(book("B", entry("e", "Kael", case_sensitive=True)), chat("kael llega"))
    assert slot(selection, "recent") == ["e"]


def test_s4_blank_keywords_are_always_on_in_the_system_slot() -> None:
    orion = book("Orión", entry("k0", order=5), entry("k1", "muelle 3", order=1), entry("k2", "motín"))
    selection = run(orion, chat("atracando", "al muelle 3"))
    assert [(i.entry, i.slot) for i in selection.injections] == [("k0", "system"), ("k1", "recent")]
    assert outcome(selection, "k2") == "not_matched"


def test_s5_secondary_logic_any_all_none_less_than_all() -> None:
    modes = ["and_any", "and_all", "not_any", "not_all"]
    ingenieria = book(
        "Ingeniería",
        *[entry(mode, "reactor", secondary_keys=("fuga", "alarma"), secondary_logic=mode, order=n) for n, mode in enumerate(modes)],
    )
    selection = run(ingenieria, chat("informe", "el reactor tiene una fuga"))
    assert slot(selection, "recent") == ["and_any", "not_all"]
    assert outcome(selection, "and_all") == outcome(selection, "not_any") == "secondary_failed"


@pytest.mark.parametrize(
    ("message", "passing"),
    [
        ("el reactor", ["not_any", "not_all"]),
        ("el reactor: fuga y alarma", ["and_any", "and_all"]),
    ],
)
def test_s5_secondary_logic_truth_table(message: str, passing: list[str]) -> None:
    modes = ["and_any", "and_all", "not_any", "not_all"]
    ingenieria = book(
        "Ingeniería",
        *[entry(mode, "reactor", secondary_keys=("fuga", "alarma"), secondary_logic=mode, order=n) for n, mode in enumerate(modes)],
    )
    assert slot(run(ingenieria, chat(message)), "recent") == passing


def test_s5_messages_to_search_counts_every_speaker() -> None:
    cantera = book("Cantera", *[entry(f"d{n}", "fósil", scan_depth=n, order=n) for n in (1, 2, 3)])
    selection = run(cantera, (Message(role="user", name="Ana", text="un fósil"), Message(role="assistant", text="¡vaya!"),
                              Message(role="user", name="Bruno", text="¿seguimos?")))
    assert slot(selection, "recent") == ["d3"]


def test_s5_lower_insertion_numbers_appear_first_in_each_slot() -> None:
    orion = book(
        "Orión",
        entry("k_a", "radar", order=30),
        entry("s_a", order=20),
        entry("k_c", "escudo", order=10),
        entry("s_b", order=3),
        entry("k_b", "piloto", order=5),
    )
    selection = run(orion, chat("¿listos?", "el piloto pide el radar y el escudo"))
    assert [i.entry for i in selection.injections] == ["s_b", "s_a", "k_b", "k_c", "k_a"]


def test_s6_probability_zero_blocks_even_keywordless_and_null_means_100() -> None:
    anomalias = book(
        "Anomalías",
        entry("p0", probability=0, order=1),
        entry("pn", probability=None, order=2),
        entry("pk0", "anomalía", probability=0, order=3),
        entry("pk100", "anomalía", probability=100, order=4),
    )
    selection = run(anomalias, chat("sensores", "hay una anomalía"))
    assert slot(selection, "system") == ["pn"] and slot(selection, "recent") == ["pk100"]
    assert outcome(selection, "p0") == outcome(selection, "pk0") == "probability"


def test_s8_keywordless_entry_below_100_percent_is_probability_activated_near_recent_turns() -> None:
    many = book("Azar", *[entry(f"r{n}", probability=50, order=n) for n in range(200)])
    selection = run(many, chat("hola"))
    assert slot(selection, "system") == []
    assert 60 <= len(slot(selection, "recent")) <= 140
    assert {outcome(selection, f"r{n}") for n in range(200)} == {"injected", "probability"}


def test_s7_regex_shaped_keys_are_literal() -> None:
    consola = book("Consola", entry("r1", "/a+/", order=1), entry("r2", "/dra(g|k)on/", order=2))
    selection = run(consola, chat("lista", "escribí /a+/ y luego aaaa, dragon y drakon"))
    assert slot(selection, "recent") == ["r1"] and outcome(selection, "r2") == "not_matched"


def test_s8_placement_groups_keep_before_and_after_persona() -> None:
    orion = book(
        "Orión",
        entry("a_after", order=1),
        entry("b_before", order=9, placement="before_persona"),
        entry("c_after", "radar", order=2),
        entry("d_before", "radar", order=20, placement="before_persona"),
    )
    selection = run(orion, chat("el radar"))
    assert [(i.entry, i.slot, i.placement) for i in selection.injections] == [
        ("b_before", "system", "before_persona"),
        ("a_after", "system", "after_persona"),
        ("d_before", "recent", "before_persona"),
        ("c_after", "recent", "after_persona"),
    ]


def test_s8_system_slot_text_is_system_role() -> None:
    selection = run(book("B", entry("s", role="assistant")), chat("hola"))
    assert selection.injections[0].role == "system"


def test_s9_one_8000_character_budget_always_on_first_skip_and_continue() -> None:
    carguero = book(
        "Carguero",
        entry("s1", content="s" * 3000, order=50),
        entry("r1", "carguero", content="a" * 4000, order=1),
        entry("r2", "carguero", content="b" * 2000, order=2),
        entry("r3", "carguero", content="c" * 900, order=3),
    )
    selection = run(carguero, chat("tráfico", "un carguero"))
    assert slot(selection, "system") == ["s1"] and slot(selection, "recent") == ["r1", "r3"]
    assert outcome(selection, "r2") == "skipped_size"
    assert "7000 of the 8,000-character budget" in detail(selection, "r2")
    assert sum(len(i.content) for i in selection.injections) == 7900


def test_s9_budget_counts_text_after_macros() -> None:
    # 7,998 characters as stored; "{{user}}" (8) becomes "Ana" (3): 7,993 fit.
    selection = run(book("B", entry("m", content="x" * 7990 + "{{user}}")), chat("hola"))
    assert slot(selection, "system") == ["m"] and len(selection.injections[0].content) == 7993


def test_s10_name_macros_replaced_other_macros_kept() -> None:
    muelle = book("Muelle", entry("m1", content="{{char}} vigila a {{User}}. {{ bot }} no duerme. {{random:a,b}} {{#if x}}y{{/if}}"))
    selection = run(muelle, chat("¿quién vigila?"))
    assert selection.injections[0].content == "Kael vigila a Ana. Kael no duerme. {{random:a,b}} {{#if x}}y{{/if}}"


def test_s11_collection_channels_restrict_all_its_entries() -> None:
    puerto = book("Puerto", entry("c1"), entry("c2", "grúa"), channels=("rol-puerto",))
    general = book("General", entry("g1"), entry("g2", "grúa"))
    selection = run([puerto, general], chat("una grúa cayó"), channel=Channel(id="taberna"))
    assert slot(selection, "system") == ["g1"] and slot(selection, "recent") == ["g2"]
    assert outcome(selection, "c1") == outcome(selection, "c2") == "channel"
    in_port = run([puerto, general], chat("una grúa cayó"), channel=Channel(id="rol-puerto"))
    assert slot(in_port, "system") == ["c1", "g1"]


def test_s11_persona_entries_keep_their_own_channels() -> None:
    kael = book(
        "Kael",
        entry("e1", channels=("rol-puerto",)),
        entry("e2", channels=()),
        entry("e3", "contrabando", channels=("taberna",)),
        entry("e4", "contrabando", channels=("rol-puerto", "hangar")),
        scope="persona",
    )
    selection = run(kael, chat("¿contrabando?"), channel=Channel(id="taberna"))
    assert slot(selection, "system") == ["e2"] and slot(selection, "recent") == ["e3"]
    assert outcome(selection, "e1") == outcome(selection, "e4") == "channel"


def test_s11_threads_follow_their_parent_channel() -> None:
    puerto = book("Puerto", entry("p1"), channels=("rol-puerto",))
    hilo = Channel(id="hilo-tormenta", parent="rol-puerto")
    assert slot(run(puerto, chat("hola"), channel=hilo), "system") == ["p1"]
    assert slot(run(book("Hilo", entry("h1"), channels=("hilo-tormenta",)), chat("hola"), channel=hilo), "system") == []


def test_s11_restricted_entries_do_not_apply_without_a_channel() -> None:
    selection = run(book("Puerto", entry("p1"), channels=("rol-puerto",)), chat("hola"), channel=None)
    assert selection.injections == () and "names no channel" in detail(selection, "p1")


def test_s12_collection_toggle_removes_entries_and_restores_them_as_they_were() -> None:
    entries = (entry("a1"), entry("a2", "cartas"), entry("a3", "cartas", enabled=False))
    off = run(book("Archivo", *entries, active=False), chat("¿cartas?"))
    assert off.injections == ()
    assert {outcome(off, e) for e in ("a1", "a2", "a3")} == {"collection_off"}
    on = run(book("Archivo", *entries, active=True), chat("¿cartas?"))
    assert [i.entry for i in on.injections] == ["a1", "a2"] and outcome(on, "a3") == "disabled"


def test_s13_unresolved_legacy_channel_counts_as_all_channels_and_is_flagged() -> None:
    kael = book("Kael", entry("l1", channels=("#taberna-vieja",)), scope="persona")
    selection = run(kael, chat("hola"), channel=Channel(id="hangar"))
    assert slot(selection, "system") == ["l1"]
    assert "unresolved legacy channel #taberna-vieja" in detail(selection, "l1")


def test_channel_check_combines_collection_and_entry_lists() -> None:
    assert channel_check(((), ()), GENERAL) == (True, "")
    assert channel_check((("general",), ("otro",)), GENERAL)[0] is False
    assert channel_check((("general",), ()), Channel(id="hilo", parent="general"))[0] is True


def test_server_content_keeps_at_at_lines_as_text() -> None:
    selection = run(book("B", entry("e", content="@@probability 0\nTexto.")), chat("hola"))
    assert selection.injections[0].content == "@@probability 0\nTexto."
