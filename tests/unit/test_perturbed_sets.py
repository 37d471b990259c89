"""Perturbed-set cache: canonical bytes, reuse from the blob store, keys, counts."""

from __future__ import annotations

import pytest

from configs.vocabulary.examples import Example
from evaluator.inputs.perturbed_sets import (
    PerturbedSet,
    dataset_hash,
    from_jsonl,
    materialise,
    to_jsonl,
)
from perturbations.perturbation import Perturbation, get_perturbation
from store.blobs import LocalBlobStore

EXAMPLES = (
    Example(uid="a", inputs={"text": "He thanked his mother."}, target="pos", slices={"g": "m"}),
    Example(uid="b", inputs={"text": "The weather is nice."}, target="pos"),
    Example(uid="c", inputs={"text": "She met Emily at King's Cross."}, target="neg"),
    Example(
        uid="d",
        inputs={"question": "Who came?", "context": "His sister came with John."},
        target="John",
        answer_start=21,
    ),
    Example(
        uid="e",
        inputs={"question": "Where did John go?", "context": "His sister and John went to Oslo."},
        target="Oslo",
        answer_start=28,
    ),
)


class Counting(Perturbation):
    """Upper-cases texts containing 'e', counting calls (to see recomputation)."""

    name = "counting"

    def __init__(self, version: str = "1") -> None:
        self.version = version
        self.calls = 0

    def apply(self, text: str, seed: int) -> str:
        self.calls += 1
        return text.upper() if "e" in text else text


@pytest.fixture
def blobs(tmp_path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


def test_dataset_hash_is_stable_and_order_sensitive():
    assert dataset_hash(EXAMPLES) == dataset_hash(list(EXAMPLES))
    assert dataset_hash(EXAMPLES) != dataset_hash(EXAMPLES[::-1])
    assert len(dataset_hash(EXAMPLES)) == 64


def test_only_changed_examples_are_kept_with_counts(blobs):
    texts = EXAMPLES[:3]
    result = materialise(
        texts, dataset_hash(texts), get_perturbation("fairness"), 0, ["text"], blobs
    )
    assert (result.total, result.changed) == (3, 2)
    assert [e.uid for e in result.examples] == ["a", "c"]
    assert result.examples[0].inputs["text"] == "She thanked her father."
    assert dict(result.examples[0].slices) == {"g": "m"}
    assert result.examples[1].inputs["text"].endswith(" at King's Cross.")
    assert (result.name, result.version, result.seed) == ("fairness", "3.1", 0)


def test_second_call_is_from_cache_and_identical(blobs):
    texts = EXAMPLES[:3]
    digest = dataset_hash(texts)
    counting = Counting()
    first = materialise(texts, digest, counting, 0, ["text"], blobs)
    assert counting.calls == 3 and not first.from_cache
    assert (first.total, first.changed) == (3, 3)
    again = materialise(texts, digest, counting, 0, ["text"], blobs)
    assert again.from_cache and counting.calls == 3  # nothing recomputed
    assert again == first and again.examples == first.examples


def test_qa_set_keeps_the_answer_and_moves_its_offset(blobs):
    qa = EXAMPLES[3:]
    fields = ["question", "context"]
    result = materialise(qa, dataset_hash(qa), get_perturbation("fairness"), 0, fields, blobs)
    cached = materialise(qa, dataset_hash(qa), get_perturbation("fairness"), 0, fields, blobs)
    assert cached.from_cache and cached.examples == result.examples
    assert [e.uid for e in result.examples] == ["e"]  # d's answer is a name: left out
    example = result.examples[0]
    assert example.inputs["context"] == "Her brother and Meredith went to Oslo."
    assert example.inputs["question"] == "Where did Meredith go?"  # one person, renamed alike
    assert example.answer_start == example.inputs["context"].index("Oslo")
    assert example.target == "Oslo"


def test_stored_bytes_are_canonical_and_reproducible(tmp_path):
    texts = EXAMPLES[:3]
    runs = []
    for i in range(2):
        store = LocalBlobStore(tmp_path / f"s{i}")
        result = materialise(
            texts, dataset_hash(texts), get_perturbation("typo"), 4, ["text"], store
        )
        runs.append(store.get_bytes(result.key))
    assert runs[0] == runs[1]
    line = runs[0].splitlines()[0]
    assert line.startswith(b'{"answer_start":null,"inputs":{"text":')
    assert to_jsonl(from_jsonl(runs[0])) == runs[0]


def test_key_depends_on_seed_version_fields_and_dataset(blobs):
    qa = EXAMPLES[3:]
    digest = dataset_hash(qa)
    base = materialise(qa, digest, Counting("1"), 0, ["context"], blobs)
    assert base.key.startswith(f"perturbed/{digest}/counting-v1-s0-f")
    assert base.key.endswith(".jsonl")
    others = {
        materialise(qa, digest, Counting("1"), 1, ["context"], blobs).key,
        materialise(qa, digest, Counting("2"), 0, ["context"], blobs).key,
        materialise(qa, digest, Counting("1"), 0, ["question"], blobs).key,
        materialise(qa, "0" * 64, Counting("1"), 0, ["context"], blobs).key,
    }
    assert len(others) == 4 and base.key not in others
    assert materialise(qa, digest, Counting("2"), 0, ["context"], blobs).from_cache


def test_cached_set_for_other_examples_is_refused(blobs):
    texts = EXAMPLES[:3]
    digest = dataset_hash(texts)
    materialise(texts, digest, get_perturbation("fairness"), 0, ["text"], blobs)
    with pytest.raises(ValueError, match="does not match"):
        materialise(texts[1:2], digest, get_perturbation("fairness"), 0, ["text"], blobs)


def test_perturbed_set_is_frozen(blobs):
    result = materialise(EXAMPLES[:1], "h", get_perturbation("typo"), 0, ["text"], blobs)
    assert isinstance(result, PerturbedSet)
    with pytest.raises(AttributeError):
        result.total = 5  # type: ignore[misc]
