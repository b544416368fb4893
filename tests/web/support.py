"""What the page tests share: a world-info file to import, signed-in clients."""
from __future__ import annotations

import json
from typing import Any

from django.test import Client

PASSWORD = "a long pass phrase 42"

# Twelve usable places of one world (enough to publish, P-1), in Spanish, plus a duplicate and an
# empty entry (skipped, I-4) and a sticky timer (a setting the smart profile drops, I-4).
PLACES = [
    ("Varn", "La ciudad fluvial de Varn comercia sal por hierro cada primavera."),
    ("Puerto Ceniza", "Puerto Ceniza es un muelle de pescadores cubierto de hollín volcánico."),
    ("Bosque de Lira", "En el Bosque de Lira los árboles cantan cuando sopla el viento del norte."),
    ("Torre Gris", "La Torre Gris guarda los archivos de la orden de los cartógrafos."),
    ("Río Salobre", "El Río Salobre baja de las montañas con agua salada y peces ciegos."),
    ("Mercado Alto", "En el Mercado Alto se venden dragones de papel y mapas falsos."),
    ("Paso del Lobo", "El Paso del Lobo es el único camino seguro entre los dos reinos."),
    ("Isla Quieta", "La Isla Quieta no tiene pájaros; nadie sabe por qué callan allí."),
    ("Cueva Roja", "La Cueva Roja brilla de noche por los hongos que crecen en sus paredes."),
    ("Llanura Seca", "La Llanura Seca fue un mar hace mil años; aún se hallan conchas."),
    ("Fortaleza Vieja", "La Fortaleza Vieja resistió tres asedios y nunca abrió sus puertas."),
    ("Lago Espejo", "El Lago Espejo refleja el cielo de mañana, dicen los pescadores."),
]


def world_info(places: list[tuple[str, str]] = PLACES, *, extras: bool = True) -> bytes:
    entries: dict[str, Any] = {}
    rows = list(places)
    for i, (title, content) in enumerate(rows):
        entries[str(i)] = {"uid": i, "key": [title], "keysecondary": [], "comment": title, "content": content,
                           "constant": i == 0, "disable": False, "order": 100, "position": 0}
    if extras:
        n = len(rows)
        entries[str(n)] = {**entries["1"], "uid": n}  # the same lore again: skipped as a duplicate
        entries[str(n + 1)] = {"uid": n + 1, "key": ["nada"], "comment": "Vacía", "content": "", "disable": False}
        entries["2"]["sticky"] = 3
    return json.dumps({"name": "Mundo de Varn", "entries": entries}).encode()


def signed_in(user: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def with_password(user: Any) -> Any:
    user.set_password(PASSWORD)
    user.save(update_fields=["password"])
    return user
