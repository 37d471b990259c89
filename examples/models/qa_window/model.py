"""Sliding-window extractive QA: find the context sentence that best matches the question,
then pick a span in it by question type. Answers are always exact substrings of the context.

    python examples/models/qa_window/model.py
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaeval_server import serve  # noqa: E402


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` as a set."""
    return frozenset(text.split())


STOPWORDS = _words(
    """a an the and or of to in on at by for with from as is are was were be been being am
    it its this that these those there here he she they them his her their him i you we us
    our your my me do does did has have had having will would can could should may might
    what which who whom whose when where why how many much name named called than then so
    such also very just only into about over after before during while s did kind type"""
)
MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan\\.?|Feb\\.?|Mar\\.?|Apr\\.?|Jun\\.?|Jul\\.?|Aug\\.?|Sept?\\.?|Oct\\.?|Nov\\.?|Dec\\.?"
)
DATE = re.compile(
    rf"\b(?:(?:\d{{1,2}} )?(?:{MONTHS})(?: \d{{1,2}})?,? \d{{3,4}}|(?:{MONTHS}) \d{{1,2}}"
    rf"|\d{{3,4}}s?|(?:{MONTHS}))\b"
)
NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|twenty|thirty|forty|fifty|hundred|hundreds|thousand|thousands|million|millions|"
    "billion|dozen|several|half"
)
NUMBER = re.compile(
    rf"(?:[$£€]\s?)?\b(?:\d[\d,]*(?:\.\d+)?|{NUMBER_WORDS})\b"
    rf"(?:[ -](?:{NUMBER_WORDS}|percent|%))*(?:\s?%)?",
    re.IGNORECASE,
)
CAPITALISED = re.compile(
    r"\b[A-Z][\w'.-]*(?:\s+(?:(?:of|the|de|van|von|da|del|and|y)\s+)?[A-Z][\w'.-]*)*"
)
SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+(?=\s|$)|$)")
WORD = re.compile(r"[A-Za-z0-9]+")


def stem(word: str) -> str:
    """Lower-case and strip a common suffix, so "founded" matches "founding"."""
    word = word.lower()
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> set[str]:
    """Stems of the non-stopword words of ``text``."""
    return {stem(w) for w in WORD.findall(text) if w.lower() not in STOPWORDS}


def windows(context: str) -> list[tuple[int, int]]:
    """(start, end) spans of sentences, plus pairs of adjacent sentences."""
    sentences = [(m.start(), m.end()) for m in SENTENCE.finditer(context) if m.group().strip()]
    if not sentences:
        return [(0, len(context))]
    pairs = [(a[0], b[1]) for a, b in zip(sentences, sentences[1:], strict=False)]
    return sentences + pairs


def question_type(question: str) -> str:
    """Coarse answer type from the question's wh-word."""
    q = question.lower()
    if re.search(
        r"\bhow (many|much|long|old|far|tall|big|large|often)\b|\bwhat (percentage|number"
        r"|amount)\b",
        q,
    ):
        return "number"
    if re.search(r"\b(when|what year|which year|what date|what century|what decade)\b", q):
        return "date"
    if re.search(r"\bwho(m|se)?\b|\bwhat (is|was) (the )?name\b", q):
        return "person"
    if re.search(r"\bwhere\b|\bwhat (city|country|state|place|region|continent)\b", q):
        return "place"
    return "other"


def _spans(pattern: re.Pattern[str], text: str, offset: int) -> list[tuple[int, int]]:
    return [
        (m.start() + offset, m.end() + offset) for m in pattern.finditer(text) if m.group().strip()
    ]


def _best_candidate(
    context: str, candidates: list[tuple[int, int]], q_stems: set[str], anchors: list[int]
) -> tuple[int, int] | None:
    """The candidate not made of question words, closest to the question words in the window."""
    best: tuple[float, int, int] | None = None
    for start, end in candidates:
        cand_stems = content_stems(context[start:end])
        if cand_stems and cand_stems <= q_stems:
            continue  # the question's own words are not the answer
        distance = min((abs(a - start) for a in anchors), default=0)
        score = distance + 0.01 * (end - start)
        if best is None or score < best[0]:
            best = (score, start, end)
    return None if best is None else (best[1], best[2])


def answer(context: str, question: str) -> str:
    """An exact substring of ``context`` answering ``question`` (empty if context is empty)."""
    if not context.strip():
        return ""
    q_stems = content_stems(question)
    best_window, best_score = (0, len(context)), -1.0
    for start, end in windows(context):
        w_stems = content_stems(context[start:end])
        overlap = len(q_stems & w_stems)
        score = overlap - 0.001 * (end - start) / 100.0
        if score > best_score:
            best_window, best_score = (start, end), score
    w_start, w_end = best_window
    text = context[w_start:w_end]
    anchors = [m.start() + w_start for m in WORD.finditer(text) if stem(m.group()) in q_stems]

    qtype = question_type(question)
    patterns = {"number": NUMBER, "date": DATE, "person": CAPITALISED, "place": CAPITALISED}
    if qtype in patterns:
        candidates = _spans(patterns[qtype], text, w_start)
        if qtype == "place":
            after_prep = [
                (s, e)
                for s, e in candidates
                if re.search(r"\b(in|at|from|to|near)\s+(the\s+)?$", context[max(0, s - 9) : s])
            ]
            candidates = after_prep or candidates
        if qtype == "person":
            # Skip a capitalised word that merely starts the sentence and is a stopword.
            candidates = [(s, e) for s, e in candidates if context[s:e].lower() not in STOPWORDS]
        found = _best_candidate(context, candidates, q_stems, anchors)
        if found:
            return context[found[0] : found[1]]
    return _phrase_after_overlap(context, w_start, w_end, q_stems)


def _phrase_after_overlap(context: str, w_start: int, w_end: int, q_stems: set[str]) -> str:
    """The shortest phrase following the last question word in the window."""
    words = list(WORD.finditer(context, w_start, w_end))
    last = -1
    for i, m in enumerate(words):
        if stem(m.group()) in q_stems:
            last = i
    rest = [m for m in words[last + 1 :] if m.group().lower() not in STOPWORDS]
    if not rest:
        rest = [m for m in words if stem(m.group()) not in q_stems] or words
    if not rest:
        return context[w_start:w_end].strip()
    first = rest[0]
    end = first.end()
    # Extend over following non-stopword words until punctuation, at most 4 words.
    for m in rest[1:4]:
        between = context[end : m.start()]
        if any(c in between for c in ",.;:!?()") or between.strip():
            break
        end = m.end()
    return context[first.start() : end]


def predict(task: str, instances: list[dict]) -> list[dict]:
    """Answer each instance's ``question`` from its ``context``."""
    return [
        {
            "uid": inst.get("uid"),
            "answer": answer(str(inst.get("context") or ""), str(inst.get("question") or "")),
        }
        for inst in instances
    ]


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    serve(predict, {"name": "qa-window", "version": "1.0", "framework": "python-stdlib"})


if __name__ == "__main__":
    main()
