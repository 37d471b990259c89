"""Evaluate every example model and compare two such runs, minus timings.

A refactor must leave every number unchanged: run this on the old and the new checkout and
compare. Models run as local processes (deterministic and fast); timing-dependent fields
(throughput, memory, latency, the profile, the code version) are dropped before comparing.

    python tools/example_results.py run OUT_DIR            # from the checkout to measure
    python tools/example_results.py compare BEFORE AFTER   # exit 1 and a diff on change
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MODELS = "examples/models"
# (name, task, model command): the catalog of `dynaeval serve` plus the benchmark null model.
EXAMPLES = (
    ("sentiment-majority", "sentiment", f"python3 {MODELS}/majority/model.py --label positive"),
    ("sentiment-lexicon", "sentiment", f"{MODELS}/sentiment_lexicon/model.py"),
    ("nli-majority", "nli", f"python3 {MODELS}/majority/model.py --label entailed"),
    ("nli-overlap", "nli", f"{MODELS}/nli_overlap/model.py"),
    ("hate-majority", "hate_speech", f"python3 {MODELS}/majority/model.py --label not-hateful"),
    ("hate-lexicon", "hate_speech", f"{MODELS}/hate_lexicon/model.py"),
    ("qa-first-words", "qa", f"python3 {MODELS}/majority/model.py --answer-first-words 3"),
    ("qa-window", "qa", f"{MODELS}/qa_window/model.py"),
    ("sentiment-null", "sentiment", f"{MODELS}/null/model.py"),
    ("translation-copy", "translation", f"{MODELS}/translation_copy/model.py"),
    ("translation-dictionary", "translation", f"{MODELS}/translation_dictionary/model.py"),
    ("vqa-prior", "vqa", f"{MODELS}/vqa_prior/model.py"),
    ("vqa-shapes", "vqa", f"{MODELS}/vqa_shapes/model.py"),
)
TIMING_KEYS = {
    "throughput",
    "memory",
    "memory_peak",
    "profile",
    "latency_ms",
    "code_version",
    "duration_s",
    "throughput_spread",  # the repeats' spread: a timing too
    "tool_version",  # the checkout's own name, different on each side by design
}
TIMING_METRICS = {"throughput", "memory", "memory_peak"}


def run(out: Path) -> int:
    """Evaluate each example from the current directory into ``out/<name>.json``, on a fresh
    data folder (so which perturbed sets come from the cache is the same in every run)."""
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    data_dir = tempfile.mkdtemp(prefix="dynaeval-example-results-")
    env = {**os.environ, "DYNAEVAL_DATA_DIR": data_dir}
    for name, task, model in EXAMPLES:
        command = [sys.executable, "-m", "client.cli", "evaluate", model, "--task", task, "--json"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        (out / f"{name}.json").write_text(done.stdout)
        print(f"{name}: exit {done.returncode}", file=sys.stderr)
        failed += done.returncode != 0
    shutil.rmtree(data_dir, ignore_errors=True)
    return 1 if failed else 0


def without_timings(value: Any) -> Any:
    """``value`` with every timing-dependent field removed, recursively."""
    if isinstance(value, dict):
        if value.get("metric") in TIMING_METRICS:
            return None
        return {k: without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [item for item in map(without_timings, value) if item is not None]
    return value


def compare(before: Path, after: Path) -> int:
    """Exit status 0 when every example's JSON minus timings is identical."""
    changed = 0
    for name, _, _ in EXAMPLES:
        old = without_timings(json.loads((before / f"{name}.json").read_text()))
        new = without_timings(json.loads((after / f"{name}.json").read_text()))
        same = old == new
        changed += not same
        print(f"{name}: {'identical' if same else 'CHANGED'}")
        if not same:
            _print_difference(old, new, name)
    return 1 if changed else 0


def _print_difference(old: Any, new: Any, path: str) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                _print_difference(old.get(key), new.get(key), f"{path}.{key}")
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                _print_difference(a, b, f"{path}[{i}]")
    else:
        print(f"  {path}: {json.dumps(old)[:200]} -> {json.dumps(new)[:200]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run").add_argument("out", type=Path)
    cmp = sub.add_parser("compare")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    return run(args.out) if args.command == "run" else compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
