#!/bin/sh
# dynaeval/app's entrypoint (under tini, which forwards signals and reaps children).
# DYNAEVAL_SELF_CONTAINER=auto names this container by its hostname, which Docker sets to
# the container's short id: a worker in a container joins each run's network with it.
set -eu
if [ "${DYNAEVAL_SELF_CONTAINER:-}" = "auto" ]; then
    DYNAEVAL_SELF_CONTAINER="$(hostname)"
    export DYNAEVAL_SELF_CONTAINER
fi
exec "$@"
