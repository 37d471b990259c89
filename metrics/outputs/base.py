"""What a task's output type declares: the one place the code learns what a model answers,
how gold is written and read, which metrics score it, how a model agrees with itself under
perturbation and what fools it in the dynamic loop. A new type is one module beside this
one and an entry in the registry (``metrics.outputs``); nothing else branches on a type.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class BadGold(ValueError):
    """A dataset row's gold does not fit the output type; ``str()`` says why."""


@dataclass(frozen=True)
class Gold:
    """The gold of one row: ``target`` (the first reference), further ``references`` and,
    for extractive answers, the answer's character offset into the context."""

    target: str
    references: tuple[str, ...] = ()
    answer_start: int | None = None

    @property
    def all_references(self) -> tuple[str, ...]:
        return (self.target, *self.references)


# (row, key, labels) -> Gold, or BadGold naming the problem
ReadGold = Callable[[Mapping[str, Any], str, Sequence[str]], Gold]
# (model outputs on the originals, outputs on the perturbed inputs) -> 0..100
Agreement = Callable[[Sequence[str], Sequence[str]], float]
# (intended gold references, the model's answer, threshold) -> fooled?
Fooled = Callable[[Sequence[str], str, float], bool]
# (a writer's intended gold, the task's key) -> its references, first the main one
WrittenReferences = Callable[[Mapping[str, Any], str], tuple[str, ...]]


def key_and_references(intended: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """Gold under the key, then any further ``references`` (how most types write it)."""
    more = intended.get("references") or []
    found = (intended.get(key), *(more if isinstance(more, list) else [more]))
    if not all(isinstance(ref, str) for ref in found):
        raise ValueError(f"the intended answer has no string {key!r}")
    return tuple(str(ref) for ref in found)


@dataclass(frozen=True)
class OutputType:
    """One kind of task output. ``key`` is the JSON field a model answers with and a row's
    gold is under (a task may rename it where ``renamable``); every task of the type reports
    the ``reported`` metrics beside its own one (label tasks report only their own)."""

    name: str
    key: str
    reported: tuple[str, ...]
    read_gold: ReadGold
    agreement: Agreement
    fooled: Fooled
    fooled_threshold: float  # on the scale ``fooled`` compares against
    takes_labels: bool = False
    renamable: bool = False
    several_references: bool = False  # gold is scored as all references, not the first
    secondary_intervals: bool = False  # the metrics beside the task's own get intervals too
    # A writer's example in the dynamic loop: the gold fields beside the key, those of them
    # it must send, and what to tell a writer who sent no gold ({labels} is filled in).
    extra_gold_fields: tuple[str, ...] = ()
    written_required: tuple[str, ...] = ()
    write_hint: str = "send the intended output"
    # how a page asks a writer for gold: "choice", "span", "text", or "list" (one per line,
    # sent under the first of ``extra_gold_fields``)
    form: str = "text"
    noun: str = "output"  # what a writer intends, in a sentence ("the label you intend")
    gold_under_key: bool = True  # False: gold lives only in ``extra_gold_fields`` (VQA)
    # The round's (and the adversary's) ``qa_f1_threshold`` setting replaces
    # ``fooled_threshold``; the other types' thresholds are not settings yet.
    uses_qa_f1_threshold: bool = False
    # The range a task may set its own threshold in (``output.fooled_threshold``), on the
    # scale ``fooled`` compares against; None: the type's threshold is fixed.
    threshold_range: tuple[float, float] | None = None
    written_references: WrittenReferences = key_and_references
    # Metrics reported beside the others only when available (spBLEU: an operator's model)
    optional: Callable[[], tuple[str, ...]] = tuple

    def gold_fields(self, key: str) -> tuple[str, ...]:
        """Every field a row's gold is written with, under the task's ``key``."""
        return (key, *self.extra_gold_fields) if self.gold_under_key else self.extra_gold_fields

    def required_when_written(self, key: str) -> tuple[str, ...]:
        """The gold fields a writer must send."""
        return ((key,) if self.gold_under_key else ()) + self.written_required

    def gold_for_scoring(self, gold: Gold) -> Any:
        """What this type's metrics take as one gold entry."""
        return gold.all_references if self.several_references else gold.target

    def secondary_metrics(self, primary: str) -> tuple[str, ...]:
        """The metrics reported beside a task's own one (with those ``optional`` says are
        available in this process)."""
        return tuple(name for name in (*self.reported, *self.optional()) if name != primary)


def text_field(row: Mapping[str, Any], key: str) -> str:
    """``row[key]`` when it is a string, else BadGold."""
    value = row.get(key)
    if not isinstance(value, str):
        raise BadGold(f"missing or non-string field {key!r}")
    return value
