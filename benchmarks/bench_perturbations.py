"""Perturbation throughput and cache benefit on ~2,000 synthetic sentences; prints JSON.

Run: ``python benchmarks/bench_perturbations.py [--n 2000]``. Uses a temporary local blob store.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time

from configs.vocabulary.examples import Example
from evaluator.inputs.perturbed_sets import dataset_hash, materialise
from perturbations.perturbation import get_perturbation
from store.blobs import LocalBlobStore

SUBJECTS = ["The movie", "This story", "The car", "My teacher", "The city", "Her brother", "John"]
VERBS = ["was", "seemed", "is", "became", "was not", "did not look"]
ADJECTIVES = ["terrible", "wonderful", "strange", "boring", "beautiful", "quick", "usual"]
TAILS = [
    "and I do not think the plot is funny.",
    "because the weather was bad before the deadline.",
    "but the students could finish their project.",
    "although he told her that his mother would come tomorrow.",
    "and everyone in the country believed it.",
]


def synthetic_examples(n: int, seed: int = 0) -> list[Example]:
    """``n`` sentence-classification examples built from templates."""
    rng = random.Random(seed)
    return [
        Example(
            uid=f"ex-{i}",
            inputs={
                "text": " ".join(
                    [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(ADJECTIVES)]
                    + [rng.choice(TAILS)]
                )
            },
            target=rng.choice(["positive", "negative"]),
        )
        for i in range(n)
    ]


def bench(name: str, examples: list[Example], store: LocalBlobStore) -> dict[str, float | int]:
    """Build the perturbation (timed apart), materialise twice, report rates and the ratio."""
    started = time.perf_counter()
    perturbation = get_perturbation(name)
    setup_s = time.perf_counter() - started
    digest = dataset_hash(examples)
    started = time.perf_counter()
    first = materialise(examples, digest, perturbation, 0, ["text"], store)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    second = materialise(examples, digest, perturbation, 0, ["text"], store)
    second_s = time.perf_counter() - started
    assert second.from_cache and second.examples == first.examples
    return {
        "setup_s": round(setup_s, 3),
        "examples_per_s": round(len(examples) / first_s, 1),
        "first_materialise_s": round(first_s, 4),
        "cached_materialise_s": round(second_s, 4),
        "speedup": round(first_s / second_s, 1),
        "changed": first.changed,
        "total": first.total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="number of synthetic examples")
    args = parser.parse_args()
    examples = synthetic_examples(args.n)
    with tempfile.TemporaryDirectory() as root:
        store = LocalBlobStore(root)
        results = {name: bench(name, examples, store) for name in ("typo", "paraphrase")}
    print(json.dumps({"examples": args.n, "results": results}, indent=2))


if __name__ == "__main__":
    main()
