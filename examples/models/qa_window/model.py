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
    what which who whom whose when where why how many much than then so
    such also very just only into about over after before during while s did kind type
    there according"""
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
YEAR = re.compile(r"1\d{3}|20\d{2}")
UNIT = r"(?:\s+(?!(?:and|or|of|in|on|at|to|for|the|a|an|ago|later|before|after)\b)[a-z]+)"
MEASURE = re.compile(
    rf"(?:[$£€]\s?)?\b(?:\d[\d,]*(?:\.\d+)?|{NUMBER_WORDS})\b{UNIT}?"
    rf"(?:\s+(?:\d[\d,]*(?:\.\d+)?|{NUMBER_WORDS})\b{UNIT})*",
    re.IGNORECASE,
)
KIN = re.compile(
    r"\b(?:his|her|their|my|our)\s+(?:(?:late|older|younger|best|old)\s+)?(?:mother|father|"
    r"sister|brother|son|daughter|wife|husband|aunt|uncle|niece|nephew|cousin|grandmother|"
    r"grandfather|grandma|grandpa|girlfriend|boyfriend|partner|friend|teacher|coach|boss|"
    r"neighbou?r|roommate|colleague|coworker|parents|children|family)\b"
)
BREAK_WORDS = frozenset(
    {
        "in",
        "at",
        "on",
        "from",
        "to",
        "with",
        "for",
        "by",
        "near",
        "after",
        "before",
        "and",
        "which",
        "who",
        "when",
        "where",
        "because",
        "while",
        "but",
    }
)


def stem(word: str) -> str:
    """Lower-case and strip a common suffix, so "named" matches "name"."""
    word = word.lower()
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def content_stems(text: str) -> set[str]:
    """Stems of the non-stopword words of ``text``."""
    return {stem(w) for w in WORD.findall(text) if w.lower() not in STOPWORDS}


def windows(context: str) -> list[tuple[int, int, float]]:
    """(start, end, penalty) of sentences, plus pairs of adjacent sentences (penalised)."""
    sentences = [(m.start(), m.end()) for m in SENTENCE.finditer(context) if m.group().strip()]
    if not sentences:
        return [(0, len(context), 0.0)]
    pairs = [(a[0], b[1], 0.5) for a, b in zip(sentences, sentences[1:], strict=False)]
    return [(a, b, 0.0) for a, b in sentences] + pairs


def question_type(question: str) -> str:
    """Coarse answer type from the question's wh-word."""
    q = question.lower()
    if re.search(r"\bhow (long|far|old|tall|big|large|often|heavy|fast)\b|\bwhat time\b", q):
        return "measure"
    if re.search(r"\bhow (many|much)\b|\bwhat (percentage|number|amount)\b", q):
        return "number"
    if re.search(r"\b(when|what year|which year|what date|what century|what decade)\b", q):
        return "date"
    if re.search(r"\bwho(m|se)?\b|\bwhat (is|was) (the )?name of the (person|man|woman)\b", q):
        return "person"
    places = "city|country|state|place|region|continent|town|village|river|lake|island|county"
    if re.search(rf"\bwhere\b|\b(what|which) ({places})\b", q):
        return "place"
    return "other"


def _spans(pattern: re.Pattern[str], text: str, offset: int) -> list[tuple[int, int]]:
    return [
        (m.start() + offset, m.end() + offset) for m in pattern.finditer(text) if m.group().strip()
    ]


def _preceded_by(context: str, start: int, words: str) -> bool:
    return re.search(rf"\b(?:{words})\s+$", context[max(0, start - 12) : start]) is not None


def _candidates(
    context: str, qtype: str, w_start: int, w_end: int, qtype_detail: str = ""
) -> list[tuple[int, int]]:
    """Spans of the window that have the answer type the question asks for."""
    text = context[w_start:w_end]
    if qtype in ("number", "measure"):
        pattern = MEASURE if qtype == "measure" else NUMBER
        spans = _spans(pattern, text, w_start)
        # A bare year is not a count or a measure ("In 1855, ... for 22 years").
        spans = [(s, e) for s, e in spans if not YEAR.fullmatch(context[s:e])]
        if qtype == "measure":
            spans = [(s, e) for s, e in spans if " " in context[s:e].strip()] or spans
        return spans
    if qtype == "date":
        spans = _spans(DATE, text, w_start)
        if qtype_detail == "day":  # "on what date": prefer "May 13" over a bare year
            spans = [(s, e) for s, e in spans if not YEAR.fullmatch(context[s:e])] or spans
        return spans
    if qtype == "person":
        names = [
            (s, e)
            for s, e in _spans(CAPITALISED, text, w_start)
            if context[s:e].lower() not in STOPWORDS
            and not _preceded_by(context, s, "the|in|at|from|near|on|to|of|into")
        ]
        return names + _spans(KIN, text, w_start)
    if qtype == "place":
        spans = _spans(CAPITALISED, text, w_start)
        after = [(s, e) for s, e in spans if _preceded_by(context, s, "in|at|from|near|to|the")]
        return after or spans
    return []


def _best_candidate(
    context: str, candidates: list[tuple[int, int]], q_stems: set[str], anchors: list[int]
) -> tuple[int, int] | None:
    """The candidate not made of question words, closest to the question words in the window."""
    best: tuple[float, int, int] | None = None
    for start, end in candidates:
        cand_stems = content_stems(context[start:end])
        if cand_stems and cand_stems <= q_stems:
            continue  # the question's own words are not the answer
        if cand_stems & q_stems:
            continue
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
    scored = []
    for start, end, penalty in windows(context):
        overlap = len(q_stems & content_stems(context[start:end]))
        scored.append((overlap - penalty - 0.001 * (end - start) / 100.0, start, end))
    scored.sort(key=lambda t: (-t[0], t[1]))
    qtype = question_type(question)
    detail = "day" if re.search(r"\b(what|which) (date|day)\b", question.lower()) else ""
    # The best-matching window that holds a span of the asked-for type, if any.
    for score, w_start, w_end in scored[:4]:
        if score <= 0 and w_start != scored[0][1]:
            break
        words = list(WORD.finditer(context, w_start, w_end))
        anchors = [m.start() for m in words if stem(m.group()) in q_stems]
        candidates = _candidates(context, qtype, w_start, w_end, detail)
        found = _best_candidate(context, candidates, q_stems, anchors)
        if found:
            return re.sub(r"'s$", "", context[found[0] : found[1]])
    _, w_start, w_end = scored[0]
    words = list(WORD.finditer(context, w_start, w_end))
    return _phrase_after_anchor(context, words, q_stems) or context[w_start:w_end].strip()


def _phrase_after_anchor(context: str, words: list[re.Match[str]], q_stems: set[str]) -> str:
    """The longest short phrase of non-question words that directly follows a question word.

    Phrases end at punctuation, at a question word or at a preposition (except "of"), and
    lose leading and trailing stopwords.
    """
    best = ""
    best_score = -1.0
    i = 0
    while i < len(words):
        if stem(words[i].group()) not in q_stems:
            i += 1
            continue
        j = i + 1
        run: list[re.Match[str]] = []
        while j < len(words) and stem(words[j].group()) not in q_stems:
            gap = context[words[j - 1].end() : words[j].start()]
            if any(c in gap for c in ",.;:!?()") or (
                run and words[j].group().lower() in BREAK_WORDS
            ):
                break
            run.append(words[j])
            j += 1
        while run and run[0].group().lower() in STOPWORDS:
            run.pop(0)
        while run and run[-1].group().lower() in STOPWORDS:
            run.pop()
        if run:
            run = run[:5]
            score = min(len(run), 3) + 0.01 * i  # prefer fuller phrases, then later ones
            if score > best_score:
                best, best_score = context[run[0].start() : run[-1].end()], score
        i = max(j, i + 1)
    return best


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
