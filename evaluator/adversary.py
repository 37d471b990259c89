"""The automated adversary's search: inputs close to a held-out example that flip the
current top models' predictions. Pure: no I/O; models are asked through ``query``.

For each source example (in a seeded order) every target model is asked the original
first: only a model right on it can be flipped. Candidates come from the task's own
perturbations (``typo`` and ``paraphrase`` word substitutions, and for fairness-safe tasks
the name swaps), one per operator and candidate seed, cut down to at most ``edit_budget``
word edits (the first changed spans, in reading order) and tried closest first. The first
candidate that fools every right model is proposed; otherwise the one that fooled most
(the closest among equals). At most one proposal per source.

Deterministic for a seed: the source order, the candidates and their order depend on the
seed, the uids and the texts only (stable hashes, never Python's salted ``hash``). Bounded:
no query is issued past ``max_queries``; a source whose original queries no longer fit is
not started. Resumable: ``on_source_done`` receives the checkpoint after every source, and
``adversary_search(..., start=checkpoint)`` continues exactly where it left off.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.jobs import AdversaryCheckpoint
from metrics.collection import DEFAULT_QA_F1_THRESHOLD, is_fooled
from metrics.outputs import get_output_type
from perturbations.perturbation import example_seed, get_perturbation, perturb_example

Query = Callable[[str, Mapping[str, str]], Prediction]
STOPPED = ("budget", "proposals", "sources", "models")
_TOKENS = re.compile(r"\S+|\s+")
FIRST_SOURCE = AdversaryCheckpoint()  # where a run without a checkpoint starts


# The word substitutions an owner may pick (name swaps come from the task's fairness
# perturbations when it has them, not from this list).
OPERATORS = ("typo", "paraphrase")


@dataclass(frozen=True)
class AdversarySettings:
    """An attack's settings (all bounded; ValueError on a value out of range)."""

    seed: int = 0
    max_queries: int = 200
    edit_budget: int = 3
    candidates_per_source: int = 8
    max_proposals: int = 20
    operators: tuple[str, ...] = ("typo", "paraphrase")
    name_swaps: bool = False
    qa_f1_threshold: float = DEFAULT_QA_F1_THRESHOLD

    def __post_init__(self) -> None:
        for name in ("max_queries", "edit_budget", "candidates_per_source", "max_proposals"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a whole number of at least 1")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError("seed must be a whole number of at least 0")
        if not 0.0 < self.qa_f1_threshold <= 1.0:
            raise ValueError("qa_f1_threshold must be in (0, 1]")
        if not self.operators and not self.name_swaps:
            raise ValueError("an attack needs at least one operator")
        unknown = sorted(set(self.operators) - set(OPERATORS))
        if unknown:
            raise ValueError(
                f"unknown operators: {', '.join(unknown)} (known: {', '.join(OPERATORS)})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "operators": list(self.operators)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AdversarySettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown attack settings: {', '.join(unknown)}")
        values = dict(data)
        if "operators" in values:
            values["operators"] = tuple(values["operators"])
        return cls(**values)


@dataclass(frozen=True)
class Proposal:
    """A candidate that fooled at least one model right on its source."""

    source_uid: str
    inputs: Mapping[str, str]
    intended: Mapping[str, Any]  # the source's gold: {"label": L} or {"answer", "answer_start"}
    fooled_models: tuple[str, ...]
    answers: Mapping[str, str]  # model id -> its output on the candidate
    edits: int
    operator: str


@dataclass(frozen=True)
class AdversaryReport:
    proposals: tuple[Proposal, ...]
    checkpoint: AdversaryCheckpoint
    stopped_because: str  # one of STOPPED

    @property
    def queries_used(self) -> int:
        return self.checkpoint.queries_used

    @property
    def failed_models(self) -> Mapping[str, str]:
        return self.checkpoint.failed_models


@dataclass(frozen=True)
class Candidate:
    example: Example
    edits: int
    operator: str


def source_order(sources: Sequence[Example], seed: int) -> list[Example]:
    """The sources in the attack's seeded order."""
    return sorted(sources, key=lambda e: (example_seed(e.uid, seed), e.uid))


def candidates(task: TaskSpec, example: Example, spec: AdversarySettings) -> list[Candidate]:
    """Up to ``candidates_per_source`` distinct candidates within the edit budget, closest
    first (ties: operator order, then candidate seed)."""
    operators = list(spec.operators)
    if spec.name_swaps:
        operators += [p.name for p in task.fairness]
    found: list[tuple[int, int, int, Candidate]] = []
    seen = {_key(example)}
    for rank, name in enumerate(operators):
        perturbation = get_perturbation(name)
        # text fields only: an image is never the adversary's to edit
        fields_ = task.fields_to_perturb("text", perturbation.swaps_terms)
        if perturbation.field_kind != "text" or not fields_:
            continue
        for k in range(spec.candidates_per_source):
            seed = example_seed(f"{name}/{k}", spec.seed)
            limited = within_budget(example, perturb_example(example, perturbation, seed, fields_),
                                    spec.edit_budget)  # fmt: skip
            if limited is None or _key(limited[0]) in seen:
                continue
            seen.add(_key(limited[0]))
            found.append((limited[1], rank, k, Candidate(limited[0], limited[1], name)))
    found.sort(key=lambda item: item[:3])
    return [item[3] for item in found[: spec.candidates_per_source]]


def within_budget(original: Example, perturbed: Example, budget: int) -> tuple[Example, int] | None:
    """``perturbed`` cut to its first ``budget`` word edits, with their count (None: no
    edit, or its first edit alone is over the budget). A QA context is edited before and
    after the answer apart, so the answer span stays verbatim and its offset is recomputed."""
    units = _units(original, perturbed)
    remaining, total = budget, 0
    rebuilt: dict[tuple[str, str], str] = {}
    for unit_key, before, after in units:
        text, cost = _limited(before, after, remaining)
        rebuilt[unit_key] = text
        remaining, total = remaining - cost, total + cost
    if total == 0:
        return None
    inputs = dict(original.inputs)
    answer_start = original.answer_start
    for (name, part), text in rebuilt.items():
        if part == "":
            inputs[name] = text
    if ("context", "before") in rebuilt and original.answer_start is not None:
        head, tail = rebuilt[("context", "before")], rebuilt[("context", "after")]
        inputs["context"], answer_start = head + original.target + tail, len(head)
    return replace(original, inputs=inputs, answer_start=answer_start), total


def adversary_search(
    task: TaskSpec,
    sources: Sequence[Example],
    model_ids: Sequence[str],
    query: Query,
    spec: AdversarySettings,
    *,
    start: AdversaryCheckpoint = FIRST_SOURCE,
    on_source_done: Callable[[AdversaryCheckpoint, list[Proposal]], None] | None = None,
) -> AdversaryReport:
    """Search ``sources`` for proposals against ``model_ids`` (see the module docstring)."""
    search = _Search(task, list(model_ids), query, spec, start)
    order = source_order(sources, spec.seed)
    proposals: list[Proposal] = []
    stopped = "sources"
    while search.next_source < len(order):
        if search.proposals >= spec.max_proposals:
            stopped = "proposals"
            break
        if not search.targets():
            stopped = "models"
            break
        if search.used + len(search.targets()) > spec.max_queries:
            stopped = "budget"
            break
        found = search.source(order[search.next_source])
        search.next_source += 1
        search.proposals += len(found)
        proposals += found
        if on_source_done is not None:
            on_source_done(search.checkpoint(), found)
        if search.out_of_budget:
            stopped = "budget"
            break
    return AdversaryReport(tuple(proposals), search.checkpoint(), stopped)


class _Search:
    """The attack's running state: queries used, models dropped, where it stands."""

    def __init__(
        self,
        task: TaskSpec,
        models: list[str],
        query: Query,
        spec: AdversarySettings,
        at: AdversaryCheckpoint,
    ) -> None:
        self.task, self.models, self.query, self.spec = task, models, query, spec
        self.next_source, self.used, self.proposals = at.next_source, at.queries_used, at.proposals
        self.failed = dict(at.failed_models)
        self.out_of_budget = False

    def checkpoint(self) -> AdversaryCheckpoint:
        return AdversaryCheckpoint(self.next_source, self.used, self.proposals, dict(self.failed))

    def targets(self) -> list[str]:
        return [m for m in self.models if m not in self.failed]

    def source(self, example: Example) -> list[Proposal]:
        intended = _intended(self.task, example)
        right = [m for m in self.targets() if self._right(m, example.inputs, intended)]
        best: tuple[int, Candidate, dict[str, str], list[str]] | None = None
        for candidate in candidates(self.task, example, self.spec) if right else []:
            if self.used + len(right) > self.spec.max_queries:
                self.out_of_budget = True
                break
            answers, fooled = self._try(candidate, right)
            if fooled and (best is None or len(fooled) > best[0]):
                best = (len(fooled), candidate, answers, fooled)
            if len(fooled) == len(right):
                break
        if best is None:
            return []
        _, candidate, answers, fooled = best
        return [
            Proposal(
                example.uid, dict(candidate.example.inputs), _intended(self.task, candidate.example),
                tuple(fooled), answers, candidate.edits, candidate.operator,
            )
        ]  # fmt: skip

    def _right(self, model: str, inputs: Mapping[str, str], intended: Mapping[str, Any]) -> bool:
        answer = self._ask(model, inputs)
        return answer is not None and not self._fooled(intended, answer)

    def _try(self, candidate: Candidate, right: list[str]) -> tuple[dict[str, str], list[str]]:
        intended = _intended(self.task, candidate.example)
        answers: dict[str, str] = {}
        fooled: list[str] = []
        for model in right:
            answer = self._ask(model, candidate.example.inputs)
            if answer is None:
                continue
            answers[model] = answer.output
            if self._fooled(intended, answer):
                fooled.append(model)
        return answers, fooled

    def _ask(self, model: str, inputs: Mapping[str, str]) -> Prediction | None:
        """One query (counted even when it fails); a model that fails is dropped."""
        if model in self.failed:
            return None
        self.used += 1
        try:
            return self.query(model, dict(inputs))
        except Exception as exc:  # the model's failure, whatever it is, ends its part
            self.failed[model] = f"{type(exc).__name__}: {exc}"[:300]
            return None

    def _fooled(self, intended: Mapping[str, Any], answer: Prediction) -> bool:
        uses_setting = get_output_type(self.task.output_type).uses_qa_f1_threshold
        threshold = self.spec.qa_f1_threshold if uses_setting else self.task.fooled_threshold
        return is_fooled(self.task.output_type, intended, answer, threshold, self.task.output_key)


def _intended(task: TaskSpec, example: Example) -> dict[str, Any]:
    """The source's gold as a writer would give it: the output key, and the answer offset
    or further references where the example has them."""
    intended: dict[str, Any] = {task.output_key: example.target}
    if example.answer_start is not None:
        intended["answer_start"] = example.answer_start
    if example.references:
        intended["references"] = list(example.references)
    return intended


def _key(example: Example) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(example.inputs.items()))


def _units(original: Example, perturbed: Example) -> list[tuple[tuple[str, str], str, str]]:
    """(unit, original text, perturbed text) per input field; a QA context is two units."""
    units = []
    for name, text in original.inputs.items():
        new = perturbed.inputs[name]
        if new == text:  # unchanged (an image field, say): nothing to count or cut
            continue
        starts = (original.answer_start, perturbed.answer_start)
        if name == "context" and None not in starts:
            end, new_end = (s + len(original.target) for s in starts)  # type: ignore[operator]
            units.append(((name, "before"), text[: starts[0]], new[: starts[1]]))
            units.append(((name, "after"), text[end:], new[new_end:]))
        else:
            units.append(((name, ""), text, new))
    return units


def _limited(before: str, after: str, budget: int) -> tuple[str, int]:
    """``before`` with the first changed spans of ``after`` applied while their word count
    fits ``budget``; the text and the words changed."""
    old, new = _TOKENS.findall(before), _TOKENS.findall(after)
    out: list[str] = []
    spent = 0
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        cost = max(_words(old[i1:i2]), _words(new[j1:j2]))
        if tag != "equal" and 0 < cost <= budget - spent:
            out += new[j1:j2]
            spent += cost
        else:
            out += old[i1:i2]
    return "".join(out), spent


def _words(tokens: Sequence[str]) -> int:
    return sum(1 for token in tokens if not token.isspace())
