"""Visual question answering accuracy, as the VQA benchmark defines it.

An answer is right as far as enough annotators gave it: against ``n`` reference answers,
each leave-one-out subset of ``n - 1`` references scores ``min(#matches / 3, 1)`` and the
answer's accuracy is the mean over the ``n`` subsets (with VQA's ten answers: the mean over
the ten sets of nine). Answers and references are normalised as the official evaluation
does: lower case, punctuation removed (a period only where it is not a decimal point),
number words as digits, articles dropped and common contractions given their apostrophe.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from metrics._checks import check_pair

_PUNCTUATION = [";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">",
                "<", "@", "`", ",", "?", "!"]  # fmt: skip
_COMMA_BETWEEN_DIGITS = re.compile(r"(\d)(,)(\d)")
# The official evaluation's pattern, kept as written: in effect "a period not before a digit".
_PERIOD_NOT_DECIMAL = re.compile(r"(?!<=\d)(\.)(?!\d)")
_NUMBERS = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4",
            "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}  # fmt: skip
_ARTICLES = {"a", "an", "the"}
_CONTRACTIONS = {"dont": "don't", "doesnt": "doesn't", "isnt": "isn't", "arent": "aren't",
                 "cant": "can't", "wont": "won't", "didnt": "didn't", "hasnt": "hasn't",
                 "havent": "haven't", "wasnt": "wasn't", "werent": "weren't",
                 "shouldnt": "shouldn't", "couldnt": "couldn't", "wouldnt": "wouldn't",
                 "its": "it's", "thats": "that's", "whats": "what's", "theres": "there's"}  # fmt: skip


def normalize_vqa_answer(text: str) -> str:
    """An answer as the official VQA evaluation compares it."""
    text = " ".join(text.replace("\n", " ").replace("\t", " ").strip().lower().split())
    for mark in _PUNCTUATION:
        joined = (mark + " " in text or " " + mark in text) or _COMMA_BETWEEN_DIGITS.search(text)
        text = text.replace(mark, "") if joined else text.replace(mark, " ")
    text = _PERIOD_NOT_DECIMAL.sub("", text)
    words = []
    for word in text.split():
        word = _NUMBERS.get(word, word)
        if word not in _ARTICLES:
            words.append(_CONTRACTIONS.get(word, word))
    return " ".join(words)


def vqa_accuracy_one(references: Sequence[str], answer: str) -> float:
    """One answer's accuracy (0..1) against its references (3 or more, repeats kept)."""
    if len(references) < 2:
        raise ValueError("VQA accuracy needs at least two reference answers")
    given = normalize_vqa_answer(answer)
    matches = [normalize_vqa_answer(ref) == given for ref in references]
    total = sum(matches)
    # leaving reference i out leaves total - matches[i] matching references
    return float(np.mean([min((total - hit) / 3.0, 1.0) for hit in matches]))


def per_example_vqa(gold: Sequence[Sequence[str]], pred: Sequence[str]) -> np.ndarray:
    """Each answer's accuracy (0..1)."""
    check_pair(gold, pred)
    return np.asarray(
        [vqa_accuracy_one(refs, answer) for refs, answer in zip(gold, pred, strict=True)]
    )


def vqa_accuracy(gold: Sequence[Sequence[str]], pred: Sequence[str]) -> float:
    """Mean VQA accuracy on the 0..100 scale."""
    if len(pred) == 0:
        check_pair(gold, pred)
        return 0.0
    return 100.0 * float(per_example_vqa(gold, pred).mean())


def answer_agreement(original: Sequence[str], perturbed: Sequence[str]) -> float:
    """Percentage of answers unchanged (after VQA normalisation) by a perturbation."""
    check_pair(original, perturbed)
    same = [
        normalize_vqa_answer(o) == normalize_vqa_answer(p)
        for o, p in zip(original, perturbed, strict=True)
    ]
    return 100.0 * float(np.mean(same))
