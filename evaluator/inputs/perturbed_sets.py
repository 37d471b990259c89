"""Perturbed sets: computed once per (dataset hash, perturbation, version, seed, fields), stored
in the blob store as canonical JSONL and reused by every model.

Only the examples the perturbation changed are kept (an unchanged example would just repeat the
original score). Re-running gives byte-identical blobs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example
from configs.vocabulary.images import ImageError, decoded_bytes
from evaluator.inputs.datasets import DatasetError
from perturbations.perturbation import Perturbation, changed, perturb_example
from store.blobs import BlobStore, check_key


@dataclass(frozen=True)
class PerturbedSet:
    """The changed examples of one dataset under one perturbation, with its provenance."""

    name: str
    version: str
    seed: int
    dataset_hash: str
    key: str
    total: int
    changed: int
    examples: tuple[Example, ...]
    from_cache: bool = field(default=False, compare=False)


def example_to_json(example: Example) -> dict[str, Any]:
    """The JSON object stored for one example ("references" only where it has further
    references, so the sets of single-reference tasks keep their bytes and hashes)."""
    stored: dict[str, Any] = {
        "uid": example.uid,
        "inputs": dict(example.inputs),
        "target": example.target,
        "slices": dict(example.slices),
        "answer_start": example.answer_start,
    }
    if example.references:
        stored["references"] = list(example.references)
    return stored


def example_from_json(raw: dict[str, Any]) -> Example:
    """Inverse of :func:`example_to_json`."""
    return Example(
        uid=raw["uid"],
        inputs=raw["inputs"],
        target=raw["target"],
        slices=raw["slices"],
        answer_start=raw["answer_start"],
        references=tuple(raw.get("references", ())),
    )


def _canonical_line(example: Example) -> bytes:
    text = json.dumps(
        example_to_json(example), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return text.encode("utf-8") + b"\n"


def to_jsonl(examples: Iterable[Example]) -> bytes:
    """Canonical JSONL: sorted keys, compact separators, UTF-8, one line per example."""
    return b"".join(_canonical_line(example) for example in examples)


def from_jsonl(data: bytes) -> tuple[Example, ...]:
    """Examples from canonical JSONL."""
    return tuple(example_from_json(json.loads(line)) for line in data.splitlines() if line)


def dataset_hash(examples: Iterable[Example]) -> str:
    """sha256 (hex) over the canonical JSONL of ``examples``, in order."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(_canonical_line(example))
    return digest.hexdigest()


def set_key(dataset_hash: str, perturbation: Perturbation, seed: int, fields: Sequence[str]) -> str:
    """``perturbed/<dataset_hash>/<name>-v<version>-s<seed>-f<fields digest>.jsonl``; the fields
    digest keeps sets of one dataset perturbed on different input fields apart."""
    fields_digest = hashlib.blake2b("\x1f".join(fields).encode(), digest_size=4).hexdigest()
    return check_key(
        f"perturbed/{dataset_hash}/{perturbation.name}-v{perturbation.version}"
        f"-s{seed}-f{fields_digest}.jsonl"
    )


def materialise(
    examples: Sequence[Example],
    dataset_hash: str,
    perturbation: Perturbation,
    seed: int,
    fields: Sequence[str],
    blobs: BlobStore,
) -> PerturbedSet:
    """The perturbed set of ``examples``: loaded from ``blobs`` when stored, else computed and
    stored. ``dataset_hash`` must identify ``examples`` (see :func:`dataset_hash`)."""
    if not fields:
        raise ValueError("materialise needs at least one input field to perturb")
    key = set_key(dataset_hash, perturbation, seed, fields)
    from_cache = blobs.exists(key)
    if from_cache:
        perturbed = from_jsonl(blobs.get_bytes(key))
        known = {example.uid for example in examples}
        stray = [example.uid for example in perturbed if example.uid not in known]
        if stray:
            raise ValueError(
                f"cached set {key} has uid {stray[0]!r} that is not in the dataset: "
                "the dataset hash does not match the examples"
            )
    else:
        perturbed = tuple(
            new
            for original in examples
            if changed(original, new := perturb_example(original, perturbation, seed, fields))
        )
        blobs.put_bytes(key, to_jsonl(perturbed))
    return PerturbedSet(
        name=perturbation.name,
        version=perturbation.version,
        seed=seed,
        dataset_hash=dataset_hash,
        key=key,
        total=len(examples),
        changed=len(perturbed),
        examples=perturbed,
        from_cache=from_cache,
    )


def check_perturbed_images(
    task: TaskSpec, name: str, examples: Sequence[Example], fields: Sequence[str]
) -> None:
    """Every perturbed picture within the task's byte limit before any is sent (an image
    perturbation keeps to its original's size or 64 KiB, which a limit below 64 KiB or an
    incompressible original can still exceed): else the run stops, naming the example."""
    for example in examples:
        for input_field in fields:
            try:
                decoded_bytes(example.inputs[input_field], task.limits.max_input_image_bytes)
            except ImageError as exc:
                raise DatasetError(
                    f"{name} made example {example.uid!r}'s {input_field!r} unusable: {exc}"
                ) from None
