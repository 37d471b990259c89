"""Vocabulary and helpers shared by every task of the dataset generator."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).resolve().parent / "data"
ROWS_PER_FILE = 84

Row = dict[str, Any]
Maker = Callable[[random.Random], Row]


def load_data(name: str) -> dict[str, Any]:
    """Parse ``data/<name>.yaml``."""
    with (DATA_DIR / f"{name}.yaml").open(encoding="utf-8") as f:
        data: dict[str, Any] = yaml.safe_load(f)
    return data


_WORDS = load_data("common")
FEMALE: list[str] = _WORDS["female_names"]
MALE: list[str] = _WORDS["male_names"]
SURNAMES: list[str] = _WORDS["surnames"]
REL_F: list[str] = _WORDS["female_relatives"]
REL_M: list[str] = _WORDS["male_relatives"]
TOWNS: list[str] = _WORDS["towns"]
CITIES: list[str] = _WORDS["cities"]
DAYS: list[str] = _WORDS["days"]
MONTHS: list[str] = _WORDS["months"]
NUMWORDS: list[str] = _WORDS["number_words"]


class Person:
    """A person with matching pronouns; ``str(p)`` is the way the person is named.

    Templates reach the attributes through ``str.format`` fields such as ``{p.His}``.
    """

    def __init__(self, name: str, female: bool) -> None:
        self.name = name
        self.female = female
        self.he = "she" if female else "he"
        self.him = "her" if female else "him"
        self.his = "her" if female else "his"
        self.himself = "herself" if female else "himself"
        self.He = self.he.capitalize()
        self.His = self.his.capitalize()
        self.sib = "sister" if female else "brother"
        self.child = "daughter" if female else "son"
        self.parent = "mother" if female else "father"
        self.title = "Mrs." if female else "Mr."

    @property
    def first(self) -> str:
        """The first name."""
        return self.name.split()[0]

    def __str__(self) -> str:
        return self.name


def people(rng: random.Random, n: int, genders: list[bool] | None = None) -> list[Person]:
    """``n`` people with distinct first names (first name + optional surname)."""
    out: list[Person] = []
    used: set[str] = set()
    while len(out) < n:
        female = genders[len(out)] if genders is not None else rng.random() < 0.5
        first = rng.choice(FEMALE if female else MALE)
        if first in used:
            continue
        used.add(first)
        name = first if rng.random() < 0.6 else f"{first} {rng.choice(SURNAMES)}"
        out.append(Person(name, female))
    return out


def person(rng: random.Random, female: bool | None = None) -> Person:
    """One person, of the given gender or a random one."""
    return people(rng, 1, None if female is None else [female])[0]


def relative(rng: random.Random) -> str:
    """A gendered kinship word ("aunt", "nephew" ...)."""
    return rng.choice(REL_F + REL_M)


def an(word: str) -> str:
    """``word`` with its indefinite article."""
    return ("an " if word[0].lower() in "aeio" else "a ") + word


def cap(s: str) -> str:
    """``s`` with its first letter upper-cased (unlike ``str.capitalize``, keeps the rest)."""
    return s[0].upper() + s[1:]


def pick_balanced(
    rng: random.Random,
    makers: dict[str, list[Maker]],
    n_rows: int,
    key: Callable[[Row], str],
) -> list[Row]:
    """Round-robin over each label's makers until every label has its share of unique rows.

    ``key`` names what makes a row a duplicate (compared case-insensitively); each row gets
    its ``label`` and the rows come back shuffled.
    """
    labels = list(makers)
    per_label = [n_rows // len(labels)] * len(labels)
    for i in range(n_rows - sum(per_label)):
        per_label[i] += 1
    rows: list[Row] = []
    seen: set[str] = set()
    for label, want in zip(labels, per_label, strict=True):
        fns = makers[label]
        got = 0
        attempts = 0
        i = 0
        while got < want:
            attempts += 1
            # Templates with too few slots could never yield enough unique rows.
            if attempts > 5000:
                raise RuntimeError(f"not enough unique rows for {label}")
            row = fns[i % len(fns)](rng)
            i += 1
            k = key(row).lower()
            if k in seen:
                continue
            seen.add(k)
            row["label"] = label
            rows.append(row)
            got += 1
    rng.shuffle(rows)
    return rows
