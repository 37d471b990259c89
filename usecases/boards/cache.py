"""Prepared leaderboards kept between requests while a task's results do not change.

Preparing a board (splitting rows, utilities, units, per-model entries) is most of a
leaderboard request's work and does not depend on the viewer's weights; reading every
model's newest result is the rest. Both are redone only when the task's results change:
the key holds the task's results version (how many results, the newest one's time), its
data hashes and everything else ``prepare_board`` reads. A request then costs one small
aggregate query plus ``PreparedBoard.render`` of one page.

The rows are read incrementally: results are only ever added, so when a task gains some,
only those stored since the newest one seen are read and merged (a model's newer result
replaces its older one in place); a model's image going (the other change) reads them all
again. ``keep_boards_warm`` (run by ``serve``) prepares every task's board at start, and
again as results land (within seconds for the boards viewers are looking at, within
``kept.WRITE_EVERY_S`` for the others), so a viewer rarely waits; one who comes while a
board is being read or prepared waits for that work instead of repeating it beside it (at
10,000 models, a second or two that two would share a core for). Each task's own board is
also kept across restarts (``usecases.boards.kept``): the first board after a start is
read back instead of prepared when nothing it depends on changed meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from configs.schema import TaskSpec
from configs.vocabulary.results import BoardRow
from store.db import Database
from store.outages import DATABASE_OUTAGES
from store.queries import ResultsMarks
from usecases.boards import kept
from usecases.boards.assemble import default_round_weights, reweighted
from usecases.boards.leaderboard import PreparedBoard, prepare_board
from usecases.service import Service

CACHED_BOARDS = 32  # tasks x round-weight variants x instance memories kept at once
WARM_INTERVAL_S = 2.0  # how often keep_boards_warm looks for new results
WARM_FOR_S = 600.0  # a board is kept prepared this long after its last viewer
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskRows:
    """A task's leaderboard rows as of ``marks``, by model id in the store's order."""

    marks: ResultsMarks
    by_model: dict[str, BoardRow]


class TaskLocks:
    """One lock per task name: work on one task waits for the same work in progress (a
    request arriving while the background preparation reads 10,000 rows waits for it
    instead of reading them again beside it, sharing the same cores)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def of(self, task: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(task, threading.Lock())


class RowCache:
    """Each task's rows, read whole once and then only what was added (thread-safe: one
    reader per task at a time, the others then take what it read)."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRows] = {}
        self._lock = threading.Lock()
        self._reading = TaskLocks()

    def rows(
        self, service: Service, task: str, marks: ResultsMarks | None = None
    ) -> tuple[ResultsMarks, list[BoardRow]]:
        """The task's rows now (``marks``: the task's results marks, read just before), and
        the marks they were read at."""
        marks = marks if marks is not None else service.queries.results_marks(task)
        known = self._known(task)
        if known is not None and known.marks == marks:
            return marks, list(known.by_model.values())
        with self._reading.of(task):
            known = self._known(task)  # what a reader before us stored meanwhile
            if known is not None and known.marks == marks:
                return marks, list(known.by_model.values())
            by_model = self._read(service, task, known, marks)
            with self._lock:
                self._tasks[task] = TaskRows(marks, by_model)
        return marks, list(by_model.values())

    def _known(self, task: str) -> TaskRows | None:
        with self._lock:
            return self._tasks.get(task)

    @staticmethod
    def _read(
        service: Service, task: str, known: TaskRows | None, marks: ResultsMarks
    ) -> dict[str, BoardRow]:
        since = known.marks.newest if known is not None else None
        only_added = (
            known is not None
            and since is not None
            and known.marks.images_gone == marks.images_gone
            and known.marks.newest_gone == marks.newest_gone
            and known.marks.results <= marks.results
            # a result's time is taken before its transaction commits: one stored at or
            # before the newest read may land after that read, and a read of the newer
            # ones alone would miss it for good
            and service.queries.results_through(task, since) == known.marks.results
        )
        if known is None or since is None or not only_added:
            return {row["model_id"]: row for row in service.queries.leaderboard_rows(task)}
        by_model = dict(known.by_model)  # a new result of a known model keeps its place
        for row in service.queries.leaderboard_rows(task, since=since):
            by_model[row["model_id"]] = row
        return by_model


class BoardCache:
    """A small thread-safe LRU of prepared boards (the server answers from many threads),
    and when each task's board was last asked for by a viewer."""

    def __init__(self, size: int = CACHED_BOARDS) -> None:
        self.size = size
        self._boards: OrderedDict[Hashable, PreparedBoard] = OrderedDict()
        self._lock = threading.Lock()
        self.viewed: dict[str, float] = {}  # task -> time.monotonic() of its last viewer
        self.building = TaskLocks()  # one build per task at a time (see prepared)
        self.kept_tried: set[str] = set()  # tasks whose board kept by the last run was looked at
        self.kept: dict[str, Hashable] = {}  # task -> the key of its board as kept for a start
        # readiness (boards_ready): the warm-up began, which tasks' boards have settled since
        # (prepared, or failed for good), and whether every one has
        self.warming = False
        self.settled: set[str] = set()
        self.warmed = threading.Event()

    def get(self, key: Hashable, build: Callable[[], PreparedBoard]) -> PreparedBoard:
        """The board under ``key``, built (outside the lock) when absent."""
        board = self.find(key)
        if board is not None:
            return board
        board = build()  # two threads may both build one: harmless, the results are equal
        self.put(key, board)
        return board

    def put(self, key: Hashable, board: PreparedBoard) -> None:
        with self._lock:
            self._boards[key] = board
            self._boards.move_to_end(key)
            while len(self._boards) > self.size:
                self._boards.popitem(last=False)

    def find(self, key: Hashable) -> PreparedBoard | None:
        """The board under ``key`` if it is kept."""
        with self._lock:
            board = self._boards.get(key)
            if board is not None:
                self._boards.move_to_end(key)
            return board


# Keyed weakly by the database object: a cache lives as long as its service's database and
# never outlives it into another service's (ids are reused, objects are not).
_CACHES: weakref.WeakKeyDictionary[Database, tuple[BoardCache, RowCache]] = (
    weakref.WeakKeyDictionary()
)
_CACHES_LOCK = threading.Lock()


def cache_of(service: Service) -> BoardCache:
    """The cache of ``service``'s database (made on first use)."""
    return _caches_of(service)[0]


def _caches_of(service: Service) -> tuple[BoardCache, RowCache]:
    with _CACHES_LOCK:
        found = _CACHES.get(service.db)
        if found is None:
            found = _CACHES[service.db] = (BoardCache(), RowCache())
        return found


def prepared(
    service: Service,
    task: TaskSpec,
    round_weights: Mapping[str, float] | None = None,
    instance_memory_gib: float | None = None,
    *,
    warming: bool = False,
) -> PreparedBoard:
    """``task``'s prepared board over its stored results under ``round_weights`` (the
    task's own when None), from the cache while they hold. ``warming``: asked for by
    ``keep_boards_warm``, not by a viewer."""
    return _prepared(service, task, round_weights, instance_memory_gib, warming=warming)[1]


def begin_warmup(service: Service) -> None:
    """Say that ``keep_boards_warm`` is about to prepare every task's board: not ready
    (``boards_ready``) until each has. ``serve`` calls it before it listens, so no request
    finds the service ready before the warm-up has begun."""
    boards = cache_of(service)
    boards.warmed.clear()
    boards.settled.clear()
    boards.warming = True


def boards_ready(service: Service) -> bool:
    """Whether a viewer's first board is answered from a prepared one: every task's board
    has been prepared (or read back) since the warm-up began, or none is under way (a board
    is then prepared on its first request, as ever). A board that fails for another reason
    than a database outage counts as settled: its viewers get the error either way."""
    boards = cache_of(service)
    return not boards.warming or boards.warmed.is_set()


def _prepared(
    service: Service,
    task: TaskSpec,
    round_weights: Mapping[str, float] | None,
    instance_memory_gib: float | None,
    *,
    warming: bool,
) -> tuple[Hashable, PreparedBoard]:
    """The board and the key it is kept under."""
    own = _is_own(task, round_weights, instance_memory_gib)
    if own:  # the task's own, written as the kept board's key writes them
        round_weights, instance_memory_gib = default_round_weights(task), None
    round_weights = default_round_weights(task) if round_weights is None else round_weights
    boards, rows = _caches_of(service)
    if not warming:
        boards.viewed[task.name] = time.monotonic()
    hashes = service.dataset_hashes(task.name)
    marks = service.queries.results_marks(task.name)
    key = _key(task, marks, hashes, round_weights, instance_memory_gib)
    found = boards.find(key)
    if found is not None:
        return key, found
    with boards.building.of(task.name):  # a build of this board in progress: wait for it
        # the marks again: results may have landed while a build before this one ran
        marks = service.queries.results_marks(task.name)
        key = _key(task, marks, hashes, round_weights, instance_memory_gib)
        found = boards.find(key)
        if found is not None:
            return key, found
        if own and task.name not in boards.kept_tried:  # the first since the start
            boards.kept_tried.add(task.name)
            board = kept.read(service, task, key)
            if board is not None:
                boards.put(key, board)
                boards.kept[task.name] = key
                return key, board
        marks, current = rows.rows(service, task.name, marks)
        key = _key(task, marks, hashes, round_weights, instance_memory_gib)

        def build() -> PreparedBoard:
            rolled = reweighted(current, round_weights, task)
            return prepare_board(task, rolled, instance_memory_gib, current_hashes=hashes)

        return key, boards.get(key, build)


def _is_own(
    task: TaskSpec, round_weights: Mapping[str, float] | None, instance_memory_gib: float | None
) -> bool:
    """Whether these are the task's own round weights and memory (the board kept across
    restarts)."""
    return (round_weights is None or dict(round_weights) == default_round_weights(task)) and (
        instance_memory_gib is None or instance_memory_gib == task.instance_memory_gib
    )


def _key(
    task: TaskSpec,
    marks: ResultsMarks,
    hashes: Mapping[str, str],
    round_weights: Mapping[str, float],
    instance_memory_gib: float | None,
) -> Hashable:
    """Everything a prepared board depends on besides the task's definition."""
    return (
        task.name,
        marks,
        tuple(sorted(hashes.items())),
        tuple(sorted(round_weights.items())),
        instance_memory_gib or task.instance_memory_gib,
        tuple(spec.name for spec in task.rounds),
        task.metric,
    )


def keep_boards_warm(
    service: Service,
    stop: threading.Event,
    interval_s: float = WARM_INTERVAL_S,
    *,
    keep_every_s: float = kept.WRITE_EVERY_S,
    clock: Callable[[], float] = time.monotonic,
    on_ready: Callable[[], object] | None = None,
) -> None:
    """Prepare every task's board (its own weights) now, and again as its results change:
    within ``interval_s`` while viewers look at it (asked for within ``WARM_FOR_S``), within
    ``keep_every_s`` otherwise, until ``stop`` is set. Each board is kept for the next start
    (``usecases.boards.kept``) when it changed, at most every ``keep_every_s``, and once
    more on the way out: the first viewer after a start or a new result finds it ready.
    Once every board has been prepared, the service is ready (``boards_ready``) and
    ``on_ready`` is called."""
    keeper = _Keeper(service, keep_every_s, clock)
    begin_warmup(service)
    failing = False  # said once per run of failures, not every interval_s
    while not stop.is_set():
        try:  # the task list itself is read from the store: an outage must not end the loop
            for task in list(service.tasks.values()):
                if stop.is_set():
                    break
                if keeper.due(task.name):
                    keeper.prepare(task)
            if keeper.ready_now() and on_ready is not None:
                on_ready()
        except Exception:
            (LOG.debug if failing else LOG.warning)("preparing the boards failed", exc_info=True)
            failing = True
        else:
            failing = False
        keeper.write_due()
        stop.wait(interval_s)
    with contextlib.suppress(Exception):  # results since a board's last preparation
        for task in list(service.tasks.values()):
            keeper.prepare(task)
    keeper.write_due(everything=True)


class _Keeper:
    """When each task's board is prepared again and kept for the next start."""

    def __init__(self, service: Service, every_s: float, clock: Callable[[], float]) -> None:
        self.service = service
        self.every_s = every_s
        self.clock = clock
        self.boards = cache_of(service)
        self.prepared_at: dict[str, float] = {}
        # the first write also waits ``every_s``: not in the busy first seconds after a start
        # (keeping 10,000 models is about a second of encoding beside the requests)
        self.started = clock()
        self.written_at: dict[str, float] = {}
        self.waiting: dict[str, tuple[Hashable, PreparedBoard]] = {}
        self.failed: set[str] = set()  # tasks whose last preparation failed (said once)

    def due(self, task: str) -> bool:
        """Never prepared, looked at lately, or not prepared for ``every_s``."""
        if task not in self.prepared_at:
            return True
        now = self.clock()
        viewed = self.boards.viewed.get(task)
        recent = viewed is not None and time.monotonic() - viewed < WARM_FOR_S
        return recent or now - self.prepared_at[task] >= self.every_s

    def prepare(self, task: TaskSpec) -> None:
        """Prepare ``task``'s board (its own weights); keep it later when it changed. Settled
        for readiness when prepared, or when it fails for another reason than a database
        outage (a viewer would get the same error: the service is ready without it)."""
        try:
            key, board = _prepared(self.service, task, None, None, warming=True)
        except DATABASE_OUTAGES:  # try again later; not ready meanwhile
            LOG.debug("preparing %s's board failed; retrying", task.name, exc_info=True)
            return
        except Exception:  # e.g. results this code cannot read: tried again, said once
            log = LOG.debug if task.name in self.failed else LOG.warning
            log("%s's board cannot be prepared; retrying", task.name, exc_info=True)
            self.failed.add(task.name)
            self.boards.settled.add(task.name)
            return
        self.failed.discard(task.name)
        self.boards.settled.add(task.name)
        self.prepared_at[task.name] = self.clock()
        if self.boards.kept.get(task.name) != key:
            self.waiting[task.name] = (key, board)

    def ready_now(self) -> bool:
        """True once, when every task's board has settled since the warm-up began."""
        boards = self.boards
        if boards.warmed.is_set() or not set(self.service.tasks) <= boards.settled:
            return False
        boards.warmed.set()
        return True

    def write_due(self, *, everything: bool = False) -> None:
        """Keep the boards waiting whose last write is ``every_s`` old (all: ``everything``)."""
        now = self.clock()
        for name, (key, board) in list(self.waiting.items()):
            if not everything and now - self.written_at.get(name, self.started) < self.every_s:
                continue
            del self.waiting[name]
            self.written_at[name] = now  # a failed write too: tried again ``every_s`` later
            try:
                kept.write(self.service, key, board)
            except Exception:  # a blob store outage: the next start prepares it instead
                LOG.warning("keeping %s's board failed", name, exc_info=True)
                continue
            self.boards.kept[name] = key
