#!/usr/bin/env bash
# Set up (idempotent), lint, type-check and test.
#
#   scripts/test.sh           the whole suite (what .ci/run runs): Docker set up and required,
#                             nothing skipped, spread over DYNAEVAL_TEST_WORKERS processes
#   scripts/test.sh --fast    the fast lane: lint, types and the unit tests not marked slow
#
# Further arguments go to pytest (e.g. `scripts/test.sh --fast -k rights`).
set -euo pipefail
cd "$(dirname "$0")/.."
FAST=0
if [[ "${1:-}" == "--fast" ]]; then
  FAST=1
  shift
fi
if [[ $FAST == 1 ]]; then
  scripts/setup.sh --no-images
else
  scripts/setup.sh --docker
fi
# shellcheck source=scripts/python.sh
source scripts/python.sh
PYTHON="$(choose_python)"
# the console scripts (dynaeval) of that interpreter come first, as for the tests' subprocesses
PATH="$(dirname "$(command -v "$PYTHON")"):$PATH"
export PATH PYTHON
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
# Imports go one way (contracts in pyproject.toml).
"$PYTHON" -c "from importlinter.cli import lint_imports_command; lint_imports_command(['--no-cache'])"
# Types: strict on every package; on api/ all but three flags (pyproject.toml says why).
# mypy runs beside the first pytest part: it keeps one core busy for ~20 s on a fresh clone
# (no cache), which the tests' processes share; its report is printed when it has ended.
MYPY_LOG="$(mktemp)"
"$PYTHON" -m mypy > "$MYPY_LOG" 2>&1 &
MYPY_PID=$!
# an interrupted run leaves no mypy and no log behind (nor the measurements' list, below)
MEASUREMENT_IDS=""
trap 'kill "$MYPY_PID" 2>/dev/null || true; rm -f "$MYPY_LOG" "$MEASUREMENT_IDS"' EXIT
mypy_result() {
    local code=0
    wait "$MYPY_PID" || code=$?
    trap 'rm -f "$MEASUREMENT_IDS"' EXIT  # reaped: its number may be another's by the end
    cat "$MYPY_LOG"
    rm -f "$MYPY_LOG"
    return "$code"
}
# Three processes on two cores: many tests wait on subprocesses, containers or a database
# (four were 11:02 against 11:36, but the Docker engine then failed to start containers
# now and then: "runc create failed"). Tests are handed out one or two at a time, longest first (tests/conftest.py orders them): xdist's default sends each
# process a long run of consecutive tests up front, and the one that got the compose, chaos
# and serve tests then ran alone for minutes after the others had ended.
WORKERS="${DYNAEVAL_TEST_WORKERS:-3}"
PARALLEL=(-n "$WORKERS" --maxschedchunk 1)
if [[ $FAST == 1 ]]; then
  code=0
  "$PYTHON" -m pytest -q "${PARALLEL[@]}" -m "not slow" tests/unit "$@" || code=$?
  if ! mypy_result && [[ $code == 0 ]]; then code=1; fi
  exit "$code"
fi
# Set up above guarantees an engine: a Docker test that would skip fails instead.
export DYNAEVAL_REQUIRE_DOCKER=1
# The parallel part, then the measurements alone: a throughput measured while two other
# test processes load both cores is the load's, not the model's.
# (Exit code 5, "no test collected", is no failure: a selection may hold none of one part.)
status=0
run_part() {
    local code=0
    "$PYTHON" -m pytest -q "$@" || code=$?
    if [[ $code != 0 && $code != 5 && $status == 0 ]]; then
        status=$code
    fi
}
# The slowest thirty are listed at the end, so a CI log says where the minutes went. The
# parallel part writes the ids of the measurement tests it left out (tests/conftest.py): the
# lane then collects their files only, not all ~3,300 tests again.
MEASUREMENT_IDS="$(mktemp)"
export DYNAEVAL_MEASUREMENT_IDS="$MEASUREMENT_IDS"
run_part "${PARALLEL[@]}" --durations=30 -m "not measurement" "$@"
unset DYNAEVAL_MEASUREMENT_IDS
if ! mypy_result && [[ $status == 0 ]]; then  # before the measurements: they run alone
    status=1
fi
mapfile -t measurements < "$MEASUREMENT_IDS"
rm -f "$MEASUREMENT_IDS"
# Nothing listed (a selection without them, or a part that never collected): the lane
# collects everything, as it would without the list, so no measurement is ever left out.
run_part -p no:xdist -m measurement "$@" "${measurements[@]}"
exit "$status"
