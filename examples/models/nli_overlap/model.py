"""Word-overlap NLI heuristic: coverage of the hypothesis by the context, plus contradiction cues.

    python examples/models/nli_overlap/model.py

* hypothesis content words all (or nearly all) found in the context -> entailed
* a negation present on one side only, an antonym of a context word, or a number the
  context contradicts -> contradictory
* otherwise -> neutral
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from dynaeval_server import serve  # noqa: E402

LABELS = ("entailed", "neutral", "contradictory")


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` as a set."""
    return frozenset(text.split())


STOPWORDS = _words(
    """a an the and or of to in on at by for with from as is are was were be been being am
    it its this that these those there here he she they them his her their him i you we us
    our your my me do does did has have had having will would can could should may might
    must shall which who whom whose what when where why how than then so such also very
    just only into about over after before during while s
    """
)
NEGATIONS = _words(
    "not no never nobody nothing none neither nor cannot without n't isnt wasnt dont "
    "doesnt didnt cant wont"
)
ENTAIL_COVERAGE = 0.8
NEUTRAL_COVERAGE = 0.5

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?|n't")
_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")
NUMBER_WORDS = {
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
    "hundred": "100",
    "thousand": "1000",
    "million": "1000000",
    "first": "1",
    "second": "2",
    "third": "3",
}


def load_antonyms(path: Path | None = None) -> dict[str, set[str]]:
    """Symmetric antonym map from ``antonyms.txt`` (one pair a line, ``#`` comments)."""
    path = path or HERE / "antonyms.txt"
    pairs: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2:
            a, b = (stem(w.lower()) for w in words)
            pairs.setdefault(a, set()).add(b)
            pairs.setdefault(b, set()).add(a)
    return pairs


def stem(word: str) -> str:
    """A very light suffix stripper (plural / -ed / -ing / -ly)."""
    for suffix in ("ing", "ed", "ly", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """Lower-case word tokens with "n't" split off ("didn't" -> "did", "n't")."""
    text = text.lower().replace("\u2019", "'").replace(",", "")
    text = re.sub(r"(\w)n't\b", r"\1 n't", text)
    return _WORD.findall(text)


ANTONYMS = load_antonyms()


def classify(context: str, hypothesis: str) -> tuple[str, dict[str, float]]:
    """Label a (context, hypothesis) pair and return softmax-ish probabilities."""
    ctx_tokens = tokens(context)
    hyp_tokens = tokens(hypothesis)
    ctx_stems = {stem(t) for t in ctx_tokens}
    ctx_numbers = {
        NUMBER_WORDS.get(t, t) for t in ctx_tokens if _NUMBER.match(t) or t in NUMBER_WORDS
    }
    content = [t for t in hyp_tokens if t not in STOPWORDS and t not in NEGATIONS]
    if content:
        covered = sum(1 for t in content if stem(t) in ctx_stems)
        coverage = covered / len(content)
    else:
        coverage = 1.0

    contradiction = 0.0
    hyp_neg = any(t in NEGATIONS for t in hyp_tokens)
    ctx_neg = any(t in NEGATIONS for t in ctx_tokens)
    if hyp_neg != ctx_neg:
        contradiction += 1.0
    for t in content:
        s = stem(t)
        if s not in ctx_stems and ANTONYMS.get(s, set()) & ctx_stems:
            contradiction += 1.0
        number = NUMBER_WORDS.get(t, t)
        if (_NUMBER.match(t) or t in NUMBER_WORDS) and ctx_numbers and number not in ctx_numbers:
            contradiction += 0.75

    logits = {
        "entailed": 4.0 * (coverage - ENTAIL_COVERAGE) + 0.5 - 1.5 * contradiction,
        "contradictory": 1.5 * contradiction - 0.5 + 0.5 * (coverage - NEUTRAL_COVERAGE),
        "neutral": 0.0,
    }
    top = max(logits.values())
    exps = {k: math.exp(v - top) for k, v in logits.items()}
    total = sum(exps.values())
    probs = {k: round(exps[k] / total, 4) for k in LABELS}
    return max(LABELS, key=lambda k: logits[k]), probs


def predict(task: str, instances: list[dict]) -> list[dict]:
    """Label each instance's (``context``, ``hypothesis``) pair."""
    out = []
    for inst in instances:
        label, probs = classify(str(inst.get("context") or ""), str(inst.get("hypothesis") or ""))
        out.append({"uid": inst.get("uid"), "label": label, "probs": probs})
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    serve(predict, {"name": "nli-overlap", "version": "1.0", "framework": "python-stdlib"})


if __name__ == "__main__":
    main()
