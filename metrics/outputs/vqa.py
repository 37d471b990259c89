"""Visual question answering: the model answers a short answer; gold is 3-10 annotators'
answers (``answers``, repeats kept), scored with VQA accuracy.

Agreement under perturbation: the share of answers unchanged after VQA normalisation.
Fooled: the answer's VQA accuracy against the writer's answers is 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metrics.outputs.base import BadGold, Gold, OutputType
from metrics.vqa import answer_agreement, vqa_accuracy_one

ANSWERS = "answers"
MIN_ANSWERS, MAX_ANSWERS = 3, 10
MAX_ANSWER_CHARS = 100  # a short answer: VQA's are a few words


def _read_gold(row: Mapping[str, Any], key: str, labels: Sequence[str]) -> Gold:
    answers = row.get(ANSWERS)
    if not isinstance(answers, list) or not all(isinstance(a, str) and a.strip() for a in answers):
        raise BadGold(f"{ANSWERS!r} must be a list of non-empty strings")
    if not MIN_ANSWERS <= len(answers) <= MAX_ANSWERS:
        raise BadGold(
            f"{ANSWERS!r} holds {MIN_ANSWERS} to {MAX_ANSWERS} answers, not {len(answers)}"
        )
    for answer in answers:
        if len(answer) > MAX_ANSWER_CHARS or not answer.isprintable():
            raise BadGold(
                f"each of {ANSWERS!r} is a short answer on one line (at most "
                f"{MAX_ANSWER_CHARS} printable characters)"
            )
    return Gold(answers[0], tuple(answers[1:]))


def _written_answers(intended: Mapping[str, Any], key: str) -> tuple[str, ...]:
    answers = intended.get(ANSWERS)
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ValueError(f"the intended answer has no list of strings {ANSWERS!r}")
    return tuple(answers)


def _fooled(intended: Sequence[str], given: str, threshold: float) -> bool:
    return vqa_accuracy_one(intended, given) <= threshold


VQA = OutputType(
    name="vqa",
    key="answer",
    reported=("vqa_accuracy",),
    read_gold=_read_gold,
    agreement=answer_agreement,
    fooled=_fooled,
    fooled_threshold=0.0,
    several_references=True,
    extra_gold_fields=(ANSWERS,),
    written_required=(ANSWERS,),
    gold_under_key=False,
    written_references=_written_answers,
    write_hint="send 3 to 10 answers under 'answers'",
    form="list",
    noun="answers",
)
