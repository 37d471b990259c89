"""One registry of task metrics: a short name maps to a :class:`Metric`.

Every metric scores ``(gold, pred, labels)`` on Dynaboard's 0-100 scale; QA metrics ignore
``labels``. Task configs name metrics by these short names.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metrics.classification import accuracy, macro_f1
from metrics.qa import qa_exact_match, qa_f1

ScoreFn = Callable[[Sequence[str], Sequence[str], Sequence[str]], float]


@dataclass(frozen=True)
class Metric:
    """A named task metric; ``score(gold, pred, labels)`` returns 0..100."""

    name: str
    higher_is_better: bool
    score: ScoreFn

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description (the score function is omitted)."""
        return {"name": self.name, "higher_is_better": self.higher_is_better}


class MetricRegistry:
    """Short name -> :class:`Metric`; duplicates rejected, unknown names explained."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}

    def register(self, metric: Metric) -> Metric:
        """Add ``metric``; raise ``ValueError`` if its name is taken."""
        if metric.name in self._metrics:
            raise ValueError(f"a metric named {metric.name!r} is already registered.")
        self._metrics[metric.name] = metric
        return metric

    def get(self, name: str) -> Metric:
        """The metric called ``name``; ``KeyError`` with a did-you-mean hint otherwise."""
        try:
            return self._metrics[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._metrics, n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            known = ", ".join(sorted(self._metrics))
            raise KeyError(f"unknown metric {name!r}.{hint} Known metrics: {known}.") from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._metrics)


REGISTRY = MetricRegistry()
REGISTRY.register(Metric("accuracy", True, lambda gold, pred, labels: accuracy(gold, pred)))
REGISTRY.register(Metric("macro_f1", True, macro_f1))
REGISTRY.register(Metric("squad_f1", True, lambda gold, pred, labels: qa_f1(gold, pred)))
REGISTRY.register(
    Metric("exact_match", True, lambda gold, pred, labels: qa_exact_match(gold, pred))
)


def get_metric(name: str) -> Metric:
    """The registered metric called ``name`` (``KeyError`` with a suggestion if unknown)."""
    return REGISTRY.get(name)


def metric_names() -> list[str]:
    """Names of all registered metrics."""
    return REGISTRY.names()
