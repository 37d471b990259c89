"""Sentiment rows: a statement about a movie, restaurant, product, trip or person."""

from __future__ import annotations

import random
from typing import Any

from common import (
    CITIES,
    DAYS,
    FEMALE,
    MALE,
    REL_F,
    ROWS_PER_FILE,
    Maker,
    Row,
    an,
    cap,
    load_data,
    person,
    pick_balanced,
    relative,
)

_DATA = load_data("sentiment")
TOPICS: dict[str, dict[str, list[str]]] = _DATA["topics"]
POS_ADJ: list[str] = _DATA["positive_adjectives"]
NEG_ADJ: list[str] = _DATA["negative_adjectives"]
SUBJECTS: list[str] = _DATA["subjects"]
WHEN: list[str] = _DATA["when"]
TEMPLATES: dict[str, dict[str, list[str]]] = _DATA["templates"]


def fill(rng: random.Random) -> dict[str, Any]:
    """Values for every placeholder a sentiment template may use, for a random topic."""
    topic = rng.choice(list(TOPICS))
    v = TOPICS[topic]
    k = rng.randrange(len(v["did"]))
    if rng.random() < 0.45:
        p = person(rng)
        subj, name, his = p.first, p.first, p.his
        nhis = his
    else:
        subj = rng.choice(SUBJECTS)
        name = rng.choice(FEMALE + MALE)
        nhis = "her" if name in FEMALE else "his"
        his = "my" if subj == "I" else ("her" if subj.split()[-1] in REL_F + ["grandma"] else "his")
    return dict(
        topic=topic,
        item=rng.choice(v["items"]),
        did=v["did"][k],
        do=v["do"][k],
        subj=subj,
        Subj=cap(subj),
        name=name,
        his=his,
        nhis=nhis,
        pos=rng.choice(POS_ADJ),
        neg=rng.choice(NEG_ADJ),
        pos2=rng.choice(POS_ADJ),
        neg2=rng.choice(NEG_ADJ),
        pos_tail=rng.choice(v["pos_tail"]),
        neg_tail=rng.choice(v["neg_tail"]),
        fact=rng.choice(v["fact"]),
        day=rng.choice(DAYS),
        when=rng.choice(WHEN),
        rel=relative(rng),
        city=rng.choice(CITIES),
        n=rng.randint(2, 9),
    )


def build_sentiment(round_name: str, rng: random.Random) -> list[Row]:
    """The rows of one sentiment round, balanced over positive / negative / neutral."""

    def maker(t: str) -> Maker:
        def make(rng: random.Random) -> Row:
            d = fill(rng)
            d["a_pos"], d["a_neg"] = an(d["pos"]), an(d["neg"])
            d["fact_q"] = d["fact"][:-1] + ", is that right?"
            return {"statement": cap(t.format(**d)), "topic": d["topic"]}

        return make

    makers = {lab: [maker(t) for t in ts] for lab, ts in TEMPLATES[round_name].items()}
    rows = pick_balanced(rng, makers, ROWS_PER_FILE, key=lambda r: r["statement"])
    return [{"statement": r["statement"], "label": r["label"], "topic": r["topic"]} for r in rows]
