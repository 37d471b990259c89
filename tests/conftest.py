"""Shared fixtures: stdlib test servers on loopback, a temp data dir, the small ``toy`` task.

The ``toy`` task lives in ``tests/fixtures/configs`` (a task YAML and two JSONL rounds named
``alpha`` and ``r12``); ``config_dir`` copies it beside the shipped ``defaults.yaml`` into a
temp folder, so adding a task is adding files, as for an operator.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from evaluator.runtimes.process import free_port
from evaluator.tasks import load_tasks
from evaluator.transport.dialects import DEFAULT_DIALECT, get_dialect
from evaluator.transport.endpoint import Endpoint
from store.blobs import LocalBlobStore
from tests.templates import SqliteTemplate, make_postgres_template

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BACKENDS = ("sqlite", "postgresql")
SERVERS = FIXTURES / "servers"
V1_SERVER = SERVERS / "v1_server.py"
DYNALAB2_SERVER = SERVERS / "dynalab2_server.py"
START_TIMEOUT_S = 10.0


def server_command(script: Path, *args: str) -> list[str]:
    """The command line running a fixture server with this interpreter."""
    return [sys.executable, str(script), *args]


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail the test (never hang) when it does not."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what or condition}")


def gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def with_limits(task: TaskSpec, **limits: Any) -> TaskSpec:
    """``task`` with some of its limits changed."""
    return replace(task, limits=replace(task.limits, **limits))


@dataclass
class Server:
    """A fixture server started by ``run_server``."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def endpoint(self, protocol: str = DEFAULT_DIALECT) -> Endpoint:
        return Endpoint("127.0.0.1", self.port, get_dialect(protocol))

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def run_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``run_server(script, *args, wait=True)`` starts a stdlib server on a free loopback port
    (``$PORT``), waits until it accepts connections, and kills its process group afterwards."""
    started: list[Server] = []

    def start(script: Path, *args: str, wait: bool = True) -> Server:
        port = free_port()
        log_path = tmp_path / f"server-{len(started)}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                server_command(script, *args),
                env={**os.environ, "PORT": str(port), "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = Server(proc, port, log_path)
        started.append(server)
        if wait:
            wait_until(
                lambda: proc.poll() is not None or _accepts(port),
                START_TIMEOUT_S,
                f"{script.name} {args} to listen",
            )
            assert proc.poll() is None, server.log()
        return server

    yield start
    for server in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$DYNAEVAL_DATA_DIR`` for this test."""
    path = tmp_path / "data"
    path.mkdir()
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(path))
    return path


@pytest.fixture
def blobs(data_dir: Path) -> LocalBlobStore:
    """A blob store under the temp data dir (perturbed sets are cached here)."""
    return LocalBlobStore(data_dir / "blobs")


def make_config_dir(target: Path) -> Path:
    """The shipped defaults plus the fixture task and its datasets, copied under ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG_DIR / "defaults.yaml", target / "defaults.yaml")
    shutil.copytree(FIXTURES / "configs" / "tasks", target / "tasks")
    shutil.copytree(FIXTURES / "configs" / "datasets", target / "datasets")
    return target


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """A config dir holding only the ``toy`` test task."""
    return make_config_dir(tmp_path / "configs")


@pytest.fixture
def toy_task(config_dir: Path) -> TaskSpec:
    """The ``toy`` task: inputs premise + claim, labels yes/no/maybe, rounds alpha and r12."""
    return load_tasks(config_dir / "tasks")["toy"]


@pytest.fixture(autouse=True, scope="session")
def _private_worker_locks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Worker-id locks of this test session live in its own folder, so a second test run on
    the same host (or a real worker) never collides with the ids the tests use."""
    previous = os.environ.get("DYNAEVAL_LOCK_DIR")
    os.environ["DYNAEVAL_LOCK_DIR"] = str(tmp_path_factory.mktemp("worker-locks"))
    yield
    if previous is None:
        os.environ.pop("DYNAEVAL_LOCK_DIR", None)
    else:
        os.environ["DYNAEVAL_LOCK_DIR"] = previous


def skip_or_fail(reason: str) -> None:
    """Skip where a component is absent; fail where every component is required (CI:
    scripts/test.sh sets DYNAEVAL_REQUIRE_DOCKER, and with it every real component)."""
    if os.environ.get("DYNAEVAL_REQUIRE_DOCKER") == "1":
        pytest.fail(f"required here: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the whole session (tests/postgres.py)."""
    from tests.postgres import running_cluster, server_bin

    if server_bin() is None:
        skip_or_fail("Debian's postgresql package is not installed (scripts/setup.sh installs it)")
    root = Path(tempfile.mkdtemp(prefix="dynaeval-pg-"))  # short: the socket path has a limit
    with running_cluster(root) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Any]:
    """moto's S3 server on 127.0.0.1 with one bucket, for the whole session (tests/s3.py)."""
    from tests.s3 import moto_server_available, running_moto_server

    if not moto_server_available():
        skip_or_fail("moto's server is not installed (scripts/setup.sh installs the test extra)")
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dynaeval-s3-")))
        try:
            server = stack.enter_context(running_moto_server(root))
        except Exception as exc:  # e.g. it exited, never answered, or refused the bucket
            skip_or_fail(f"moto's server did not start: {exc}")
        yield server


@pytest.fixture
def s3(moto_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The session's moto server, with this test's environment sending boto3 there only."""
    from tests.s3 import AWS_VARS

    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in moto_server.env(tmp_path).items():
        monkeypatch.setenv(name, value)
    return moto_server


@pytest.fixture(autouse=True, scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteTemplate]:
    """Every new SQLite database of this session starts as a copy of one migrated once
    (tests/templates.py)."""
    template = SqliteTemplate(tmp_path_factory.mktemp("template"))
    template.install()
    yield template
    template.uninstall()


@pytest.fixture(autouse=True)
def _real_migrations(request: pytest.FixtureRequest, _sqlite_template: SqliteTemplate) -> Any:
    """Tests marked ``real_migrations`` migrate empty databases themselves."""
    if request.node.get_closest_marker("real_migrations") is None:
        yield
        return
    _sqlite_template.enabled = False
    try:
        yield
    finally:
        _sqlite_template.enabled = True


@pytest.fixture(scope="session")
def postgres_template(postgres_cluster: Any) -> str:
    """The session cluster's migrated template database (tests/templates.py)."""
    from sqlalchemy import create_engine

    admin = create_engine(postgres_cluster.url(), isolation_level="AUTOCOMMIT")
    try:
        return make_postgres_template(admin, postgres_cluster.url)
    finally:
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database on each backend production runs: a SQLite file, and a new database
    in the session's PostgreSQL cluster. Both start migrated (copies of a template), except
    for tests marked ``real_migrations``, which get them empty."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite3'}"
        return
    cluster = request.getfixturevalue("postgres_cluster")
    template = None
    if request.node.get_closest_marker("real_migrations") is None:
        template = request.getfixturevalue("postgres_template")
    with cluster.fresh_database(template) as url:
        yield url


# -- the whole run leaves no Docker object behind ---------------------------------------------
# Checked in the process that runs the session (xdist's controller, or the only one), before
# the first test and after the last, so one worker never mistakes another's running sandbox
# for a leftover. Every process's own objects are also checked at its end and after each
# Docker test (tests/integration/conftest.py).
_DOCKER_LABELS = ("dynaeval.managed=1", "dynaeval.test")


def _docker_objects() -> set[str] | None:
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception:
        return None
    found: set[str] = set()
    try:
        for label in _DOCKER_LABELS:
            selector = {"label": label}
            found |= {
                f"container {c['Id'][:12]}"
                for c in client.api.containers(all=True, filters=selector)
            }
            found |= {f"network {n['Name']}" for n in client.api.networks(filters=selector)}
    finally:
        client.close()
    return found


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_DOCKER_BEFORE] = _docker_objects()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return
    before = session.config.stash.get(_DOCKER_BEFORE, None)
    after = _docker_objects()
    if before is None or after is None:
        return
    left = sorted(after - before)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"the test run left Docker objects behind: {left}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_DOCKER_BEFORE = pytest.StashKey[set[str] | None]()


# -- markers by folder, and the longest first -------------------------------------------------
_FOLDERS = ("unit", "integration", "acceptance", "browser", "chaos", "deploy")
# Handed out one or two at a time (scripts/test.sh), a run ends when its last long test does: the
# folders whose tests take longest start first, slow tests before the rest within a folder (a
# stable sort, the same in every worker, as xdist requires). The chaos runs come after the
# Docker-heavy folders, beside the unit tests: their leases are 3 s, and started beside the
# compose stack, `serve` with Docker and the 2 GiB upload on a slow machine (Docker on
# fuse-overlayfs, every test 2x slower), a SQLite run's jobs took 7 s each, both its workers
# stood still for 21 s until the one holding the write lock was killed (most likely its commit
# waiting on a disk busy with those tests' gigabytes), and it missed its drain deadline.
_START_ORDER = {"deploy": 0, "acceptance": 1, "browser": 2, "integration": 3, "chaos": 4}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = _folder(item)
        if folder:
            item.add_marker(folder)
    _list_measurements(items)

    def rank(item: pytest.Item) -> tuple[int, int]:
        slow = item.get_closest_marker("slow") is not None
        return (_START_ORDER.get(_folder(item) or "", 5), 0 if slow else 1)

    items.sort(key=rank)


def _list_measurements(items: list[pytest.Item]) -> None:
    """Write the ids of the ``measurement`` tests to ``$DYNAEVAL_MEASUREMENT_IDS`` (before
    ``-m`` deselects them): scripts/test.sh runs exactly those alone after the parallel part,
    collecting their files only, not every test again (~10 s). Each xdist worker collects
    the same tests, so each writes the same list, whole (a rename)."""
    target = os.environ.get("DYNAEVAL_MEASUREMENT_IDS")
    if not target:
        return
    ids = [item.nodeid for item in items if item.get_closest_marker("measurement")]
    draft = f"{target}.{os.getpid()}"
    Path(draft).write_text("".join(f"{node}\n" for node in ids), encoding="utf-8")
    os.replace(draft, target)


def _folder(item: pytest.Item) -> str | None:
    parts = Path(str(item.path)).parts
    for index, part in enumerate(parts[:-1]):
        if part == "tests" and parts[index + 1] in _FOLDERS:
            return parts[index + 1]
    return None
