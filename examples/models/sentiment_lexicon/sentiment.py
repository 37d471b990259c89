"""Rule-based lexicon sentiment scorer (standard library only).

Sums word polarities from ``lexicon.txt`` with a few classic rules: negation flips the next
few words ("not good"), intensifiers and diminishers scale the next sentiment word, a
contrast word ("but", "however") down-weights the clause before it and up-weights the one
after, and exclamation marks amplify the total. The score maps to positive / negative /
neutral with softmax probabilities.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

LABELS = ("positive", "negative", "neutral")

NEGATORS = frozenset(
    {
        "not",
        "no",
        "never",
        "nothing",
        "nobody",
        "none",
        "nor",
        "neither",
        "cannot",
        "without",
        "hardly",
        "barely",
        "isnt",
        "arent",
        "wasnt",
        "werent",
        "dont",
        "doesnt",
        "didnt",
        "cant",
        "couldnt",
        "wont",
        "wouldnt",
        "shouldnt",
        "aint",
        "lacks",
        "lacking",
        "n't",
    }
)
INTENSIFIERS = {
    "very": 1.5,
    "really": 1.4,
    "so": 1.3,
    "extremely": 1.8,
    "incredibly": 1.8,
    "absolutely": 1.7,
    "totally": 1.5,
    "completely": 1.5,
    "utterly": 1.8,
    "truly": 1.4,
    "highly": 1.5,
    "super": 1.5,
    "most": 1.4,
    "too": 1.3,
    "especially": 1.3,
    "quite": 1.15,
    "pretty": 1.1,
    "deeply": 1.5,
    "thoroughly": 1.5,
    "seriously": 1.4,
    "remarkably": 1.4,
    "slightly": 0.6,
    "somewhat": 0.7,
    "fairly": 0.8,
    "kinda": 0.7,
    "little": 0.7,
    "mildly": 0.6,
    "marginally": 0.5,
    "almost": 0.7,
}
# A contrast word: the clause before counts BEFORE times, the clause after AFTER times.
CONTRAST = frozenset({"but", "however", "yet", "though", "nevertheless", "nonetheless"})
CONCESSIVE = frozenset({"although", "despite", "while", "whereas"})
CONTRAST_BEFORE = 0.5
CONTRAST_AFTER = 1.5
NEGATION_SCOPE = 3
NEGATION_FACTOR = -0.8
NEGATED_CAP = 1.2
CLAUSE_BREAK = frozenset(".,;:!?")
NEUTRAL_MARGIN = 0.5

_TOKEN = re.compile(r"[a-z]+(?:[-'][a-z]+)*|n't|[.,;:!?]")


def load_lexicon(path: Path | None = None) -> dict[str, float]:
    """Load ``word weight`` lines (``#`` comments allowed) into a dict."""
    path = path or Path(__file__).resolve().parent / "lexicon.txt"
    lexicon: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            word, weight = line.rsplit(None, 1)
            lexicon[word.lower()] = float(weight)
    return lexicon


def tokenize(text: str) -> list[str]:
    """Lower-case word and punctuation tokens; "don't" becomes "do", "n't"."""
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"(\w)n't\b", r"\1 n't", text)
    return _TOKEN.findall(text)


class SentimentScorer:
    """Scores text with a polarity lexicon and simple compositional rules."""

    def __init__(self, lexicon: dict[str, float] | None = None) -> None:
        self.lexicon = lexicon if lexicon is not None else load_lexicon()

    def word_polarity(self, word: str) -> float:
        """The word's lexicon weight, trying a few suffix strips ("loved" -> "love")."""
        weight = self.lexicon.get(word)
        if weight is not None:
            return weight
        for suffix, repl in (
            ("ily", "y"),
            ("ly", ""),
            ("ness", ""),
            ("ing", ""),
            ("ing", "e"),
            ("ed", ""),
            ("ed", "e"),
            ("es", ""),
            ("s", ""),
            ("er", ""),
            ("est", ""),
        ):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                weight = self.lexicon.get(word[: -len(suffix)] + repl)
                if weight is not None:
                    return weight
        return 0.0

    def score(self, text: str) -> float:
        """Signed sentiment score: > 0 positive, < 0 negative."""
        tokens = tokenize(text)
        clause_scores: list[float] = [0.0]
        clause_weights: list[float] = [1.0]
        negate_left = 0
        boost = 1.0
        concessive_open = False
        exclamations = 0
        for token in tokens:
            if token in CLAUSE_BREAK:
                negate_left = 0
                boost = 1.0
                if token == "!":
                    exclamations += 1
                if concessive_open and token in ",;":
                    # "Although X, Y": X was the concession, Y carries the sentiment.
                    clause_scores.append(0.0)
                    clause_weights.append(CONTRAST_AFTER)
                    concessive_open = False
                continue
            if token in CONTRAST:
                clause_weights[-1] *= CONTRAST_BEFORE
                clause_scores.append(0.0)
                clause_weights.append(CONTRAST_AFTER)
                negate_left = 0
                boost = 1.0
                continue
            if token in CONCESSIVE:
                clause_scores.append(0.0)
                clause_weights.append(CONTRAST_BEFORE)
                concessive_open = True
                continue
            if token in NEGATORS:
                negate_left = NEGATION_SCOPE
                continue
            if token in INTENSIFIERS:
                boost *= INTENSIFIERS[token]
                continue
            polarity = self.word_polarity(token)
            if polarity:
                polarity *= boost
                if negate_left:
                    # "not good" is bad, but "not terrible" is only mildly good.
                    polarity = max(-NEGATED_CAP, min(NEGATED_CAP, polarity * NEGATION_FACTOR))
                clause_scores[-1] += polarity
                boost = 1.0
            if negate_left:
                negate_left -= 1
        total = sum(s * w for s, w in zip(clause_scores, clause_weights, strict=True))
        return total * (1.0 + 0.15 * min(exclamations, 3))

    def predict(self, text: str) -> tuple[str, dict[str, float]]:
        """Label and probabilities (softmax of score, -score and a neutral margin)."""
        s = self.score(text)
        logits = {"positive": s, "negative": -s, "neutral": NEUTRAL_MARGIN}
        top = max(logits.values())
        exps = {k: math.exp(v - top) for k, v in logits.items()}
        total = sum(exps.values())
        probs = {k: round(v / total, 4) for k, v in exps.items()}
        label = max(LABELS, key=lambda k: logits[k])
        return label, probs
