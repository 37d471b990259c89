#!/usr/bin/env bash
# Build every example model image: examples/models/<dir>/Dockerfile -> dynaeval-example/<dir>:latest
#
# The build context is examples/models/ (each image copies the shared dynaeval_server.py).
# Docker's build cache makes a second run a no-op. Builds the base image first if needed.
# Usage: scripts/build-example-images.sh [dir ...]     (default: every dir with a Dockerfile)
set -euo pipefail

log() { printf '[build-example-images] %s\n' "$*" >&2; }
die() { printf '[build-example-images] ERROR: %s\n' "$*" >&2; exit 1; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
models="$(cd "$here/../examples/models" && pwd)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (run scripts/ensure-docker.sh)"

if ! docker image inspect dynaeval/python-base:latest >/dev/null 2>&1; then
    log "base image missing: building it"
    "$here/build-base-image.sh" >/dev/null
fi

if [[ $# -gt 0 ]]; then
    dirs=("$@")
else
    dirs=()
    for dockerfile in "$models"/*/Dockerfile; do
        dirs+=("$(basename "$(dirname "$dockerfile")")")
    done
fi
[[ ${#dirs[@]} -gt 0 ]] || die "no example model Dockerfiles under $models"

for dir in "${dirs[@]}"; do
    [[ -f "$models/$dir/Dockerfile" ]] || die "no Dockerfile in $models/$dir"
    tag="dynaeval-example/$dir:latest"
    log "building $tag"
    # --network none: nothing may download at build time (offline rule).
    # The engine's legacy-builder notice is noise; the output matters only on failure.
    if ! output="$(docker build --quiet --network none -f "$models/$dir/Dockerfile" -t "$tag" \
            "$models" 2>&1)"; then
        printf '%s\n' "$output" >&2
        die "building $tag failed"
    fi
    echo "$tag"
done
