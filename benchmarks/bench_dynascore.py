"""Time dynascore.compute and the macro-F1 bootstrap on synthetic data; print JSON."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd

from dynascore import AXES, compute
from metrics.metric import get_metric


def _best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    results = {}
    for n_models in (10, 1_000, 100_000):
        table = pd.DataFrame(
            rng.uniform([20, 1, 0.5, 40, 40], [90, 200, 12, 100, 100], size=(n_models, 5)),
            index=[f"m{i}" for i in range(n_models)],
            columns=list(AXES),
        )
        results[f"compute_{n_models}_models_s"] = _best_of(lambda t=table: compute(t))
    gold = rng.choice(["pos", "neg", "neu"], size=10_000).tolist()
    pred = rng.choice(["pos", "neg", "neu"], size=10_000).tolist()
    results["bootstrap_macro_f1_10k_examples_1000_resamples_s"] = _best_of(
        lambda: get_metric("macro_f1").interval(gold, pred, ["pos", "neg", "neu"]), repeats=3
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
