"""The perturbation interface, its registry, and how a perturbation is applied to an Example.

A perturbation is pure: ``apply(text, seed)`` returns the same string for the same arguments in
any process. The per-example seed comes from :func:`example_seed` (a stable hash of the uid and
the set's seed), so every model sees identical perturbed inputs.
"""

from __future__ import annotations

import abc
import hashlib
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from configs.vocabulary.examples import Example
from configs.vocabulary.registry import Registry

# Modules that register the built-in perturbations when imported.
_BUILTIN_MODULES = (
    "perturbations.typo",
    "perturbations.paraphrase",
    "perturbations.fairness",
    "perturbations.image",
)


class Perturbation(abc.ABC):
    """A deterministic string-to-string transformation of one kind of input field (text, or
    an image as base64), identified by ``name`` and ``version``.

    Bump ``version`` whenever the output for some (text, seed) changes: it is part of the cache
    key and of every score's provenance.
    """

    name: str
    version: str
    # Term swaps (fairness) must treat every mention alike: an example whose QA answer holds
    # a swappable term is left unchanged (the kept answer span would contradict the rest).
    swaps_terms: bool = False
    # The kind of input field it changes: "text" (the text is the string itself) or "image"
    # (the string is a base64 PNG or JPEG). A task's fields of other kinds are left alone.
    field_kind: str = "text"

    @abc.abstractmethod
    def apply(self, text: str, seed: int) -> str:
        """The perturbed ``text``; a pure function of (text, seed)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, version={self.version!r})"


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


PerturbationFactory = Callable[[], Perturbation]
# Short name -> zero-argument factory (often the class); built-ins load on first lookup.
REGISTRY: Registry[PerturbationFactory] = Registry("perturbation", load=_load_builtins)


def register(name: str) -> Callable[[PerturbationFactory], PerturbationFactory]:
    """Decorator registering a zero-argument factory under ``name``."""
    return REGISTRY.register(name)


def perturbation_names() -> tuple[str, ...]:
    """All registered short names, sorted."""
    return REGISTRY.names()


def get_perturbation(name: str) -> Perturbation:
    """A new instance of the perturbation registered as ``name`` (:class:`UnknownName` with a
    did-you-mean suggestion otherwise)."""
    perturbation = REGISTRY.get(name)()
    if perturbation.name != name:
        raise ValueError(f"factory for {name!r} built a perturbation named {perturbation.name!r}")
    return perturbation


@dataclass(frozen=True)
class Declared:
    """What a registered perturbation says of itself before it runs."""

    field_kind: str
    swaps_terms: bool


class _Declarations:
    """The registry as a task's loader reads it: each name's declaration (a factory that
    is not a Perturbation class is built once to ask it)."""

    def __init__(self) -> None:
        self._known: dict[str, Declared] = {}

    def get(self, name: str) -> Declared:
        if name not in self._known:
            factory = REGISTRY.get(name)
            # a class says it in its attributes; a factory function is asked by building
            source = factory if isinstance(factory, type) else factory()
            self._known[name] = Declared(
                getattr(source, "field_kind", "text"), getattr(source, "swaps_terms", False)
            )
        return self._known[name]


DECLARATIONS = _Declarations()


def example_seed(uid: str, seed: int) -> int:
    """The per-example seed: a stable 64-bit hash of (seed, uid), identical in every process."""
    digest = hashlib.blake2b(f"{seed}\x1f{uid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _perturb_around_answer(
    context: str, answer: str, start: int, perturbation: Perturbation, seed: int
) -> tuple[str, int]:
    """Perturb the text before and after the answer span separately; the span is kept verbatim.
    Returns (new context, new answer_start)."""
    end = start + len(answer)
    if start < 0 or context[start:end] != answer:
        raise ValueError(
            f"answer_start={start} does not point at the answer {answer!r} in the context"
        )
    before = perturbation.apply(context[:start], seed)
    after = perturbation.apply(context[end:], seed)
    return before + answer + after, len(before)


def perturb_example(
    example: Example, perturbation: Perturbation, seed: int, fields: Sequence[str]
) -> Example:
    """``example`` with its input ``fields`` perturbed; uid, target and slices are kept.

    For extractive QA (``answer_start`` set and ``'context'`` in ``fields``) the answer span is
    never changed and ``answer_start`` is recomputed for the new context. Every field gets the
    same per-example seed, so a term swap maps a name alike in context and question.
    """
    per_example = example_seed(example.uid, seed)
    inputs = dict(example.inputs)
    answer_start = example.answer_start
    if (
        perturbation.swaps_terms
        and answer_start is not None
        and perturbation.apply(example.target, per_example) != example.target
    ):
        return example
    for field in fields:
        if field not in inputs:
            raise KeyError(f"example {example.uid!r} has no input field {field!r}")
        if field == "context" and answer_start is not None:
            inputs[field], answer_start = _perturb_around_answer(
                inputs[field], example.target, answer_start, perturbation, per_example
            )
        else:
            inputs[field] = perturbation.apply(inputs[field], per_example)
    return replace(example, inputs=inputs, answer_start=answer_start)


def changed(original: Example, perturbed: Example) -> bool:
    """Whether the perturbation changed any input (or the answer offset)."""
    return (
        dict(original.inputs) != dict(perturbed.inputs)
        or original.answer_start != perturbed.answer_start
    )
