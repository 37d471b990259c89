"""``typo``: mild character-level noise (keyboard, OCR, swap, delete) plus real misspellings.

Edits: ``max(1, words // 8)`` words of >= 3 letters per text (about one edit per eight words,
at least one when an eligible word exists). For each chosen word: a listed common misspelling
(``configs/lexicons/misspellings.yaml``) with probability 0.75 when there is one, otherwise one
of four character operations picked uniformly:

* ``keyboard``: one letter replaced by a neighbouring key (nlpaug's KeyboardAug QWERTY model);
* ``ocr``: one character replaced by an OCR confusion (nlpaug's OcrAug model, e.g. o->0, l->1);
* ``swap``: two adjacent different letters exchanged (as nlpaug's RandomCharAug 'swap');
* ``delete``: one letter removed (as nlpaug's RandomCharAug 'delete').

The first letter of a word is never edited. nlpaug supplies only the character tables (written
out to ``configs/lexicons/typo_characters.yaml`` by ``tools/lexicons/typo_characters.py``); every
random choice is made by ``random.Random(seed)``, so the output is a pure function of
(text, seed) and independent of the global ``random`` / numpy state.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Mapping, Sequence
from functools import cache

from perturbations.perturbation import Perturbation, register
from perturbations.text import LexiconError, check_keys, load_lexicon, match_case, replace_sampled

WORDS_PER_EDIT = 8
MISSPELLING_P = 0.75
CHAR_OPS = ("keyboard", "ocr", "swap", "delete")
_LETTERS = re.compile(r"[A-Za-z]+")
_EDITABLE = re.compile(r"[A-Za-z]{3,}")  # the same runs of letters as _LETTERS, of >= 3
_lock = threading.Lock()


@cache
def _char_tables() -> tuple[Mapping[str, Sequence[str]], Mapping[str, Sequence[str]]]:
    """(keyboard neighbours, OCR confusions): nlpaug's KeyboardAug QWERTY and OcrAug tables,
    as ``tools/lexicons/typo_characters.py`` wrote them out (importing nlpaug takes seconds;
    the file, milliseconds)."""
    with _lock:
        raw = load_lexicon("typo_characters.yaml")
    check_keys(raw, {"version", "keyboard", "ocr"}, "typo_characters.yaml")
    tables = []
    for name in ("keyboard", "ocr"):
        table = raw[name]
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and len(k) == 1 and isinstance(v, list) and v
            and all(isinstance(c, str) and len(c) == 1 for c in v)
            for k, v in table.items()
        ):  # fmt: skip
            raise LexiconError(f"typo_characters.yaml: {name} must map letters to characters")
        tables.append({key: tuple(values) for key, values in table.items()})
    return tables[0], tables[1]


def load_misspellings(path: str | None = None) -> dict[str, tuple[str, ...]]:
    """The validated misspelling lexicon: correct word -> misspellings."""
    from pathlib import Path

    raw = load_lexicon("misspellings.yaml", Path(path) if path else None)
    check_keys(raw, {"version", "misspellings"}, "misspellings.yaml")
    table = raw.get("misspellings")
    if not isinstance(table, dict) or not table:
        raise LexiconError("misspellings.yaml: 'misspellings' must be a non-empty mapping")
    result: dict[str, tuple[str, ...]] = {}
    for word, wrong in table.items():
        where = f"misspellings.yaml: misspellings.{word}"
        if not isinstance(word, str) or not word.isalpha() or not word.islower():
            raise LexiconError(f"{where}: key must be a lower-case word")
        if not isinstance(wrong, list) or not wrong:
            raise LexiconError(f"{where}: must be a non-empty list")
        for item in wrong:
            if not isinstance(item, str) or not item.isalpha() or item == word:
                raise LexiconError(f"{where}: {item!r} must be a word different from the key")
        result[word] = tuple(wrong)
    return result


def _edit_word(word: str, rng: random.Random, misspellings: Mapping[str, Sequence[str]]) -> str:
    """One typo in ``word`` (>= 3 letters); always returns a different string."""
    wrong = misspellings.get(word.lower())
    if wrong and rng.random() < MISSPELLING_P:
        return match_case(word, rng.choice(wrong))
    keyboard, ocr = _char_tables()
    op = rng.choice(CHAR_OPS)
    if op == "ocr":
        spots = [i for i in range(1, len(word)) if word[i] in ocr]
        if spots:
            i = rng.choice(spots)
            return word[:i] + rng.choice(ocr[word[i]]) + word[i + 1 :]
        op = "keyboard"
    if op == "keyboard":
        spots = [i for i in range(1, len(word)) if word[i].lower() in keyboard]
        if spots:
            i = rng.choice(spots)
            near = rng.choice(keyboard[word[i].lower()])
            return word[:i] + (near.upper() if word[i].isupper() else near) + word[i + 1 :]
        op = "delete"
    if op == "swap":
        spots = [i for i in range(1, len(word) - 1) if word[i] != word[i + 1]]
        if spots:
            i = rng.choice(spots)
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    i = rng.randrange(1, len(word))
    return word[:i] + word[i + 1 :]


@register("typo")
class TypoPerturbation(Perturbation):
    """Keyboard / OCR / swap / delete noise and common misspellings, about 1 word in 8."""

    name = "typo"
    version = "1"

    def __init__(self, misspellings: Mapping[str, Sequence[str]] | None = None) -> None:
        self.misspellings = misspellings if misspellings is not None else load_misspellings()

    def apply(self, text: str, seed: int) -> str:
        """``text`` with ``max(1, words // 8)`` eligible words misspelt."""
        eligible = list(_EDITABLE.finditer(text))
        if not eligible:
            return text
        rng = random.Random(seed)
        words = len(_LETTERS.findall(text))
        count = min(len(eligible), max(1, words // WORDS_PER_EDIT))
        return replace_sampled(
            text, eligible, count, rng, lambda word: _edit_word(word, rng, self.misspellings)
        )
