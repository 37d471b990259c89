"""``dynaeval submit`` as CI runs it: a tarball (any file name) or a registry reference into
the local database, refused before anything is stored when the tarball is broken, and
``--wait --fail-under`` / ``--compare-to`` gating a release on the finished job. Exit codes:
0 pass, 1 below a threshold or a significant drop, 2 the evaluation failed (or was refused,
or did not finish in time), 3 usage or connection error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.examples import build_image
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import EvaluationResult, Failure, Score, ScoreKey
from evaluator.inputs.datasets import load_examples
from evaluator.inputs.perturbed_sets import dataset_hash
from store.accounts import Accounts
from store.models import ModelRow
from tests.acceptance.conftest import REPO, Run, dynaeval_command, free_port, serving
from tests.conftest import wait_until
from tests.unit.test_api import FIRST_IMAGE_ID, image_tar
from usecases.service import Service, example_catalog, example_image
from worker.lifecycle import settle_failure
from worker.predictions import predictions_key

REFERENCE = "registry.local/team/model:1"
PUBLIC_REFERENCE = "ghcr.io/team/model:1"  # a server takes no local-network registry
DOCKER = {"kind": "docker", "protocol": "v1", "source": "registry"}
EXAMPLE_IMAGE = "dynaeval-example/majority-sentiment:latest"


@pytest.fixture
def service(data_dir: Path) -> Iterator[Service]:
    """The same database and blob folder the CLI subprocesses use."""
    svc = Service.open(data_dir)
    yield svc
    svc.close()


def models(service: Service) -> list[ModelRow]:
    with service.db.session() as session:
        return list(session.query(ModelRow))


def blob_files(data_dir: Path) -> list[Path]:
    root = data_dir / "blobs" / "uploads"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def submit_in_background(cli_env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*dynaeval_command(), "submit", *args],
        cwd=REPO,
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_next_job(
    service: Service, performance: float | None, correct: float | None = None
) -> str:
    """An embedded stand-in worker: claim the queued job, finish it with ``performance``
    (or fail it when None); with ``correct``, keep per-example predictions right on that
    fraction of every held-out set first, as the real worker does. Returns the model id."""
    deadline = time.monotonic() + 60
    claimed = None
    while claimed is None and time.monotonic() < deadline:
        claimed = service.store.claim("test-worker", 60)
        time.sleep(0.1)
    assert claimed is not None, "the submission never reached the queue"
    if correct is not None:
        keep_predictions(service, claimed.model_id, correct)
    if performance is None:
        failure = Failure(FailureCode.NEVER_HEALTHY, "no /health in 60 s", "booting...\n")
        settle_failure(service.store, claimed, "test-worker", failure)
        return
    axes = {"performance": performance, "throughput": 10.0, "memory": 0.1}
    result = EvaluationResult(
        task="sentiment",
        status="done",
        summary={**axes, "robustness": 90.0, "fairness": 90.0, "metric": "macro_f1"},
        rounds=[{"round": "r1", "performance": performance, "performance_ci": None}],
        scores=[Score(ScoreKey("sentiment", "r1", "test", "h" * 64, metric="macro_f1"), 1, 8)],
        provenance={"code_version": "test", "dataset_hashes": {"r1/test": "h" * 64}},
    )
    assert service.store.finish(claimed.id, "test-worker", result, lease=claimed.lease)
    return claimed.model_id


def keep_predictions(service: Service, model_id: str, correct: float) -> None:
    """Predictions of the sentiment task, right on the first ``correct`` fraction of each set
    and wrong after it, stored where the worker keeps them."""
    task = service.tasks["sentiment"]
    sets = []
    for spec in task.rounds:
        for dataset in spec.datasets:
            examples = load_examples(task, dataset, service.config_dir)
            cut = int(correct * len(examples))
            wrong = {e.uid: next(x for x in task.labels if x != e.target) for e in examples}
            sets.append(
                {
                    "round": spec.name,
                    "dataset": dataset.name,
                    "dataset_hash": dataset_hash(examples),
                    "uids": [e.uid for e in examples],
                    "predictions": [
                        e.target if i < cut else wrong[e.uid] for i, e in enumerate(examples)
                    ],
                }
            )
    document = {"format": 1, "sets": sets}
    service.blobs.put_bytes(predictions_key(model_id), json.dumps(document).encode())


# -- what is stored --------------------------------------------------------------------------
def test_a_tarball_named_with_spaces_is_stored_under_a_uuid_key(
    run: Run, tmp_path: Path, service: Service, data_dir: Path
) -> None:
    folder = tmp_path / "my models"
    folder.mkdir()
    tarball = folder / "my model (final) v1.tar"
    tarball.write_bytes(image_tar())
    done = run("submit", str(tarball), "--task", "sentiment", "--name", "my model", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["status"] == "queued" and shown["name"] == "my model"
    [model] = models(service)
    assert model.id == shown["id"] and model.image_id == FIRST_IMAGE_ID
    assert model.runtime["source"] == "upload" and model.runtime["kind"] == "docker"
    key = model.runtime["blob"]
    assert key.startswith("uploads/") and key.endswith(".tar") and " " not in key
    assert "my model" not in key
    assert service.blobs.get_bytes(key) == tarball.read_bytes()


def test_a_registry_reference_is_stored_as_a_registry_source(
    run: Run, service: Service, data_dir: Path
) -> None:
    done = run("submit", REFERENCE, "--task", "sentiment", "--name", "m")
    assert done.returncode == 0, done.stderr
    assert "queued" in done.stdout
    [model] = models(service)
    assert model.runtime == {
        "kind": "docker",
        "protocol": "v1",
        "source": "registry",
        "image": REFERENCE,
    }
    assert blob_files(data_dir) == []


@pytest.mark.parametrize("model", ["./absent.tar", "/no/such/model.tar", "sha256:" + "0" * 64])
def test_paths_and_bare_ids_are_usage_errors(run: Run, service: Service, model: str) -> None:
    done = run("submit", model, "--task", "sentiment", "--name", "m")
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynaeval submit:"), done.stderr
    assert models(service) == []


def test_a_folder_is_a_usage_error(run: Run, tmp_path: Path, service: Service) -> None:
    done = run("submit", str(tmp_path), "--task", "sentiment", "--name", "m")
    assert done.returncode == 3, done.stderr
    assert "is not a file" in done.stderr and "docker save" in done.stderr
    assert models(service) == []


def test_an_empty_tarball_exits_2_and_nothing_is_stored(
    run: Run, tmp_path: Path, service: Service, data_dir: Path
) -> None:
    empty = tmp_path / "empty.tar"
    empty.write_bytes(b"")
    done = run("submit", str(empty), "--task", "sentiment", "--name", "m", "--json")
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stdout)["failure"]["code"] == "image_not_loadable"
    assert "(nothing was stored)" in done.stderr
    assert models(service) == [] and blob_files(data_dir) == []


def test_a_bad_name_is_a_usage_error(run: Run, service: Service) -> None:
    done = run("submit", REFERENCE, "--task", "sentiment", "--name", "../etc")
    assert done.returncode == 3 and "--name" in done.stderr
    assert models(service) == []


@pytest.mark.parametrize(
    ("payload", "problem"),
    [(b"this is not a docker save tarball" * 10, "corrupt"), (image_tar(2), "holds 2 images")],
    ids=["corrupt", "two-images"],
)
def test_a_broken_tarball_exits_2_and_nothing_is_stored(
    run: Run, tmp_path: Path, service: Service, data_dir: Path, payload: bytes, problem: str
) -> None:
    tarball = tmp_path / "broken model.tar"
    tarball.write_bytes(payload)
    done = run("submit", str(tarball), "--task", "sentiment", "--name", "m", "--json")
    assert done.returncode == 2, done.stderr
    assert "image_not_loadable" in done.stderr and problem in done.stderr
    assert json.loads(done.stdout)["failure"]["code"] == "image_not_loadable"
    assert models(service) == [] and blob_files(data_dir) == []


# -- --wait, --timeout, --fail-under ---------------------------------------------------------
def test_wait_without_a_worker_times_out_with_exit_2(run: Run, service: Service) -> None:
    args = [REFERENCE, "--task", "sentiment", "--name", "m", "--json"]
    done = run("submit", *args, "--wait", "--timeout", "1.5")
    assert done.returncode == 2, done.stderr
    assert "gave up after 1.5 s" in done.stderr and "worker" in done.stderr
    shown = json.loads(done.stdout)  # the submission is still printed, to archive
    assert shown["status"] == "queued" and shown["job"]["status"] == "queued"


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "inf"])
def test_bad_timeout_is_a_usage_error(run: Run, bad: str) -> None:
    done = run("submit", REFERENCE, "--task", "sentiment", "--name", "m", "--timeout", bad)
    assert done.returncode == 3 and "--timeout" in done.stderr


@pytest.mark.parametrize(
    ("performance", "code", "message"),
    [(90.0, 0, ""), (60.0, 1, "performance 60.00 is under 80"), (None, 2, "never_healthy")],
    ids=["pass", "under", "failed"],
)
def test_fail_under_gates_on_the_finished_job(
    cli_env: dict[str, str],
    service: Service,
    performance: float | None,
    code: int,
    message: str,
) -> None:
    args = [REFERENCE, "--task", "sentiment", "--name", "m", "--fail-under", "80", "--json"]
    proc = submit_in_background(cli_env, *args)
    try:
        finish_next_job(service, performance)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert message in err
    shown = json.loads(out)
    assert shown["status"] == ("failed" if performance is None else "done")
    if performance is not None:
        assert shown["results"]["performance"] == performance


@pytest.mark.parametrize(
    ("gate", "code", "message"),
    [
        (["performance=80,robustness=85"], 0, ""),
        (["robustness=95"], 1, "robustness 90.00 is under 95"),
        (["80", "fairness=91"], 1, "fairness 90.00 is under 91"),
        (["dynascore=50", "rank=1"], 0, ""),  # the board's only model: score 100, rank 1
    ],
    ids=["all-met", "robustness", "bare-and-fairness", "board-met"],
)
def test_fail_under_takes_metric_thresholds(
    cli_env: dict[str, str], service: Service, gate: list[str], code: int, message: str
) -> None:
    args = [REFERENCE, "--task", "sentiment", "--name", "m", "--json"]
    for threshold in gate:
        args += ["--fail-under", threshold]
    proc = submit_in_background(cli_env, *args)
    try:
        finish_next_job(service, 90.0)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert message in err, err
    shown = json.loads(out)
    assert shown["gate"]["passed"] is (code == 0)
    for check in shown["gate"]["thresholds"]:
        assert isinstance(check["value"], float), check  # dynascore read from the leaderboard


@pytest.mark.parametrize(
    "bad", ["memory=1", "accuracy=80", "performance=", "abc", "performance=nan"]
)
def test_bad_fail_under_is_a_usage_error(run: Run, service: Service, bad: str) -> None:
    done = run("submit", REFERENCE, "--task", "sentiment", "--name", "m", "--fail-under", bad)
    assert done.returncode == 3, done.stderr
    assert "--fail-under" in done.stderr
    assert models(service) == []


@pytest.mark.parametrize(
    ("correct", "code", "verdict"),
    [(0.3, 1, "significant drop"), (1.0, 0, "no significant difference")],
    ids=["worse", "same"],
)
def test_compare_to_fails_only_on_a_significant_drop(
    cli_env: dict[str, str], service: Service, correct: float, code: int, verdict: str
) -> None:
    baseline_id, _ = service.store.submit("sentiment", "baseline", {**DOCKER, "image": REFERENCE})
    finish_next_job(service, 90.0, correct=1.0)
    args = [REFERENCE, "--task", "sentiment", "--name", "rc", "--compare-to", baseline_id]
    proc = submit_in_background(cli_env, *args, "--json")
    try:
        finish_next_job(service, 90.0, correct=correct)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert verdict in err and f"vs {baseline_id}" in err and "95% CI" in err
    comparison = json.loads(out)["gate"]["comparison"]
    assert comparison["baseline"] == baseline_id
    assert comparison["significant_drop"] is (code == 1)
    low, high = comparison["ci"]
    assert low <= comparison["difference"] <= high
    if correct == 1.0:
        assert comparison["difference"] == 0.0


def test_compare_to_an_unknown_model_is_a_usage_error(run: Run, service: Service) -> None:
    args = [REFERENCE, "--task", "sentiment", "--name", "m", "--compare-to", "no-such-model"]
    done = run("submit", *args)
    assert done.returncode == 3 and "no-such-model" in done.stderr, done.stderr
    assert models(service) == []  # refused before anything was stored


def test_an_unreachable_server_is_exit_3(run: Run) -> None:
    server = f"http://127.0.0.1:{free_port()}"
    done = run("submit", REFERENCE, "--task", "sentiment", "--name", "m", "--server", server)
    assert done.returncode == 3 and "cannot reach" in done.stderr, done.stderr


def test_no_progress_bar_when_not_a_terminal(cli_env: dict[str, str], service: Service) -> None:
    proc = submit_in_background(cli_env, REFERENCE, "--task", "sentiment", "--name", "m", "--wait")
    try:
        finish_next_job(service, 90.0)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert err == "" and "\x1b" not in out and "%" not in out  # pipes get plain text only


def _skip_or_fail(reason: str) -> None:
    """Skip locally; fail where Docker is required (scripts/test.sh sets that in CI)."""
    if os.environ.get("DYNAEVAL_REQUIRE_DOCKER") == "1":
        pytest.fail(f"Docker is required here: {reason}")
    pytest.skip(reason)


def _saved_example(tmp_path: Path) -> Path:
    """A real `docker save` tarball of an example model, named with spaces. The image is a
    catalog variant `serve` builds; built here (cached by Docker) when it is missing."""
    docker = shutil.which("docker")
    if docker is None:
        _skip_or_fail("no docker command")
    exists = subprocess.run(
        [docker, "image", "inspect", EXAMPLE_IMAGE], capture_output=True, check=False
    )
    if exists.returncode != 0:
        entry = next(e for e in example_catalog() if example_image(e) == EXAMPLE_IMAGE)
        try:
            build_image(entry)
        except (OSError, subprocess.SubprocessError) as exc:
            _skip_or_fail(f"{EXAMPLE_IMAGE} could not be built ({exc})")
    tarball = tmp_path / "majority model v1.tar"
    subprocess.run([docker, "save", EXAMPLE_IMAGE, "-o", str(tarball)], check=True, timeout=300)
    return tarball


@pytest.mark.docker
@pytest.mark.slow
def test_wait_fail_under_with_a_real_worker(
    run_process: Run, cli_env: dict[str, str], tmp_path: Path, service: Service
) -> None:
    tarball = str(_saved_example(tmp_path))
    common = ["--task", "sentiment", "--wait", "--timeout", "600", "--json"]
    passing = submit_in_background(cli_env, tarball, "--name", "ok", "--fail-under", "0", *common)
    failing = submit_in_background(cli_env, tarball, "--name", "no", "--fail-under", "101", *common)
    try:  # both are queued before the worker drains the queue
        wait_until(lambda: len(models(service)) == 2, 120, "both submissions to be queued")
        worker = run_process("worker", "--burst", "--name", "acceptance", timeout=600)
        assert worker.returncode == 0, worker.stderr
        assert "2 done" in worker.stdout, worker.stdout
        out_pass, err_pass = passing.communicate(timeout=120)
        out_fail, err_fail = failing.communicate(timeout=120)
    finally:
        passing.kill()
        failing.kill()
    assert passing.returncode == 0, err_pass
    assert failing.returncode == 1, err_fail
    assert "is under 101" in err_fail
    for out in (out_pass, out_fail):
        shown: dict[str, Any] = json.loads(out)
        assert shown["status"] == "done" and shown["job"]["status"] == "done"
        assert isinstance(shown["results"]["performance"], float)
        assert [r["round"] for r in shown["results"]["rounds"]] == ["r1", "r2", "r3"]


# -- remote mode (--server) ------------------------------------------------------------------
@pytest.fixture
def server(cli_env: dict[str, str], tmp_path: Path, data_dir: Path) -> Iterator[str]:
    """``dynaeval serve`` with no worker, so jobs stay queued; the CLI gets a researcher's
    API token in DYNAEVAL_API_KEY."""
    svc = Service.open(data_dir)
    try:
        accounts = Accounts(svc.db, svc.clock)
        user = accounts.add_user("ci", "researcher")
        cli_env["DYNAEVAL_API_KEY"] = accounts.create_token(
            user["id"], "ci", ["read", "submit"]
        ).secret
    finally:
        svc.close()
    with serving(cli_env, tmp_path / "serve.log") as (base, _):
        yield base


def test_remote_wait_times_out_with_exit_2(run: Run, server: str) -> None:
    args = [PUBLIC_REFERENCE, "--task", "sentiment", "--name", "m", "--server", server, "--json"]
    done = run("submit", *args, "--fail-under", "50", "--timeout", "1")
    assert done.returncode == 2, done.stderr
    assert "gave up after 1 s" in done.stderr and server in done.stderr
    shown = json.loads(done.stdout)
    assert shown["status"] == "queued" and shown["runtime"]["image"] == PUBLIC_REFERENCE


def test_remote_broken_tarball_exits_2_with_the_code(run: Run, server: str, tmp_path: Path) -> None:
    tarball = tmp_path / "broken model.tar"
    tarball.write_bytes(image_tar(2))
    done = run("submit", str(tarball), "--task", "sentiment", "--name", "m", "--server", server)
    assert done.returncode == 2, done.stderr
    assert "image_not_loadable" in done.stderr and "holds 2 images" in done.stderr


def test_remote_with_a_bad_token_is_exit_3(run: Run, server: str, cli_env: dict[str, str]) -> None:
    cli_env["DYNAEVAL_API_KEY"] = "dyn_not-a-token"
    done = run("submit", PUBLIC_REFERENCE, "--task", "sentiment", "--name", "m", "--server", server)
    assert done.returncode == 3 and "401" in done.stderr, done.stderr


def test_remote_path_like_reference_is_a_usage_error(run: Run, server: str) -> None:
    done = run("submit", "./absent.tar", "--task", "sentiment", "--name", "m", "--server", server)
    assert done.returncode == 3 and "invalid_submission" in done.stderr
