"""Extractive QA metrics with the official SQuAD v1.1 answer normalisation.

A gold entry is one answer string or a sequence of acceptable answers; a prediction is
scored against its best-matching gold answer, as the official script does.

One deliberate departure from the v1.1 script: when the gold answer and the prediction
both normalise to the empty string, ``token_f1`` is 1 (v1.1 gives 0 there while its exact
match gives 1; SQuAD v2.0 fixed this the same way).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from metrics._checks import check_pair

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)

Gold = str | Sequence[str]


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(gold: str, pred: str) -> float:
    """1.0 when the normalised answers are equal, else 0.0."""
    return float(normalize_answer(gold) == normalize_answer(pred))


def token_f1(gold: str, pred: str) -> float:
    """Bag-of-tokens F1 (0..1) between the normalised answers."""
    gold_tokens = normalize_answer(gold).split()
    pred_tokens = normalize_answer(pred).split()
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)
    common = sum((Counter(gold_tokens) & Counter(pred_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _best(score: Callable[[str, str], float], gold: Gold, pred: str) -> float:
    answers = [gold] if isinstance(gold, str) else list(gold)
    if not answers:
        raise ValueError("a gold entry has no acceptable answer.")
    return max(score(answer, pred) for answer in answers)


def per_example(
    score: Callable[[str, str], float], golds: Sequence[Gold], preds: Sequence[str]
) -> np.ndarray:
    """Per-example scores (0..1), each against the best gold answer."""
    check_pair(golds, preds)
    return np.array([_best(score, g, p) for g, p in zip(golds, preds, strict=True)], float)


def qa_exact_match(golds: Sequence[Gold], preds: Sequence[str]) -> float:
    """Mean exact match over examples (0..100)."""
    return 100.0 * float(per_example(exact_match, golds, preds).mean())


def qa_f1(golds: Sequence[Gold], preds: Sequence[str]) -> float:
    """Mean token F1 over examples (0..100)."""
    return 100.0 * float(per_example(token_f1, golds, preds).mean())
