"""Perturbation load time, steady throughput and cache benefit on ~2,000 synthetic
sentences; prints JSON.

Per perturbation, reported apart:

* ``load_s``: a fresh interpreter importing the package, building the perturbation and
  perturbing one sentence (what a worker pays once), the median of 3;
* ``warm_examples_per_s``: ``apply`` over every sentence once loaded (the steady state);
  the baseline, from the same run, is ``copy_examples_per_s``, a perturbation that returns
  its input through the same loop (``warm_over_copy`` is the ratio);
* ``first_materialise_s`` / ``cached_materialise_s``: a whole set perturbed and stored,
  then read back from the cache.

Run: ``python benchmarks/bench_perturbations.py [--n 2000]``. Uses a temporary local blob store.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


REPO = Path(__file__).resolve().parents[1]
LOAD_SCRIPT = """
import time
started = time.perf_counter()
from perturbations.perturbation import get_perturbation
get_perturbation({name!r}).apply("The movie was terrible and I do not think it is funny.", 7)
print(time.perf_counter() - started)
"""


def load_seconds(name: str, runs: int = 3) -> float:
    """The median seconds a fresh interpreter takes to import, build and apply once."""
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", LOAD_SCRIPT.format(name=name)],
            capture_output=True, text=True, cwd=REPO, check=True,
        )  # fmt: skip
        times.append(float(done.stdout.strip()))
    return round(statistics.median(times), 3)


def warm_rate(apply: object, texts: list[str]) -> float:
    """Examples per second of ``apply(text, seed)`` over ``texts`` (best of 3 passes)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for i, text in enumerate(texts):
            apply(text, i)  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return round(len(texts) / best, 1)


def bench(name: str, examples: list[Example], store: LocalBlobStore) -> dict[str, float | int]:
    """Load (fresh process), warm rate, then materialise twice (perturb, then cache)."""
    perturbation = get_perturbation(name)
    texts = [e.inputs["text"] for e in examples]
    perturbation.apply(texts[0], 0)  # loaded and warm
    warm = warm_rate(perturbation.apply, texts)
    copy = warm_rate(lambda text, seed: text, texts)
    digest = dataset_hash(examples)
    started = time.perf_counter()
    first = materialise(examples, digest, perturbation, 0, ["text"], store)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    second = materialise(examples, digest, perturbation, 0, ["text"], store)
    second_s = time.perf_counter() - started
    assert second.from_cache and second.examples == first.examples
    return {
        "load_s": load_seconds(name),
        "warm_examples_per_s": warm,
        "copy_examples_per_s": copy,
        "warm_over_copy": round(warm / copy, 4),
        "first_materialise_s": round(first_s, 4),
        "cached_materialise_s": round(second_s, 4),
        "cache_speedup": round(first_s / second_s, 1),
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
