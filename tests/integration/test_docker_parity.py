"""`dynaeval evaluate <tarball | directory | reference>` on the example images of every
task gives the same metrics as the same models run as local processes (the same pipeline
and runtime factory the command uses, called from this process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from client.commands import _add_overall_ci, guess_runtime, runtime_spec
from client.common import find_task
from configs.schema import ProfilingSpec
from evaluator.pipeline import run_evaluation
from evaluator.runtimes.factory import make_runtime
from evaluator.transport.dialects import DEFAULT_DIALECT
from store.blobs import default_blob_store

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"
CASES = [  # task, example dir, how the image reaches `evaluate`
    ("sentiment", "sentiment_lexicon", "directory"),
    ("nli", "nli_overlap", "tarball"),
    ("hate_speech", "hate_lexicon", "reference"),
    ("qa", "qa_window", "reference"),
    ("translation", "translation_dictionary", "directory"),
    ("vqa", "vqa_shapes", "tarball"),  # images in the batch; Pillow inside the sandbox
    ("vqa", "vqa_prior", "reference"),
]


def evaluate(source: str, task: str, data_dir: Path, *extra: str) -> dict:
    env = {**os.environ, "DYNAEVAL_DATA_DIR": str(data_dir)}
    command = [sys.executable, "-m", "client.cli", "evaluate", source, "--task", task, "--json"]
    done = subprocess.run(
        [*command, *extra], capture_output=True, text=True, env=env, cwd=REPO, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    return json.loads(done.stdout)


# The reference side's timed passes measure nothing this test compares: one short pass.
BRIEF_PROFILING = ProfilingSpec(
    warmup_batches=0, min_examples=1, min_queries=1, min_duration_s=0.01, repeats=1
)


def evaluate_as_process(
    model_dir: str, task_name: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> dict:
    """What `evaluate <model.py> --json` prints, from this process (it evaluated in a
    subprocess of its own before: 2-3 s of start-up per case, and 3 s of timed passes)."""
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(data_dir))  # as the command is given
    task = replace(find_task(task_name), profiling=BRIEF_PROFILING)
    blobs = default_blob_store()
    model = str(MODELS / model_dir / "model.py")
    assert guess_runtime(model) == "process"
    spec = runtime_spec(model, "process", DEFAULT_DIALECT)
    result = run_evaluation(task, make_runtime(spec, task.limits, blobs), blobs).to_dict()
    _add_overall_ci(result)
    printed: dict = json.loads(json.dumps(result, default=str, allow_nan=False))
    return printed


def self_contained_dir(model_dir: str, tmp_path: Path) -> Path:
    """A researcher's directory: Dockerfile at the top, everything it copies beside it."""
    context = tmp_path / "context"
    shutil.copytree(MODELS / model_dir, context / model_dir)
    shutil.copy(MODELS / "dynaeval_server.py", context)
    shutil.move(context / model_dir / "Dockerfile", context / "Dockerfile")
    return context


def image_source(kind: str, model_dir: str, tag: str, tmp_path: Path) -> str:
    if kind == "directory":
        return str(self_contained_dir(model_dir, tmp_path))
    if kind == "tarball":
        tarball = tmp_path / f"{model_dir}.tar"
        subprocess.run(["docker", "save", "-o", str(tarball), tag], check=True, timeout=300)
        return str(tarball)
    return tag


def comparable(result: dict) -> dict:
    """Everything but the measurements that depend on the runtime (speed, memory)."""
    scores = sorted(
        (
            s["round"],
            s["dataset"],
            s["variant"],
            s["slice"],
            s["metric"],
            s["value"],
            s["n"],
            s["ci_low"],
            s["ci_high"],
        )
        for s in result["scores"]
    )
    axes = {axis: result[axis] for axis in ("performance", "robustness", "fairness")}
    return {
        "axes": axes,
        "ci": result["performance_ci"],
        "scores": scores,
        "hashes": result["provenance"]["dataset_hashes"],
    }


@pytest.mark.parametrize(("task", "model_dir", "kind"), CASES)
def test_docker_results_equal_process_results(
    task: str,
    model_dir: str,
    kind: str,
    example_image,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tag = example_image(model_dir)
    data_dir = tmp_path / "data"
    in_container = evaluate(image_source(kind, model_dir, tag, tmp_path), task, data_dir)
    as_process = evaluate_as_process(model_dir, task, data_dir, monkeypatch)

    assert in_container["status"] == as_process["status"] == "done"
    assert comparable(in_container) == comparable(as_process)
    runtime = in_container["provenance"]["runtime"]
    assert runtime["kind"] == "docker"
    assert runtime["image_id"].startswith("sha256:")
    assert runtime["user"] == "10001:10001"
    assert in_container["throughput"] > 0 and in_container["memory"] > 0
    assert in_container["provenance"]["limits"]["memory_gib"] > 0


def test_the_dynalab2_translator_in_its_container_scores_like_the_v1_dictionary(
    docker_client, example_image, owner, tmp_path: Path
) -> None:
    """Dynabench's dialect and FLORES field names, packaged as Dynalab 2.0 packages it (a
    FastAPI app on port 80), give the v1 dictionary model's exact scores."""
    from evaluator.pipeline import run_evaluation
    from evaluator.runtimes.docker.runtime import DockerRuntime
    from evaluator.runtimes.process import ProcessRuntime
    from evaluator.tasks import load_tasks
    from store.blobs import LocalBlobStore

    task = load_tasks()["translation"]
    blobs = LocalBlobStore(tmp_path / "blobs")
    image = example_image("dynalab2_translation")
    in_container = run_evaluation(
        task,
        DockerRuntime(image, task.limits, "dynalab2", client=docker_client, label_owner=owner),
        blobs,
    )
    as_process = run_evaluation(
        task,
        ProcessRuntime([sys.executable, str(MODELS / "translation_dictionary" / "model.py")]),
        blobs,
    )
    assert in_container.failure is None and as_process.failure is None
    assert {s.key: s.value for s in in_container.scores} == {
        s.key: s.value for s in as_process.scores
    }
