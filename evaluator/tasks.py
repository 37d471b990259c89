"""The tasks this evaluator can run: task YAML checked against the metrics and
perturbations registered here (the spec layer itself imports no plugin package)."""

from __future__ import annotations

from pathlib import Path

from configs import loader
from configs.paths import TASKS_DIR
from configs.schema import TaskSpec
from metrics.metric import REGISTRY as METRICS
from perturbations.perturbation import REGISTRY as PERTURBATIONS

PLUGINS = loader.Plugins(metrics=METRICS, perturbations=PERTURBATIONS)


def load_tasks(tasks_dir: Path = TASKS_DIR) -> dict[str, TaskSpec]:
    """Every task under ``tasks_dir`` by name; a broken file raises ConfigError."""
    return loader.load_tasks(PLUGINS, tasks_dir)


def load_task(path: str | Path, config_dir: Path | None = None) -> TaskSpec:
    """One task file, merged over the defaults, validated."""
    return loader.load_task(path, PLUGINS, config_dir)
