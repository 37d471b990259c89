"""CPU-bound model: like the null model but burns ~1 ms of CPU per example (overhead benchmark).

python examples/models/cpu_1ms/model.py --label positive [--ms 1.0]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaeval_server import serve  # noqa: E402


def burn_cpu(
    seconds: float,
    cpu_clock: Callable[[], float] = time.process_time,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Busy-loop until this process has used ``seconds`` more CPU time (and wall time)."""
    cpu_end = cpu_clock() + seconds
    wall_end = wall_clock() + seconds
    while cpu_clock() < cpu_end or wall_clock() < wall_end:
        pass


def make_predict(label: str, answer: str | None, ms: float):
    """Return a predict function spending ``ms`` milliseconds of CPU on each instance."""
    key, value = ("answer", answer) if answer is not None else ("label", label)
    seconds = ms / 1000.0

    def predict(task: str, instances: list[dict]) -> list[dict]:
        burn_cpu(seconds * len(instances))
        return [{"uid": inst.get("uid"), key: value} for inst in instances]

    return predict


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="positive", help="label answered for every instance")
    parser.add_argument("--answer", default=None, help="QA: answer string for every instance")
    parser.add_argument("--ms", type=float, default=1.0, help="CPU milliseconds per example")
    args = parser.parse_args(argv)
    serve(
        make_predict(args.label, args.answer, args.ms),
        {"name": "cpu-1ms", "version": "1.0", "framework": "python-stdlib"},
    )


if __name__ == "__main__":
    main()
