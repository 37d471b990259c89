"""Small text helpers shared by the perturbations: word spans, case transfer, lexicon files."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from configs.yamltext import parse_yaml

LEXICON_DIR = Path(__file__).resolve().parents[1] / "configs" / "lexicons"

# ASCII words, with an optional inner apostrophe part ("don't", "King's").
WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")


class LexiconError(ValueError):
    """A lexicon file is missing, malformed or inconsistent."""


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (for word lists written as prose)."""
    return frozenset(text.split())


def replace_sampled(
    text: str,
    eligible: Sequence[re.Match[str]],
    count: int,
    rng: random.Random,
    replace: Callable[[str], str],
) -> str:
    """``text`` with ``count`` of the ``eligible`` word matches, drawn with ``rng``, replaced
    left to right (``replace`` may draw from the same ``rng``: the order is part of the
    output)."""
    chosen = sorted(rng.sample(range(len(eligible)), count))
    parts: list[str] = []
    last = 0
    for index in chosen:
        match = eligible[index]
        parts += [text[last : match.start()], replace(match.group())]
        last = match.end()
    parts.append(text[last:])
    return "".join(parts)


def match_case(source: str, replacement: str) -> str:
    """``replacement`` in the case pattern of ``source``: lower, Title or UPPER."""
    if len(source) > 1 and source.isupper():
        return replacement.upper()
    if source[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def load_lexicon(filename: str, path: Path | None = None) -> dict[str, Any]:
    """The YAML mapping in ``configs/lexicons/<filename>`` (or ``path``); must have an int
    ``version``."""
    path = path or LEXICON_DIR / filename
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LexiconError(f"{path}: lexicon file not found") from None
    except yaml.YAMLError as exc:
        raise LexiconError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise LexiconError(f"{path}: top level must be a mapping")
    if not isinstance(raw.get("version"), int):
        raise LexiconError(f"{path}: 'version' must be an integer")
    return raw


def check_keys(raw: dict[str, Any], allowed: set[str], where: str) -> None:
    """Reject unknown keys in a lexicon mapping."""
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise LexiconError(f"{where}: unknown key {unknown[0]!r} (allowed: {sorted(allowed)})")
