"""``GET /metrics``: the queue and the workers in Prometheus's text format, for operators.

Everything is read from the database at scrape time (``store.stats``): the API and the
workers may be separate processes, so no in-memory counter would see the whole queue.
The route is outside the OpenAPI document and needs an admin token (worker ids are host
names, which only admins see elsewhere too)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from flask import Flask, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from store.stats import DURATION_BUCKETS, Durations, QueueStats, TaskQueue, queue_stats
from usecases.service import Service


class QueueCollector(Collector):
    """The job queue as gauges, read from ``stats`` on every scrape."""

    def __init__(
        self, stats: Callable[[], QueueStats], task_names: Callable[[], list[str]] = list
    ) -> None:
        self.stats = stats
        self.task_names = task_names  # every task gets its per-task gauges, 0 when idle

    def collect(self) -> Iterator[Metric]:
        stats = self.stats()
        yield _labelled("dynaeval_jobs", "Jobs by status.", "status", stats.by_status)
        yield _labelled(
            "dynaeval_failed_jobs",
            "Failed jobs by failure code.",
            "code",
            stats.failures_by_code,
        )
        yield GaugeMetricFamily(
            "dynaeval_queue_depth", "Queued jobs (waiting for a worker).", value=stats.queued
        )
        yield GaugeMetricFamily(
            "dynaeval_queue_oldest_age_seconds",
            "Seconds the oldest queued job has been waiting for a worker (0: none waits).",
            value=stats.oldest_queued_age_s,
        )
        queues = {name: TaskQueue() for name in self.task_names()} | stats.by_task
        yield _labelled(
            "dynaeval_task_queue_depth",
            "Queued jobs per task.",
            "task",
            {task: q.queued for task, q in queues.items()},
        )
        yield _labelled(
            "dynaeval_task_queue_oldest_age_seconds",
            "Seconds the oldest job ready to run on a task has waited (0: none waits).",
            "task",
            {task: q.oldest_wait_s for task, q in queues.items()},
        )
        yield _labelled(
            "dynaeval_worker_heartbeat_age_seconds",
            "Seconds since a worker's latest sign of life, busy or idle (a worker that "
            "stopped cleanly is not listed; one silent for a day is forgotten).",
            "worker",
            stats.heartbeat_age_s,
        )
        yield _attempts(stats.attempts)
        yield _durations(stats.durations)


def _labelled(name: str, documentation: str, label: str, values: dict[str, Any]) -> Metric:
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], float(value))
    return family


def _attempts(attempts: dict[tuple[str, str], int]) -> Metric:
    """Every ended attempt by outcome and failure code: a lost worker counts each time."""
    family = CounterMetricFamily(
        "dynaeval_job_attempts",
        "Ended job attempts by outcome (done, failed, lost, cancelled, handed_back) and "
        "failure code (empty when none).",
        labels=["outcome", "code"],
    )
    for (outcome, code), count in sorted(attempts.items()):
        family.add_metric([outcome, code], float(count))
    return family


def _durations(durations: dict[str, Durations]) -> Metric:
    """Start-to-finish seconds of every finished job, by final status (a true histogram:
    cumulative buckets that only grow)."""
    family = HistogramMetricFamily(
        "dynaeval_job_duration_seconds",
        "Start-to-finish seconds of finished jobs, by final status.",
        labels=["status"],
    )
    for status, found in sorted(durations.items()):
        buckets = [
            (floatToGoString(bound), float(count))
            for bound, count in zip(DURATION_BUCKETS, found.buckets, strict=True)
        ]
        buckets.append(("+Inf", float(found.count)))
        family.add_metric([status], buckets, found.total_s)
    return family


def registry_for(service: Service) -> CollectorRegistry:
    """The queue of ``service``, and this process's CPU, memory and open files."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        QueueCollector(
            lambda: queue_stats(service.db, service.clock.now()), lambda: list(service.tasks)
        )
    )
    ProcessCollector(registry=registry)
    return registry


def install(app: Flask, service: Service) -> None:
    """Serve ``GET /metrics`` (admins only) from a registry of this app's own."""
    registry = registry_for(service)

    def metrics() -> Response:
        return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

    app.add_url_rule("/metrics", "metrics", metrics, methods=["GET"])
