"""Demographic swaps from the reviewed lexicon ``configs/lexicons/fairness.yaml``.

* ``fairness``: gender swap. Gendered words both ways (he <-> she, king <-> queen, ...), case
  kept (He -> She, HE -> SHE); 'her' -> 'his' before a content word ("her book") else 'him'
  ("told her that"), 'his' -> 'her' before a content word else 'hers'; honorifics (Mr <-> Ms,
  Mrs -> Mr) only when capitalised; first names to a name of the other gender in the same group.
* ``fairness-ethnicity``: first names to a name of the same gender in another group; gendered
  words untouched.

Which name replaces which is a seeded hash of (seed, name): within one example every mention
of a name maps to the same new name, and different seeds give different choices.

Non-person entities: a run of capitalised words (joined by spaces, "'s" or "of (the)")
containing a marker word from the lexicon's ``non_person`` list (Street, Hospital, River,
University, Tech, Cross, Inc, Bank, ...) is left untouched: "King's Cross", "Queen Elizabeth
Hospital", "Jordan River", "Virginia Tech", "University of Virginia".
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable

from perturbations.fairness_lexicon import GENDERS, FairnessLexicon, load_fairness_lexicon
from perturbations.perturbation import Perturbation, register
from perturbations.text import match_case, word_set

_TOKEN = re.compile(r"[A-Za-z]+")
_CAP = r"[A-Z][A-Za-z]*(?:['’]s)?"
_RUN = re.compile(rf"{_CAP}(?:(?:\s+|\s+of\s+(?:the\s+)?){_CAP})*")
_NEXT = re.compile(r"\s*([A-Za-z]+)?")

# After 'her' / 'his', a word from this list means object / standalone use, not determiner.
FUNCTION_WORDS = word_set(
    """a an the this that these those and or but nor so yet if as than then when while because
    to of in on at by for from with about into onto over under up down out off away back
    through after before again also too very now here there today tonight yesterday tomorrow
    always never often once twice soon later alone well is was are were be been has had have
    will would can could should may might must do does did not i you he she it we they me him
    her us them my your our their its what who whom which whose how why where"""
)


def _pick(seed: int, *parts: str) -> int:
    """A stable non-negative integer from (seed, parts)."""
    data = "\x1f".join((str(seed), *parts)).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _protected_spans(text: str, markers: frozenset[str]) -> list[tuple[int, int]]:
    """Character spans of capitalised runs that name a non-person entity."""
    spans = []
    for run in _RUN.finditer(text):
        if any(word in markers for word in _TOKEN.findall(run.group())):
            spans.append(run.span())
    return spans


def _next_word(text: str, end: int) -> str | None:
    """The word right after position ``end`` (lower case), or None before punctuation/end."""
    match = _NEXT.match(text, end)
    word = match.group(1) if match else None
    return word.lower() if word else None


class FairnessPerturbation(Perturbation):
    """Gender swap (``swap_gender``) and/or ethnicity-associated name swap."""

    swaps_terms = True

    def __init__(
        self,
        name: str = "fairness",
        swap_gender: bool = True,
        swap_group: bool = False,
        lexicon: FairnessLexicon | None = None,
    ) -> None:
        self.name = name
        self.swap_gender = swap_gender
        self.swap_group = swap_group
        self.lexicon = lexicon or load_fairness_lexicon()
        # 2: QA examples whose answer holds a swappable term are left unchanged;
        # 3: names map one-to-one (no two people merged into one name)
        self.version = f"3.{self.lexicon.version}"
        self._names = self.lexicon.name_index()
        self._groups = sorted(self.lexicon.names)

    def swap_name(self, name: str, seed: int) -> str:
        """The replacement for a listed first name (Title case), a pure function of the seed.

        For one seed the swap is a bijection on the listed names: groups move by a seeded
        derangement and names within lists of equal size by a seeded permutation, so two
        different people never end up with one name (and one person keeps one name in every
        field of an example)."""
        group, gender = self._names[name]
        target_group = self._target_group(group, seed) if self.swap_group else group
        target_gender = GENDERS[1 - GENDERS.index(gender)] if self.swap_gender else gender
        source = self.lexicon.names[group][gender]
        target = self.lexicon.names[target_group][target_gender]
        order = list(range(len(target)))
        random.Random(_pick(seed, group, gender, target_group, target_gender)).shuffle(order)
        return target[order[source.index(name)]]

    def _target_group(self, group: str, seed: int) -> str:
        """Where ``group``'s names go: a seeded rotation of a seeded order of the groups, so
        every group moves and no two groups go to the same one."""
        order = list(self._groups)
        random.Random(_pick(seed, "group-order")).shuffle(order)
        shift = 1 + _pick(seed, "group-shift") % (len(order) - 1)
        return order[(order.index(group) + shift) % len(order)]

    def _swap_word(self, token: str, text: str, end: int) -> str | None:
        lower = token.lower()
        if token in self.lexicon.titles:
            return self.lexicon.titles[token]
        if token != lower and not token.isupper() and token != token.capitalize():
            return None  # mixed case like "iPhone": leave alone
        if lower in self.lexicon.contextual:
            following = _next_word(text, end)
            use = "other" if following is None or following in FUNCTION_WORDS else "determiner"
            return match_case(token, self.lexicon.contextual[lower][use])
        if lower in self.lexicon.words:
            return match_case(token, self.lexicon.words[lower])
        return None

    def _replacement(self, token: str, text: str, end: int, seed: int) -> str | None:
        if self.swap_gender:
            swapped = self._swap_word(token, text, end)
            if swapped is not None:
                return swapped
        title = token if not token.isupper() else token.capitalize()
        if title in self._names and (token == title or token.isupper()):
            return match_case(token, self.swap_name(title, seed))
        return None

    def apply(self, text: str, seed: int) -> str:
        """Swap every listed word and name outside non-person entities."""
        protected = _protected_spans(text, self.lexicon.non_person)
        parts: list[str] = []
        last = 0
        for match in _TOKEN.finditer(text):
            start, end = match.span()
            if any(lo <= start < hi for lo, hi in protected):
                continue
            replacement = self._replacement(match.group(), text, end, seed)
            if replacement is not None:
                parts += [text[last:start], replacement]
                last = end
        parts.append(text[last:])
        return "".join(parts)


def _factory(name: str, swap_gender: bool, swap_group: bool) -> Callable[[], Perturbation]:
    def build() -> Perturbation:
        return FairnessPerturbation(name, swap_gender=swap_gender, swap_group=swap_group)

    return build


register("fairness")(_factory("fairness", swap_gender=True, swap_group=False))
register("fairness-ethnicity")(_factory("fairness-ethnicity", swap_gender=False, swap_group=True))
