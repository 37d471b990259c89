"""Hate-speech rows: a statement, whether it is hateful, and the group it targets."""

from __future__ import annotations

import random

from common import (
    DAYS,
    REL_F,
    REL_M,
    ROWS_PER_FILE,
    TOWNS,
    Maker,
    Row,
    cap,
    load_data,
    person,
    pick_balanced,
    relative,
)

_DATA = load_data("hate_speech")
GROUPS: dict[str, list[str]] = _DATA["groups"]
ANNOYANCES: list[str] = _DATA["annoyances"]
DEVICES: list[str] = _DATA["devices"]
PESTS: list[list[str]] = _DATA["pests"]
# round -> label -> [text, target] pairs; data/hate_speech.yaml explains the targets.
TEMPLATES: dict[str, dict[str, list[list[str]]]] = _DATA["templates"]
# Rows about no group still fill {g} / {G} / {g1} / {adj} with neutral words.
NO_GROUP = ["people", "a person", "local"]


def build_hate_speech(round_name: str, rng: random.Random) -> list[Row]:
    """The rows of one hate-speech round, half hateful and half not."""

    def maker(text: str, target: str) -> Maker:
        def make(rng: random.Random) -> Row:
            if target in ("*", "~"):
                pool = [g for g in GROUPS if target == "*" or g not in ("women", "men")]
                tgt = rng.choice(pool)
            else:
                tgt = target
            plural, single, adj = GROUPS.get(tgt, NO_GROUP)
            pest, place = rng.choice(PESTS)
            # "{name} ... {he} is {g1}": the person belongs to the group, so shares its gender.
            female = {"women": True, "men": False}.get(tgt) if "{g1}" in text else None
            p = person(rng, female)
            d = dict(
                g=plural,
                adj=adj,
                pest=pest,
                place=place,
                annoyance=rng.choice(ANNOYANCES),
                device=rng.choice(DEVICES),
                G=cap(plural),
                g1=single,
                name=p.first,
                he=p.he,
                him=p.him,
                his=p.his,
                rel=relative(rng),
                town=rng.choice(TOWNS),
                day=rng.choice(DAYS),
            )
            # Without {name}, {he}/{him} refer to the relative, whose gender must then agree.
            if "{rel}" in text and "{name}" not in text and ("{he}" in text or "{him}" in text):
                d["rel"] = rng.choice(REL_F if p.female else REL_M)
            return {"statement": cap(text.format(**d)), "target": tgt}

        return make

    makers = {lab: [maker(t, g) for t, g in ts] for lab, ts in TEMPLATES[round_name].items()}
    rows = pick_balanced(rng, makers, ROWS_PER_FILE, key=lambda r: r["statement"])
    return [{"statement": r["statement"], "label": r["label"], "target": r["target"]} for r in rows]
