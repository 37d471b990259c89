#!/usr/bin/env bash
# Set up (idempotent; Docker required so the container tests run, not skip), lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --docker
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
# Imports go one way (contracts in pyproject.toml).
"$PYTHON" -c "from importlinter.cli import lint_imports_command; lint_imports_command(['--no-cache'])"
# Types: strict on the pure packages and the shared vocabulary, default elsewhere.
"$PYTHON" -m mypy
# Set up above guarantees an engine: a Docker test that would skip fails instead.
export DYNAEVAL_REQUIRE_DOCKER=1
exec "$PYTHON" -m pytest -q "$@"
