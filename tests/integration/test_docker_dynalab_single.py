"""A Dynabench-template-shaped image (examples/models/dynabench_nli: app.app:app on port 80,
root user, only ``POST /model/single_evaluation``) scores in the sandbox exactly like its
protocol-v1 twin (examples/models/nli_overlap), round by round, and its throughput is
reported as what it is: single-stream, one example per request."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from evaluator.pipeline import Evaluation
from evaluator.runtimes.docker.runtime import DockerRuntime
from evaluator.tasks import load_task
from store.blobs import LocalBlobStore

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def quick_profile(task: TaskSpec) -> TaskSpec:
    """``task`` with a short profiling pass (it measures, it does not score)."""
    short = {"warmup_batches": 1, "min_examples": 32, "min_queries": 8, "min_duration_s": 0.05}
    known = {k: v for k, v in short.items() if hasattr(task.profiling, k)}
    return replace(task, profiling=replace(task.profiling, **known))


def test_the_dynabench_template_image_scores_like_its_twin(
    docker_client, example_image, owner, tmp_path: Path
) -> None:
    task = quick_profile(load_task(CONFIG_DIR / "tasks" / "nli.yaml"))
    blobs = LocalBlobStore(tmp_path / "blobs")
    template_image = example_image("dynabench_nli")
    config = docker_client.images.get(template_image).attrs["Config"]
    assert config.get("User", "") in ("", "root", "0")  # as published: no USER line
    assert config["Cmd"] == ["uvicorn", "app.app:app", "--host", "0.0.0.0", "--port", "80"]

    def evaluation(image: str, protocol: str) -> Evaluation:
        runtime = DockerRuntime(
            image, task.limits, protocol, client=docker_client, label_owner=owner
        )
        return Evaluation(task, runtime, blobs)

    template = evaluation(template_image, "dynalab2")
    single = template.run()
    twin = evaluation(example_image("nli_overlap"), "v1").run()
    assert [single.failure, twin.failure] == [None, None]
    assert {s.key: s.value for s in single.scores} == {s.key: s.value for s in twin.scores}
    per_round = [{r["round"]: r["performance"] for r in res.rounds} for res in (single, twin)]
    assert per_round[0] == per_round[1] and len(per_round[0]) == len(task.rounds)
    assert template.client is not None and template.client.one_example_per_request
    assert single.profile["throughput"]["mode"] == "single_stream"
    assert twin.profile["throughput"]["mode"] == "offline"
