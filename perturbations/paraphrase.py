"""``paraphrase``: meaning-preserving rewrites that work offline.

1. WordNet synonyms for ``max(1, words // 6)`` content words. A word is eligible when it is
   lower case, >= 3 letters, not a stopword / negation / pronoun / auxiliary, and WordNet gives
   it exactly one part of speech *as a base form* (``morphy`` finds it under one POS only and
   returns the word itself). That replaces a POS tagger: ambiguous words ("film": noun and
   verb) and inflected forms ("cars", "walked", which we could not re-inflect) are skipped.
   The synonym is a single-word lemma of the word's most frequent sense that occurs in
   WordNet's tagged-sense counts (``cntlist.rev``), chosen by the seed among the two most
   frequent such lemmas.
2. Contractions flipped both ways ("do not" <-> "don't", "cannot" <-> "can't", "I am" <->
   "I'm" ...), keeping case; only unambiguous forms ("it's" could be "it has": not touched).
3. Light punctuation: the final full stop dropped or added, the comma before "and" / "but"
   dropped (each with probability 0.5).
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from perturbations.perturbation import Perturbation, register
from perturbations.text import LEXICON_DIR, LexiconError, match_case, replace_sampled, word_set

WORDS_PER_SYNONYM = 6
SYNONYMS_FILE = "paraphrase_synonyms.json"
PUNCT_P = 0.5
_WORDS = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")

STOPWORDS = word_set(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can cannot could did do does doing done down during
    each either else ever every few for from further get gets got had has have having he her
    here hers herself him himself his how however i if in into is it its itself just least less
    let like made make many may me might more most much must my myself neither never no nobody
    none nor not nothing now of off on once one only or other ought our ours ourselves out over
    own per please quite rather really same several shall she should since so some such than
    that the their theirs them themselves then there these they this those though through thus
    to too under until up upon us very was we well were what when where whether which while who
    whom whose why will with within without would yes yet you your yours yourself yourselves
    zero two three four five six seven eight nine ten hundred thousand million first second
    third last next new old way thing things lot lots kind sort bit"""
)

_CONTRACT = {
    "do not": "don't",
    "does not": "doesn't",
    "did not": "didn't",
    "is not": "isn't",
    "are not": "aren't",
    "was not": "wasn't",
    "were not": "weren't",
    "has not": "hasn't",
    "have not": "haven't",
    "had not": "hadn't",
    "will not": "won't",
    "would not": "wouldn't",
    "should not": "shouldn't",
    "could not": "couldn't",
    "must not": "mustn't",
    "cannot": "can't",
    "i am": "i'm",
    "you are": "you're",
    "we are": "we're",
    "they are": "they're",
    "let us": "let's",
}
_EXPAND = {short: long for long, short in _CONTRACT.items()}
_FLIP = {**_CONTRACT, **_EXPAND}


def _flip_pattern(*, ascii_lower: bool = False) -> re.Pattern[str]:
    """Every form, longest first. ``ascii_lower``: for lower-cased ASCII text, so without
    IGNORECASE, and with the forms' first letters as a lookahead: most positions then fail
    at one character instead of at every form (about 3x faster)."""
    forms = sorted(_FLIP, key=len, reverse=True)
    alternatives = [re.escape(f).replace(r"\ ", r"\s+").replace("'", "['’]") for f in forms]
    if not ascii_lower:
        return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)
    firsts = "".join(sorted({form[0] for form in forms}))
    return re.compile(r"\b(?=[" + firsts + r"])(?:" + "|".join(alternatives) + r")\b")


_FLIP_RE = _flip_pattern()
_FLIP_LOWER_RE = _flip_pattern(ascii_lower=True)
_SPACES = re.compile(r"\s+")
_COMMA_CONJ = re.compile(r",(?= (?:and|but) )")
_ENDS_WITH_STOP = re.compile(r"[A-Za-z]\.$")
_ENDS_WITH_LETTER = re.compile(r"[A-Za-z]$")


def _flipped(source: str) -> str:
    key = _SPACES.sub(" ", source.lower().replace("’", "'"))
    return match_case(source, _FLIP[key])


def flip_contractions(text: str) -> str:
    """Every listed contraction expanded and every listed expansion contracted."""
    if not text.isascii():  # lower() may change a non-ASCII text's length, so its offsets
        return _FLIP_RE.sub(lambda match: _flipped(match.group()), text)
    parts: list[str] = []
    last = 0
    for match in _FLIP_LOWER_RE.finditer(text.lower()):  # same offsets as in ``text``
        start, end = match.span()
        parts += [text[last:start], _flipped(text[start:end])]
        last = end
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


class ParaphrasePerturbation(Perturbation):
    """WordNet synonyms for content words, contraction flips and light punctuation changes."""

    name = "paraphrase"
    version = "1"

    def __init__(self, wordnet: Any | None = None) -> None:
        """``wordnet``: a WordNet reader to look synonyms up in as words come; without one,
        the prepared table of every word's synonyms (``load_synonym_table``), which gives
        exactly what WordNet would."""
        self._synonyms: Callable[[str], tuple[str, ...]]
        self._table: dict[str, tuple[str, ...]] | None = None
        if wordnet is not None:
            self._synonyms = lru_cache(maxsize=65536)(functools.partial(find_synonyms, wordnet))
        else:
            # only what can be used, so that ``_eligible`` needs no other check
            table = {w: found for w, found in load_synonym_table().items() if w.islower() and found}
            self._table = table
            self._synonyms = lambda word: table.get(word, ())

    def _eligible(self, words: list[re.Match[str]]) -> list[re.Match[str]]:
        """The words a synonym may replace: lower case, with synonyms."""
        if self._table is not None:  # its words are all lower case: membership is enough
            table = self._table
            return [m for m in words if m[0] in table]
        return [m for m in words if m[0].islower() and self._synonyms(m[0])]

    def _substitute(self, text: str, rng: random.Random) -> str:
        words = list(_WORDS.finditer(text))
        eligible = self._eligible(words)
        if not eligible:
            return text
        count = min(len(eligible), max(1, len(words) // WORDS_PER_SYNONYM))
        return replace_sampled(
            text, eligible, count, rng, lambda word: rng.choice(self._synonyms(word))
        )

    @staticmethod
    def _punctuate(text: str, rng: random.Random) -> str:
        if _COMMA_CONJ.search(text) and rng.random() < PUNCT_P:
            text = _COMMA_CONJ.sub("", text, count=1)
        if rng.random() < PUNCT_P:
            if _ENDS_WITH_STOP.search(text):
                text = text[:-1]
            elif _ENDS_WITH_LETTER.search(text) and len(_WORDS.findall(text)) >= 4:
                text += "."
        return text

    def apply(self, text: str, seed: int) -> str:
        """Synonyms, then contraction flips, then punctuation; pure in (text, seed)."""
        rng = random.Random(seed)
        text = self._substitute(text, rng)
        text = flip_contractions(text)
        return self._punctuate(text, rng)


register("paraphrase")(ParaphrasePerturbation)


def find_synonyms(wordnet: Any, word: str) -> tuple[str, ...]:
    """Up to two frequent single-word synonyms of ``word``, or () when it is not eligible:
    a content word that is the base form of exactly one part of speech."""
    if word in STOPWORDS or len(word) < 3:
        return ()
    poses = {pos: wordnet.morphy(word, pos) for pos in "nvar"}
    found = [pos for pos, base in poses.items() if base is not None]
    if len(found) != 1 or poses[found[0]] != word:
        return ()
    counts: dict[str, int] = {}
    for synset in wordnet.synsets(word, found[0])[:1]:
        for lemma in synset.lemmas():
            name = lemma.name()
            if name != word and name.isalpha() and name.islower() and len(name) >= 3:
                counts[name] = max(counts.get(name, 0), lemma.count())
    ranked = sorted((-count, name) for name, count in counts.items() if count > 0)
    return tuple(name for _, name in ranked[:2])


def synonym_table(wordnet: Any) -> dict[str, tuple[str, ...]]:
    """``find_synonyms`` of every word it can give synonyms for. Only a word WordNet
    indexes can be its own base form, so every other word has none: the table is exact."""
    words = {
        name
        for pos in "nvar"
        for name in wordnet.all_lemma_names(pos)
        if name.islower() and _WORDS.fullmatch(name)
    }
    found = {word: find_synonyms(wordnet, word) for word in sorted(words)}
    return {word: synonyms for word, synonyms in found.items() if synonyms}


def load_synonym_table(path: Path | None = None) -> dict[str, tuple[str, ...]]:
    """The prepared synonym table (``configs/lexicons/paraphrase_synonyms.json``, written
    from WordNet 3.0 by ``tools/lexicons/paraphrase_synonyms.py``): read in a fraction of
    a second, where loading WordNet itself takes seconds."""
    path = path or LEXICON_DIR / SYNONYMS_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LexiconError(f"{path.name}: cannot be read ({exc})") from None
    table = raw.get("synonyms") if isinstance(raw, dict) else None
    if not isinstance(table, dict) or not all(
        isinstance(found, list) and all(isinstance(w, str) for w in found)
        for found in table.values()
    ):
        raise LexiconError(f"{path.name}: synonyms must map words to lists of words")
    return {word: tuple(found) for word, found in table.items()}
