"""A worker killed while its ``process`` runtime starts the model, many times over:

    python -m tests.chaos.kill_during_start --marker TOKEN [--tries 60] [--seed 1]

Each try forks a child that starts the chaos model with ``ProcessRuntime.start`` and is
SIGKILLed 0-4 ms after it began (inside the fork and exec of the model, where the chaos run
hits only now and then). A small process, so its forks are fast and the kills land in that
window often. Prints how many tries were made; the test then looks for models left running.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from pathlib import Path

MODEL = Path(__file__).resolve().parent.parent / "fixtures" / "chaos_model.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--marker", required=True)
    parser.add_argument("--tries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    from evaluator.runtimes.process import ProcessRuntime

    command = [sys.executable, "-S", str(MODEL), "--marker", args.marker]
    rng = random.Random(args.seed)
    for _ in range(args.tries):
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the "worker": about to start its model
            os.close(ready_r)
            runtime = ProcessRuntime(command)
            os.write(ready_w, b"x")
            runtime.start()
            time.sleep(30)
            os._exit(0)
        os.close(ready_w)
        os.read(ready_r, 1)
        os.close(ready_r)
        time.sleep(rng.uniform(0.0, 0.004))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(f"{args.tries} workers killed while starting a model", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
