"""Machine translation, shaped like Dynabench's FLORES task: English sources translated into
German, French and Spanish (three directions), with up to three reference translations.

Each template pairs an English sentence with its translations in every target language;
slots (a person and their pronoun, a number, an object, a place) are filled from small
bilingual lexicons. Alternative wordings give several references. Round 1 holds short
present-tense sentences a word-by-word dictionary gets partly right; round 2 adds negation,
the past tense and relative clauses, where word order and agreement differ from English.
Names stay untranslated and pronouns follow the person, so the name and gender swaps of
the fairness axis apply to the sources.
"""

from __future__ import annotations

import random

from common import FEMALE, MALE, Row

ROWS_PER_DIRECTION = 28  # x 3 directions = 84 pairs per set
DIRECTIONS = ("en-de", "en-fr", "en-es")

# English word -> each language's word (the dictionary example model reads this table too:
# examples/models/translation_dictionary/lexicon.json is written from it).
OBJECTS = {
    "book": {"de": ["Buch"], "fr": ["livre"], "es": ["libro"]},
    "car": {"de": ["Auto", "Wagen"], "fr": ["voiture"], "es": ["coche", "carro"]},
    "house": {"de": ["Haus"], "fr": ["maison"], "es": ["casa"]},
    "letter": {"de": ["Brief"], "fr": ["lettre"], "es": ["carta"]},
    "bicycle": {"de": ["Fahrrad", "Rad"], "fr": ["vélo", "bicyclette"], "es": ["bicicleta"]},
    "table": {"de": ["Tisch"], "fr": ["table"], "es": ["mesa"]},
}
ARTICLES = {  # the definite article each object takes (accusative in German)
    "de": {"book": "das", "car": "das", "house": "das", "letter": "den", "bicycle": "das",
           "table": "den"},
    "fr": {"book": "le", "car": "la", "house": "la", "letter": "la", "bicycle": "le",
           "table": "la"},
    "es": {"book": "el", "car": "el", "house": "la", "letter": "la", "bicycle": "la",
           "table": "la"},
}  # fmt: skip
PLACES = {
    "the market": {"de": ["auf dem Markt"], "fr": ["au marché"], "es": ["en el mercado"]},
    "the station": {"de": ["am Bahnhof"], "fr": ["à la gare"], "es": ["en la estación"]},
    "the library": {"de": ["in der Bibliothek"], "fr": ["à la bibliothèque"],
                    "es": ["en la biblioteca"]},
    "school": {"de": ["in der Schule"], "fr": ["à l'école"], "es": ["en la escuela"]},
}  # fmt: skip
DESTINATIONS = {  # the same places as the goal of a movement
    "the market": {"de": "zum Markt", "fr": "au marché", "es": "al mercado"},
    "the station": {"de": "zum Bahnhof", "fr": "à la gare", "es": "a la estación"},
    "the library": {"de": "zur Bibliothek", "fr": "à la bibliothèque", "es": "a la biblioteca"},
    "school": {"de": "zur Schule", "fr": "à l'école", "es": "a la escuela"},
}
PRONOUNS = {"she": {"de": "sie", "fr": "elle", "es": "ella"},
            "he": {"de": "er", "fr": "il", "es": "él"}}  # fmt: skip
NUMBERS = {"two": {"de": "zwei", "fr": "deux", "es": "dos"},
           "three": {"de": "drei", "fr": "trois", "es": "tres"},
           "four": {"de": "vier", "fr": "quatre", "es": "cuatro"}}  # fmt: skip

# (English, {language: [templates, the first the main reference]}); slots in braces.
ROUND_ONE = [
    (
        "{name} sees the {obj}.",
        {
            "de": ["{name} sieht {art} {obj}."],
            "fr": ["{name} voit {art} {obj}."],
            "es": ["{name} ve {art} {obj}."],
        },
    ),
    (
        "{name} is at {place}.",
        {
            "de": ["{name} ist {place}."],
            "fr": ["{name} est {place}."],
            "es": ["{name} está {place}."],
        },
    ),
    (
        "Today {name} reads a book at {place}.",
        {
            "de": ["Heute liest {name} ein Buch {place}.", "{name} liest heute ein Buch {place}."],
            "fr": ["Aujourd'hui {name} lit un livre {place}."],
            "es": ["Hoy {name} lee un libro {place}.", "{name} lee hoy un libro {place}."],
        },
    ),
    (
        "{name} says that {pron} has {num} friends.",
        {
            "de": ["{name} sagt, dass {pron} {num} Freunde hat."],
            "fr": ["{name} dit qu'{pron} a {num} amis."],
            "es": [
                "{name} dice que tiene {num} amigos.",
                "{name} dice que {pron} tiene {num} amigos.",
            ],
        },
    ),
]
ROUND_TWO = [
    (
        "{name} did not find the {obj} at {place}.",
        {
            "de": ["{name} hat {art} {obj} {place} nicht gefunden.",
                   "{name} fand {art} {obj} {place} nicht."],
            "fr": ["{name} n'a pas trouvé {art} {obj} {place}."],
            "es": ["{name} no encontró {art} {obj} {place}."],
        },
    ),
    (
        "The {obj} that {name} bought yesterday was expensive.",
        {
            "de": ["{The} {obj}, {rel} {name} gestern gekauft hat, war teuer."],
            "fr": ["{The} {obj} que {name} a acheté hier était cher."],
            "es": ["{The} {obj} que {name} compró ayer era caro."],
        },
    ),
    (
        "Yesterday {name} wrote {num} letters because {pron} was bored.",
        {
            "de": ["Gestern schrieb {name} {num} Briefe, weil {pron} sich langweilte.",
                   "{name} hat gestern {num} Briefe geschrieben, weil {pron} sich langweilte."],
            "fr": ["Hier {name} a écrit {num} lettres parce qu'{pron} s'ennuyait."],
            "es": ["Ayer {name} escribió {num} cartas porque estaba {bored}."],
        },
    ),
    (
        "{name} never goes to {place} on foot.",
        {
            "de": ["{name} geht nie zu Fuß {dest}."],
            "fr": ["{name} ne va jamais {dest} à pied."],
            "es": ["{name} nunca va {dest} a pie."],
        },
    ),
]  # fmt: skip
_NOMINATIVE = {"das": "Das", "den": "Der", "le": "Le", "la": "La", "el": "El"}
_RELATIVE = {"das": "das", "den": "den"}


def build_translation(round_name: str, rng: random.Random) -> list[Row]:
    """84 sentence pairs: 28 per direction, templates of the round in turn."""
    templates = ROUND_ONE if round_name == "r1" else ROUND_TWO
    rows = []
    for direction in DIRECTIONS:
        lang = direction.split("-")[1]
        seen: set[str] = set()
        for i in range(ROWS_PER_DIRECTION):
            english, targets = templates[i % len(templates)]
            row = _row(english, targets[lang], lang, direction, rng)
            for _ in range(100):  # a set holds each source once (names make room)
                if row["sourceText"] not in seen:
                    break
                row = _row(english, targets[lang], lang, direction, rng)
            seen.add(row["sourceText"])
            rows.append(row)
    return rows


def _row(english: str, targets: list[str], lang: str, direction: str, rng: random.Random) -> Row:
    female = rng.random() < 0.5
    name = rng.choice(FEMALE if female else MALE)
    pron = "she" if female else "he"
    obj = rng.choice(sorted(OBJECTS))
    place = rng.choice(sorted(PLACES))
    num = rng.choice(sorted(NUMBERS))
    source = english.format(name=name, pron=pron, obj=obj, place=place, num=num)
    source = source[0].upper() + source[1:]
    words = OBJECTS[obj][lang]
    art = ARTICLES[lang][obj]
    references = []
    for template in targets:
        for word in words[:2]:
            text = template.format(
                name=name,
                pron=PRONOUNS[pron][lang],
                obj=word,
                art=art,
                The=_NOMINATIVE.get(art, art.capitalize()),
                rel=_RELATIVE.get(art, "das"),
                place=rng.choice(PLACES[place][lang]),
                num=NUMBERS[num][lang],
                dest=DESTINATIONS[place][lang],
                bored="aburrida" if female else "aburrido",
            )
            if text not in references:
                references.append(text[0].upper() + text[1:])
    references = references[:3]
    return {
        "sourceText": source,
        "sourceLanguage": "eng_Latn",
        "targetLanguage": {"de": "deu_Latn", "fr": "fra_Latn", "es": "spa_Latn"}[lang],
        "translatedText": references[0],
        "references": references[1:],
        "direction": direction,
        "gender": "female" if female else "male",
    }
