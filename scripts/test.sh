#!/usr/bin/env bash
# Set up (idempotent; Docker required so the container tests run, not skip), lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --docker
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
exec "$PYTHON" -m pytest -q "$@"
