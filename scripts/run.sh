#!/usr/bin/env bash
# Set up (idempotent), then start the embedded service: API + worker, SQLite + a local
# folder (./dynaeval-data), every example model queued on first start.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-deploy-images  # serve runs no compose image: not built here
# shellcheck source=scripts/python.sh
source scripts/python.sh
exec "$(choose_python)" -m client.cli serve "$@"
