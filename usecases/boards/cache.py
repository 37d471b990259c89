"""Prepared leaderboards kept between requests while a task's results do not change.

Preparing a board (splitting rows, utilities, units, per-model entries) is most of a
leaderboard request's work and does not depend on the viewer's weights; reading every
model's newest result is the rest. Both are redone only when the task's results change:
the key holds the task's results version (how many results, the newest one's time), its
data hashes and everything else ``prepare_board`` reads. A request then costs one small
aggregate query plus ``PreparedBoard.render`` of one page.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from configs.schema import TaskSpec
from store.db import Database
from usecases.boards.assemble import default_round_weights, reweighted
from usecases.boards.leaderboard import PreparedBoard, prepare_board
from usecases.service import Service

CACHED_BOARDS = 32  # tasks x round-weight variants x instance memories kept at once


class BoardCache:
    """A small thread-safe LRU of prepared boards (the server answers from many threads)."""

    def __init__(self, size: int = CACHED_BOARDS) -> None:
        self.size = size
        self._boards: OrderedDict[Hashable, PreparedBoard] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], PreparedBoard]) -> PreparedBoard:
        """The board under ``key``, built (outside the lock) when absent."""
        with self._lock:
            board = self._boards.get(key)
            if board is not None:
                self._boards.move_to_end(key)
                return board
        board = build()  # two threads may both build one: harmless, the results are equal
        with self._lock:
            self._boards[key] = board
            self._boards.move_to_end(key)
            while len(self._boards) > self.size:
                self._boards.popitem(last=False)
        return board


# Keyed weakly by the database object: a cache lives as long as its service's database and
# never outlives it into another service's (ids are reused, objects are not).
_CACHES: weakref.WeakKeyDictionary[Database, BoardCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(service: Service) -> BoardCache:
    """The cache of ``service``'s database (made on first use)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(service.db)
        if cache is None:
            cache = _CACHES[service.db] = BoardCache()
        return cache


def prepared(
    service: Service,
    task: TaskSpec,
    round_weights: Mapping[str, float] | None = None,
    instance_memory_gib: float | None = None,
) -> PreparedBoard:
    """``task``'s prepared board over its stored results under ``round_weights`` (the
    task's own when None), from the cache while they hold."""
    if round_weights is None:
        round_weights = default_round_weights(task)
    hashes = service.dataset_hashes(task.name)
    key = (
        task.name,
        service.queries.results_version(task.name),
        tuple(sorted(hashes.items())),
        tuple(sorted(round_weights.items())),
        instance_memory_gib or task.instance_memory_gib,
        tuple(spec.name for spec in task.rounds),
        task.metric,
    )

    def build() -> PreparedBoard:
        rows: list[dict[str, Any]] = service.queries.leaderboard_rows(task.name)
        rows = reweighted(rows, round_weights, task)
        return prepare_board(task, rows, instance_memory_gib, current_hashes=hashes)

    return cache_of(service).get(key, build)
