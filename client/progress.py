"""A progress bar on the terminal (rich) for ``evaluate`` and ``submit --wait``.

Shown only when both stdout and stderr are terminals and ``--json`` is off: CI logs, pipes
and redirections stay quiet. The bar is drawn on stderr and removed when it ends, so what
the command prints on stdout is the same with or without it."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import IO, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


def progress_wanted(json_output: bool) -> bool:
    """Whether a bar may be drawn: not with ``--json``, and only on a terminal."""
    return not json_output and sys.stdout.isatty() and sys.stderr.isatty()


class ProgressBar:
    """``with ProgressBar("evaluating") as bar: bar.update(0.4, "round r2")``; a disabled bar
    draws nothing."""

    def __init__(self, title: str, *, enabled: bool = True, file: IO[str] | None = None) -> None:
        self.enabled = enabled
        console = Console(file=file or sys.stderr, stderr=file is None)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[stage]}"),
            console=console,
            transient=True,
        )
        self._title = title
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self._progress.start()
            self._task = self._progress.add_task(self._title, total=1.0, stage="starting")
        return self

    def update(self, fraction: float, stage: str) -> None:
        """The evaluation's progress (0..1) and the stage it is in."""
        if self._task is not None:
            done = min(max(float(fraction), 0.0), 1.0)
            self._progress.update(self._task, completed=done, stage=stage)

    def show_submission(self, found: dict[str, Any]) -> None:
        """A polled submission's job progress and stage."""
        job = found.get("job") or {}
        self.update(job.get("progress") or 0.0, f"{job.get('status')}: {job.get('stage') or ''}")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._progress.stop()
            self._task = None
