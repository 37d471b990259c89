"""Time the leaderboard API's assembly against the bare Dynascore computation; print JSON.

10,000 synthetic models x 5 axes x 4 rounds (each with a performance interval, per-round
rows shaped like the store's). Measured in the same run:

* ``dynascore_compute_s``: ``dynascore.compute`` on the 10,000 x 5 table (the baseline);
* ``assembly_s``: ``usecases.boards.leaderboard.leaderboard`` called with pre-read rows, i.e. the
  server's per-request work after the database read and before JSON encoding: split,
  Dynascore, tie groups, flip weights and every entry with its rounds;
* ``render_s``: the per-weights part alone, ``PreparedBoard.render`` on a board prepared
  once from the same rows (what a request costs when the caller keeps the board while the
  rows do not change: see ``usecases.boards.leaderboard.PreparedBoard``);
* ``assembly_<n>_models_s`` for 1,000 / 3,000 / 10,000 models, to show it grows linearly
  (``growth_10k_over_1k`` ~ 10 when linear, ~ 100 when quadratic);
* ``page_render_s``: ``PreparedBoard.render`` of the first page of 100 models (what the
  API's default page costs once its board is prepared);
* ``flask_request_s``: the whole ``GET /api/v1/tasks/<task>/leaderboard`` (the default
  page of 100) through Flask's test client, with the store's read replaced by the pre-read
  rows: the board is prepared on the first request and kept (``usecases.boards.cache``) while
  the task's results version stays, so this is the per-request server time, JSON encoding
  and the version query included; ``flask_full_request_s`` asks for all 10,000 at once.

Times are the median of ``REPEATS`` runs (min in ``*_min_s``, this process's CPU time in
``*_cpu_s``); ratios are to the baseline measured in the same run.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from configs.schema import RoundSpec, TaskSpec  # noqa: E402
from dynascore import AXES, compute  # noqa: E402
from evaluator.tasks import load_tasks  # noqa: E402
from usecases.boards.leaderboard import leaderboard, prepare_board, viewer_weights  # noqa: E402

N_MODELS = 10_000
REPEATS = 15
WEIGHTS = "performance:4,throughput:1,memory:2,robustness:1,fairness:1"


def four_round_task() -> TaskSpec:
    task = load_tasks()["sentiment"]
    extra = RoundSpec("r4", task.rounds[0].datasets)
    return dataclasses.replace(task, rounds=(*task.rounds, extra)[:4])


def synthetic_rows(task: TaskSpec, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Rows as ``Queries.leaderboard_rows`` returns them."""
    rng = np.random.default_rng(seed)
    names = [r.name for r in task.rounds]
    per_round = rng.uniform(20, 90, size=(n, len(names)))
    other = rng.uniform([1, 0.1, 40, 40], [200, 1.9, 100, 100], size=(n, 4))
    hashes = {f"{name}/test": "h" * 64 for name in names}
    rows = []
    for i in range(n):
        perf = float(per_round[i].mean())
        rows.append(
            {
                "model_id": f"{i:032x}",
                "name": f"model-{i}",
                "performance": perf,
                "throughput": float(other[i, 0]),
                "memory": float(other[i, 1]),
                "robustness": float(other[i, 2]),
                "fairness": float(other[i, 3]),
                "memory_peak": float(other[i, 1]) * 1.2,
                "metric": task.metric,
                "performance_ci": [perf - 1.5, perf + 1.4],
                "rounds": [
                    {
                        "round": name,
                        "performance": float(p),
                        "n": 500,
                        "datasets": ["test"],
                        "performance_ci": [float(p) - 3.0, float(p) + 2.9],
                        "robustness": 80.0,
                        "robustness_n": 200,
                        "fairness": 75.0,
                        "fairness_n": 100,
                        "variants": {"typo": 81.0, "paraphrase": 79.0},
                        "variant_performance": {"typo": float(p) - 5, "paraphrase": float(p) - 3},
                    }
                    for name, p in zip(names, per_round[i], strict=True)
                ],
                "image_id": "sha256:" + "0" * 64,
                "dataset_hashes": dict(hashes),
            }
        )
    return rows


CPU: dict[int, float] = {}  # id(fn) -> median CPU seconds of the last timed() call


def timed(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, float]:
    """(median, min) wall-clock seconds over ``repeats`` calls; the median CPU seconds of
    this process go to ``CPU[id(fn)]`` (less disturbed by other load on a shared machine)."""
    times, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    CPU[id(fn)] = statistics.median(cpu)
    return statistics.median(times), min(times)


def flask_request(
    task: TaskSpec, rows: list[dict[str, Any]], query: str = ""
) -> tuple[float, float, int]:
    """Median/min seconds and body size of the HTTP request, store read replaced by ``rows``
    (the first request, which prepares the board, is not timed)."""
    from api.app import create_app
    from store.queries import Queries
    from usecases.service import Service

    with tempfile.TemporaryDirectory() as tmp:
        service = Service.open(Path(tmp) / "data")
        service.tasks[task.name] = task
        original = Queries.leaderboard_rows
        Queries.leaderboard_rows = lambda self, name: rows  # type: ignore[method-assign]
        try:
            client = create_app(service).test_client()
            url = f"/api/v1/tasks/{task.name}/leaderboard?weights={WEIGHTS}{query}"
            body = client.get(url)
            assert body.status_code == 200, body.get_data(as_text=True)[:500]
            size = len(body.get_data())
            median, best = timed(lambda: client.get(url), repeats=REPEATS)
        finally:
            Queries.leaderboard_rows = original  # type: ignore[method-assign]
            service.close()
    return median, best, size


def main() -> None:
    task = four_round_task()
    weights = viewer_weights(task, WEIGHTS)
    hashes = {f"{r.name}/test": "h" * 64 for r in task.rounds}
    results: dict[str, Any] = {"models": N_MODELS, "axes": len(AXES), "rounds": len(task.rounds)}

    rows = synthetic_rows(task, N_MODELS)
    table = pd.DataFrame(
        [[row[axis] for axis in AXES] for row in rows],
        index=[row["model_id"] for row in rows],
        columns=list(AXES),
    )

    def baseline() -> Any:
        return compute(table, weights, instance_memory_gib=2.0)

    base, base_min = timed(baseline)
    base_cpu = CPU[id(baseline)]
    results["dynascore_compute_s"] = base
    results["dynascore_compute_min_s"] = base_min
    results["dynascore_compute_cpu_s"] = base_cpu

    def assemble(given: list[dict[str, Any]]) -> dict[str, Any]:
        return leaderboard(task, given, weights, None, current_hashes=hashes)

    board = assemble(rows)
    assert len(board["models"]) == N_MODELS and len(board["flip_weights"]) == N_MODELS - 1

    def assemble_all() -> Any:
        return assemble(rows)

    median, best = timed(assemble_all)
    results["assembly_s"] = median
    results["assembly_min_s"] = best
    results["assembly_cpu_s"] = CPU[id(assemble_all)]
    results["assembly_over_compute"] = median / base
    results["assembly_over_compute_cpu"] = CPU[id(assemble_all)] / base_cpu
    results["tie_groups"] = len(board["tie_groups"])
    results["pairs_with_a_flip"] = sum(f["axis"] is not None for f in board["flip_weights"])

    prepared = prepare_board(task, rows, None, hashes)
    assert prepared.render(weights) == board

    def render() -> Any:
        return prepared.render(weights)

    median_render, best_render = timed(render)
    results["render_s"] = median_render
    results["render_min_s"] = best_render
    results["render_cpu_s"] = CPU[id(render)]
    results["render_over_compute"] = median_render / base
    results["render_over_compute_cpu"] = CPU[id(render)] / base_cpu

    def render_page() -> Any:
        return prepared.render(weights, limit=100)

    results["page_render_s"] = timed(render_page)[0]
    results["page_render_over_compute"] = results["page_render_s"] / base

    for n in (1_000, 3_000):
        subset = rows[:n]
        results[f"assembly_{n}_models_s"] = timed(lambda s=subset: assemble(s))[0]
    results[f"assembly_{N_MODELS}_models_s"] = median
    results["growth_10k_over_1k"] = median / results["assembly_1000_models_s"]

    flask_median, flask_min, size = flask_request(task, rows)
    results["flask_request_s"] = flask_median
    results["flask_request_min_s"] = flask_min
    results["flask_request_over_compute"] = flask_median / base
    results["response_bytes"] = size
    full_median, _, full_size = flask_request(task, rows, "&limit=10000")
    results["flask_full_request_s"] = full_median
    results["full_response_bytes"] = full_size
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
