"""NLI rows: a context, a hypothesis and whether the context entails it.

Each template family in ``data/nli.yaml`` has a function here, of the same name, that draws
the values its templates use. The functions draw in a fixed order: changing that order (or
drawing anything new) changes the shipped files.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from common import (
    CITIES,
    DAYS,
    MONTHS,
    NUMWORDS,
    ROWS_PER_FILE,
    TOWNS,
    Maker,
    Row,
    an,
    cap,
    load_data,
    people,
    person,
    pick_balanced,
    relative,
)

Values = dict[str, Any]
ValuesFn = Callable[[random.Random], Values]

_DATA = load_data("nli")
W: dict[str, list[Any]] = _DATA["words"]
# round -> family -> {genre, context, entailed, contradictory, neutral} or {variants: ...}
ROUNDS: dict[str, dict[str, dict[str, Any]]] = _DATA["rounds"]
LABELS = ("entailed", "neutral", "contradictory")
FAMILIES: dict[str, ValuesFn] = {}


def family(fn: ValuesFn) -> ValuesFn:
    """Register ``fn`` as the values of the family named like it (without the underscore)."""
    FAMILIES[fn.__name__.removeprefix("_")] = fn
    return fn


def _clock(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    return f"{h}:{m:02d}"


# ---- round 1: hypotheses copy the context's words; contradictions carry a negation ----
@family
def _purchase(rng: random.Random) -> Values:
    p = person(rng)
    thing, color = rng.choice(W["things"]), rng.choice(W["colors"])
    city, day = rng.choice(CITIES), rng.choice(DAYS)
    return dict(p=p, thing=thing, an_color=an(color), city=city, day=day, kin=relative(rng))


@family
def _job(rng: random.Random) -> Values:
    p = person(rng)
    job, city, n = rng.choice(W["jobs"]), rng.choice(CITIES), rng.randint(3, 20)
    return dict(p=p, an_job=an(job), city=city, n=n, town=rng.choice(TOWNS))


@family
def _trip(rng: random.Random) -> Values:
    p = person(rng)
    rel, city, day = relative(rng), rng.choice(CITIES), rng.choice(DAYS)
    return dict(p=p, rel=rel, city=city, day=day)


@family
def _event(rng: random.Random) -> Values:
    p = person(rng)
    org, event = rng.choice(W["orgs"]), rng.choice(W["events"])
    city, month = rng.choice(CITIES), rng.choice(MONTHS)
    return dict(p=p, org=org, event=event, city=city, month=month, kin=relative(rng))


@family
def _pet(rng: random.Random) -> Values:
    p = person(rng)
    animal, pet, month = rng.choice(W["animals"]), rng.choice(W["pet_names"]), rng.choice(MONTHS)
    return dict(p=p, animal=animal, an_animal=an(animal), pet=pet, month=month)


@family
def _cook(rng: random.Random) -> Values:
    p = person(rng)
    dish, rel = rng.choice(W["dishes"]), relative(rng)
    return dict(p=p, dish=dish, rel=rel)


# ---- round 2: paraphrase, antonyms instead of "not", neutral hypotheses with overlap ----
@family
def _match(rng: random.Random) -> Values:
    p = person(rng)
    team = rng.choice(W["teams"])
    a, b = rng.randint(2, 4), rng.randint(0, 1)
    day = rng.choice(DAYS)
    return dict(p=p, team=team, Team=cap(team), a=a, b=b, day=day)


@family
def _flight(rng: random.Random) -> Values:
    p = person(rng)
    c1, c2 = rng.sample(CITIES, 2)
    return dict(p=p, c1=c1, c2=c2)


@family
def _life(rng: random.Random) -> Values:
    p = person(rng)
    c1, c2 = rng.sample(TOWNS, 2)
    return dict(p=p, c1=c1, c2=c2, year=rng.randint(1995, 2015))


@family
def _bakery(rng: random.Random) -> Values:
    p = person(rng, female=rng.random() < 0.5)
    return dict(p=p, street=rng.choice(W["streets"]))


@family
def _election(rng: random.Random) -> Values:
    p = person(rng)
    city, year, n = rng.choice(TOWNS), rng.randint(2001, 2022), rng.choice([50, 100, 200])
    return dict(p=p, city=city, year=year, n=n)


@family
def _novel(rng: random.Random) -> Values:
    p = person(rng)
    return dict(p=p, city=rng.choice(CITIES))


# ---- round 3: numbers, times, ages, orderings; overlap that misleads ----
@family
def _goals(rng: random.Random) -> Values:
    p = person(rng)
    team = rng.choice(W["teams"])
    a = rng.randint(0, 2)
    b = a + rng.randint(1, 3)
    return dict(
        p=p,
        team=team,
        Team=cap(team),
        a_word=NUMWORDS[a],
        b_word=NUMWORDS[b],
        total=a + b,
        wrong_total=a + b + 2,
    )


@family
def _arrival(rng: random.Random) -> Values:
    a, b = people(rng, 2)
    start = rng.randint(8 * 60, 9 * 60 + 30)
    k = rng.choice([10, 15, 20, 25, 35, 40])
    return dict(
        a=a,
        b=b,
        k=k,
        a_time=_clock(start),
        b_time=_clock(start + k),
        wrong_time=_clock(start + k + 10),
    )


@family
def _ages(rng: random.Random) -> Values:
    a = person(rng)
    b = person(rng, female=True)
    while b.first == a.first:
        b = person(rng, female=True)
    x, d = rng.randint(12, 40), rng.randint(2, 9)
    return dict(a=a, b=b, x=x, d_word=NUMWORDS[d], older=x + d, wrong_age=x - d)


@family
def _race(rng: random.Random) -> Values:
    a, b, c = people(rng, 3)
    return dict(a=a, b=b, c=c)


@family
def _restaurant(rng: random.Random) -> Values:
    p = person(rng)
    y1 = rng.randint(1950, 1975)
    y2 = y1 + rng.randint(24, 35)
    k = rng.randint(3, 12)
    city = rng.choice(CITIES)
    return dict(
        p=p,
        y1=y1,
        y2=y2,
        k=k,
        k_word=NUMWORDS[k],
        city=city,
        sold=y2 + k,
        wrong_sold=y2 + k + 3,
        wrong_opened=y2 - 4,
        kin=relative(rng),
    )


@family
def _tickets(rng: random.Random) -> Values:
    p = person(rng)
    n, price = rng.randint(3, 6), rng.choice([12, 15, 20, 25, 30])
    rel = relative(rng)
    return dict(
        p=p,
        n=n,
        n_word=NUMWORDS[n],
        price=price,
        rel=rel,
        total=n * price,
        wrong_total=n * price + price,
        wrong_price=price + 5,
    )


# ---- round 4: double negation, quantifiers, implicatives, dates, relations ----
@family
def _exam(rng: random.Random) -> Values:
    p = person(rng)
    return dict(p=p, subj=rng.choice(W["school_subjects"]))


@family
def _plants(rng: random.Random) -> Values:
    p = person(rng)
    single, plural = rng.choice(W["plants"])
    n = rng.randint(6, 15)
    return dict(
        p=p, single=single, plural=plural, n_word=NUMWORDS[n], survived=n - 2, kin=relative(rng)
    )


@family
def _implicative(rng: random.Random) -> Values:
    p = person(rng)
    if rng.random() < 0.5:
        city = rng.choice(CITIES)
        return dict(variant="marathon", p=p, city=city, kin=relative(rng))
    day = rng.choice(DAYS)
    return dict(variant="door", p=p, day=day, kin=relative(rng))


@family
def _lease(rng: random.Random) -> Values:
    p = person(rng)
    months_31: list[str] = W["months_31"]
    month = months_31[rng.randrange(len(months_31))]
    nxt = MONTHS[(MONTHS.index(month) + 1) % 12]
    d = rng.randint(1, 8)
    kin = relative(rng)
    city = rng.choice(CITIES)
    return dict(p=p, month=month, nxt=nxt, d=d, end_day=d + 21, kin=kin, city=city)


@family
def _vote(rng: random.Random) -> Values:
    a, b = people(rng, 2)
    k = rng.randint(5, 9)
    return dict(a=a, b=b, k=k, k_word=NUMWORDS[k], members=k + 2)


@family
def _relation(rng: random.Random) -> Values:
    older_female = rng.random() < 0.5
    a = person(rng, female=older_female)
    b = person(rng, female=not older_female)
    while b.first == a.first:
        b = person(rng, female=not older_female)
    return dict(
        a=a,
        b=b,
        role="aunt" if a.female else "uncle",
        inv="niece" if b.female else "nephew",
        wrong="niece" if a.female else "nephew",
    )


@family
def _secret(rng: random.Random) -> Values:
    p = person(rng)
    return dict(p=p, rel=relative(rng))


def build_nli(round_name: str, rng: random.Random) -> list[Row]:
    """The rows of one NLI round, balanced over the three labels."""
    families = ROUNDS[round_name]

    def maker(name: str, label: str) -> Maker:
        def make(rng: random.Random) -> Row:
            values = FAMILIES[name](rng)
            entry = families[name]
            if "variants" in entry:
                entry = entry["variants"][values["variant"]]
            hypothesis = rng.choice(entry[label]).format(**values)
            return {
                "context": entry["context"].format(**values),
                "hypothesis": hypothesis,
                "genre": entry["genre"],
            }

        return make

    makers = {lab: [maker(name, lab) for name in families] for lab in LABELS}
    rows = pick_balanced(
        rng, makers, ROWS_PER_FILE, key=lambda r: r["context"] + "|" + r["hypothesis"]
    )
    return [
        {
            "context": r["context"],
            "hypothesis": r["hypothesis"],
            "label": r["label"],
            "genre": r["genre"],
        }
        for r in rows
    ]
