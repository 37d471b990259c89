"""Extractive QA rows: a paragraph, a question, and the answer span in the paragraph.

Each template family in ``data/qa.yaml`` has a function here, of the same name, that draws
the values its templates use. The functions draw in a fixed order: changing that order (or
drawing anything new) changes the shipped files.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from common import (
    CITIES,
    MONTHS,
    NUMWORDS,
    ROWS_PER_FILE,
    SURNAMES,
    TOWNS,
    Maker,
    Row,
    an,
    load_data,
    people,
    person,
    pick_balanced,
    relative,
)

Values = dict[str, Any]
ValuesFn = Callable[[random.Random], Values]

_DATA = load_data("qa")
W: dict[str, list[str]] = _DATA["words"]
# round -> family -> {topic, context, qas: [[question, answer], ...]}
ROUNDS: dict[str, dict[str, dict[str, Any]]] = _DATA["rounds"]
FAMILIES: dict[str, ValuesFn] = {}


def family(fn: ValuesFn) -> ValuesFn:
    """Register ``fn`` as the values of the family named like it (without the underscore)."""
    FAMILIES[fn.__name__.removeprefix("_")] = fn
    return fn


def _time(rng: random.Random) -> str:
    return f"{rng.randint(2, 3)} hours {rng.randint(1, 59)} minutes"


def _company_name(rng: random.Random) -> str:
    return f"{rng.choice(W['company_first'])} {rng.choice(W['company_second'])}"


# ---- round 1: the question reuses the words around the answer ----
@family
def _company(rng: random.Random) -> Values:
    p = person(rng)
    co = _company_name(rng)
    year, town, job = rng.randint(1890, 2005), rng.choice(TOWNS), rng.choice(W["jobs"])
    product, n = rng.choice(W["products"]), rng.choice([40, 85, 120, 300, 650, 1200])
    rel = relative(rng)
    return dict(
        p=p,
        co=co,
        year=year,
        town=town,
        job=job,
        an_former_job=an("former " + job),
        product=product,
        n=n,
        rel=rel,
    )


@family
def _runner(rng: random.Random) -> Values:
    p, p2, coach = people(rng, 3)
    race, city, year = rng.choice(W["races"]), rng.choice(CITIES), rng.randint(1998, 2023)
    t, k = _time(rng), rng.randint(2, 12)
    return dict(p=p, p2=p2, coach=coach, race=race, city=city, year=year, t=t, k_word=NUMWORDS[k])


@family
def _scientist(rng: random.Random) -> Values:
    p = person(rng)
    species, place = rng.choice(W["species"]), rng.choice(W["nature_places"])
    year, rel = rng.randint(1960, 2022), relative(rng)
    last = p.name.split()[-1]
    return dict(p=p, last=last, species=species, place=place, year=year, rel=rel)


@family
def _musician(rng: random.Random) -> Values:
    p = person(rng)
    album, song = rng.choice(W["albums"]), rng.choice(W["songs"])
    year, town = rng.randint(1965, 2021), rng.choice(TOWNS)
    k = rng.randint(2, 9)
    return dict(p=p, album=album, song=song, year=year, town=town, k_word=NUMWORDS[k])


@family
def _village(rng: random.Random) -> Values:
    p = person(rng)
    last = rng.choice(SURNAMES)
    town, river = rng.choice(TOWNS), rng.choice(W["rivers"])
    year, k = rng.randint(1820, 1910), rng.randint(5, 40)
    return dict(p=p, t=p.title, last=last, town=town, river=river, year=year, k=k)


@family
def _lake(rng: random.Random) -> Values:
    p = person(rng)
    lake, region = rng.choice(W["lakes"]), rng.choice(W["regions"])
    month, town = rng.choice(MONTHS), rng.choice(TOWNS)
    k = rng.choice([6, 9, 12, 15, 22, 30])
    kin = relative(rng)
    return dict(p=p, lake=lake, region=region, month=month, town=town, k=k, kin=kin)


# ---- round 2: distractor spans of the same type, paraphrased questions ----
@family
def _succession(rng: random.Random) -> Values:
    p1 = person(rng)
    p2, p3 = people(rng, 2)
    while p2.first == p1.first or p3.first == p1.first:
        p2, p3 = people(rng, 2)
    co = _company_name(rng)
    y1 = rng.randint(1900, 1960)
    y2 = y1 + rng.randint(15, 30)
    ta, tb = rng.sample(TOWNS, 2)
    old, new = rng.choice(W["former_products"]), rng.choice(W["products"])
    return dict(p1=p1, p2=p2, p3=p3, co=co, y1=y1, y2=y2, ta=ta, tb=tb, old=old, new=new)


@family
def _race(rng: random.Random) -> Values:
    p1, p2, p3 = people(rng, 3)
    race, year = rng.choice(W["races"]), rng.randint(2005, 2023)
    t1, t2 = _time(rng), _time(rng)
    while t2 == t1:
        t2 = _time(rng)
    return dict(p1=p1, p2=p2, p3=p3, race=race, year=year, t1=t1, t2=t2)


@family
def _biography(rng: random.Random) -> Values:
    p1 = person(rng)
    p2 = person(rng)
    while p2.first == p1.first:
        p2 = person(rng)
    ta, tb = rng.sample(TOWNS, 2)
    y1 = rng.randint(1880, 1940)
    y2 = y1 + rng.randint(19, 30)
    y3 = y2 + rng.randint(20, 45)
    j1, j2 = rng.sample(W["jobs"], 2)
    k = rng.randint(3, 9)
    return dict(
        p1=p1,
        p2=p2,
        ta=ta,
        tb=tb,
        y1=y1,
        y2=y2,
        y3=y3,
        j1=j1,
        j2=j2,
        an_j1=an(j1),
        an_j2=an(j2),
        k_word=NUMWORDS[k],
    )


@family
def _festival(rng: random.Random) -> Values:
    p1, p2 = people(rng, 2)
    fest, town = rng.choice(W["festivals"]), rng.choice(TOWNS)
    y1 = rng.randint(1950, 1990)
    y2 = y1 + rng.randint(10, 25)
    month = rng.choice(MONTHS)
    d1 = rng.randint(3, 15)
    d2 = d1 + rng.randint(2, 6)
    n = rng.choice(W["visitor_counts"])
    return dict(p1=p1, p2=p2, fest=fest, town=town, y1=y1, y2=y2, month=month, d1=d1, d2=d2, n=n)


@family
def _lab(rng: random.Random) -> Values:
    p1, p2, p3 = people(rng, 3)
    city, field = rng.choice(CITIES), rng.choice(W["fields"])
    disc = rng.choice(W["discoveries"])
    year, prize = rng.randint(1975, 2020), rng.choice(W["prizes"])
    return dict(p1=p1, p2=p2, p3=p3, city=city, field=field, disc=disc, year=year, prize=prize)


def build_qa(round_name: str, rng: random.Random) -> list[Row]:
    """The rows of one QA round; the answer is the first occurrence of its text."""
    families = ROUNDS[round_name]

    def maker(name: str) -> Maker:
        def make(rng: random.Random) -> Row:
            values = FAMILIES[name](rng)
            entry = families[name]
            ctx = entry["context"].format(**values)
            q, a = (t.format(**values) for t in rng.choice(entry["qas"]))
            start = ctx.find(a)
            if start < 0:
                raise AssertionError(f"answer {a!r} not in context {ctx!r}")
            return {
                "context": ctx,
                "question": q,
                "answer": a,
                "answer_start": start,
                "topic": entry["topic"],
            }

        return make

    rows = pick_balanced(
        rng,
        {"qa": [maker(name) for name in families]},
        ROWS_PER_FILE,
        key=lambda r: r["context"] + "|" + r["question"],
    )
    return [
        {
            "context": r["context"],
            "question": r["question"],
            "answer": r["answer"],
            "answer_start": r["answer_start"],
            "topic": r["topic"],
        }
        for r in rows
    ]
