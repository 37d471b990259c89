"""The reviewed demographic lexicon (``configs/lexicons/fairness.yaml``), validated on load."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perturbations.text import LexiconError, check_keys, load_lexicon

GENDERS = ("male", "female")
CONTEXT_USES = {"determiner", "other"}
_FILE = "fairness.yaml"


@dataclass(frozen=True)
class FairnessLexicon:
    """Swap tables: ``words`` (lower case, both directions plus one-way forms), ``contextual``
    ('her'/'his' -> use -> replacement), ``titles`` (capitalised only), ``names``
    (group -> gender -> names), ``non_person`` (entity marker words)."""

    version: int
    words: dict[str, str]
    contextual: dict[str, dict[str, str]]
    titles: dict[str, str]
    names: dict[str, dict[str, tuple[str, ...]]]
    non_person: frozenset[str]

    def name_index(self) -> dict[str, tuple[str, str]]:
        """Every name -> (group, gender)."""
        return {
            name: (group, gender)
            for group, by_gender in self.names.items()
            for gender, names in by_gender.items()
            for name in names
        }


def _word(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.isalpha() or not value.islower():
        raise LexiconError(f"{_FILE}: {where}: {value!r} must be a lower-case word")
    return value


def _capitalised(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.isalpha() or not value[0].isupper():
        raise LexiconError(f"{_FILE}: {where}: {value!r} must be a capitalised word")
    return value


def _mapping(raw: dict[str, Any], key: str) -> dict[Any, Any]:
    value = raw.get(key)
    if not isinstance(value, dict) or not value:
        raise LexiconError(f"{_FILE}: {key!r} must be a non-empty mapping")
    return value


def _words(raw: dict[str, Any]) -> dict[str, str]:
    pairs = raw.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise LexiconError(f"{_FILE}: 'pairs' must be a non-empty list of [male, female]")
    words: dict[str, str] = {}
    for i, pair in enumerate(pairs):
        if not isinstance(pair, list) or len(pair) != 2:
            raise LexiconError(f"{_FILE}: pairs[{i}] must be a [male, female] pair")
        male, female = (_word(w, f"pairs[{i}]") for w in pair)
        for word, other in ((male, female), (female, male)):
            if word in words:
                raise LexiconError(f"{_FILE}: pairs[{i}]: {word!r} appears twice")
            words[word] = other
    for word, other in _mapping(raw, "one_way").items():
        if _word(word, "one_way") in words:
            raise LexiconError(f"{_FILE}: one_way: {word!r} is already in pairs")
        words[word] = _word(other, f"one_way.{word}")
    return words


def _contextual(raw: dict[str, Any], words: dict[str, str]) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    for word, uses in _mapping(raw, "contextual").items():
        where = f"contextual.{word}"
        if _word(word, "contextual") in words:
            raise LexiconError(f"{_FILE}: {where}: already in pairs or one_way")
        if not isinstance(uses, dict) or set(uses) != CONTEXT_USES:
            raise LexiconError(f"{_FILE}: {where}: needs exactly {sorted(CONTEXT_USES)}")
        result[word] = {use: _word(target, f"{where}.{use}") for use, target in uses.items()}
    return result


def _names(raw: dict[str, Any]) -> dict[str, dict[str, tuple[str, ...]]]:
    groups = _mapping(raw, "names")
    if len(groups) < 2:
        raise LexiconError(f"{_FILE}: names: needs at least two groups")
    seen: set[str] = set()
    result: dict[str, dict[str, tuple[str, ...]]] = {}
    for group, by_gender in groups.items():
        where = f"names.{group}"
        if not isinstance(by_gender, dict) or set(by_gender) != set(GENDERS):
            raise LexiconError(f"{_FILE}: {where}: needs exactly 'male' and 'female' lists")
        result[group] = {}
        for gender in GENDERS:
            names = by_gender[gender]
            if not isinstance(names, list) or not names:
                raise LexiconError(f"{_FILE}: {where}.{gender}: must be a non-empty list")
            for name in names:
                if _capitalised(name, f"{where}.{gender}") in seen:
                    raise LexiconError(f"{_FILE}: {where}.{gender}: {name!r} appears twice")
                seen.add(name)
            result[group][gender] = tuple(names)
    sizes = {len(names) for by_gender in result.values() for names in by_gender.values()}
    if len(sizes) != 1:  # the swap is a bijection between lists, so they must match in size
        raise LexiconError(f"{_FILE}: names: every list must hold as many names as the others")
    return result


def load_fairness_lexicon(path: Path | None = None) -> FairnessLexicon:
    """Load and validate the lexicon; any problem raises LexiconError naming file and field."""
    raw = load_lexicon(_FILE, path)
    check_keys(
        raw,
        {"version", "pairs", "one_way", "contextual", "titles", "names", "non_person"},
        _FILE,
    )
    words = _words(raw)
    titles = {
        _capitalised(k, "titles"): _capitalised(v, f"titles.{k}")
        for k, v in _mapping(raw, "titles").items()
    }
    markers = raw.get("non_person")
    if not isinstance(markers, list) or not markers:
        raise LexiconError(f"{_FILE}: 'non_person' must be a non-empty list")
    if len(set(markers)) != len(markers):
        raise LexiconError(f"{_FILE}: non_person: duplicate entries")
    return FairnessLexicon(
        version=raw["version"],
        words=words,
        contextual=_contextual(raw, words),
        titles=titles,
        names=_names(raw),
        non_person=frozenset(_capitalised(m, "non_person") for m in markers),
    )
