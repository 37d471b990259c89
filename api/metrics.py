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
from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from api.service import Service
from store.stats import QueueStats, queue_stats

# Seconds: from a tiny model's minute to a large one's hour.
DURATION_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)


class QueueCollector(Collector):
    """The job queue as gauges, read from ``stats`` on every scrape."""

    def __init__(self, stats: Callable[[], QueueStats]) -> None:
        self.stats = stats

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
        yield _labelled(
            "dynaeval_worker_heartbeat_age_seconds",
            "Seconds since the newest heartbeat of the running jobs a worker holds.",
            "worker",
            stats.heartbeat_age_s,
        )
        yield _durations(stats.durations)


def _labelled(name: str, documentation: str, label: str, values: dict[str, Any]) -> Metric:
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], float(value))
    return family


def _durations(durations: list[tuple[str, float]]) -> Metric:
    """A gauge histogram (it describes the newest finished jobs, so it may shrink)."""
    family = GaugeHistogramMetricFamily(
        "dynaeval_job_duration_seconds",
        "Start-to-finish seconds of the newest finished jobs, by final status.",
        labels=["status"],
    )
    for status in sorted({s for s, _ in durations}):
        seconds = [d for s, d in durations if s == status]
        buckets = [
            (floatToGoString(b), float(sum(d <= b for d in seconds))) for b in DURATION_BUCKETS
        ]
        buckets.append(("+Inf", float(len(seconds))))
        family.add_metric([status], buckets, sum(seconds))
    return family


def registry_for(service: Service) -> CollectorRegistry:
    """The queue of ``service``, and this process's CPU, memory and open files."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(lambda: queue_stats(service.db, service.clock.now())))
    ProcessCollector(registry=registry)
    return registry


def install(app: Flask, service: Service) -> None:
    """Serve ``GET /metrics`` (admins only) from a registry of this app's own."""
    registry = registry_for(service)

    def metrics() -> Response:
        return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

    app.add_url_rule("/metrics", "metrics", metrics, methods=["GET"])
