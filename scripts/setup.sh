#!/usr/bin/env bash
# Idempotent set-up on a Debian-like machine: Debian packages the project needs, the Python
# package and its dependencies, and (when asked) a Docker engine with the offline images.
#
#   scripts/setup.sh              # Python side + Debian packages; Docker when it can
#   scripts/setup.sh --docker     # a Docker engine and the example images are required
#   scripts/setup.sh --no-images  # no image built or checked (the fast lane: unit tests
#                                 # use none, and the compose image is rebuilt, about a
#                                 # minute, whenever the project's sources change)
#   --no-deploy-images            # beside the others: every image but the compose
#                                 # deployment's (scripts/run.sh: serve needs none of them)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }
need_docker=0
no_images=0
deploy_images=1
for arg in "$@"; do
    case "$arg" in
        --docker) need_docker=1 ;;
        --no-images) no_images=1 ;;
        --no-deploy-images) deploy_images=0 ;;
        *) log "unknown option: $arg (see the top of scripts/setup.sh)"; exit 2 ;;
    esac
done

SUDO=""
[[ "$(id -u)" != "0" ]] && command -v sudo >/dev/null && SUDO="sudo"

# WordNet for the offline paraphrase perturbation (read from /usr/share/wordnet).
if [[ ! -f /usr/share/wordnet/index.noun ]]; then
    log "installing wordnet-base"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wordnet-base
fi

# PostgreSQL server binaries: the tests start a throwaway cluster (tests/postgres.py) so the
# store's contract suite and the migrations run on PostgreSQL as well as SQLite.
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    log "installing postgresql"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql
fi

# Headless Chromium and its driver for the browser tests (tests/browser): Debian's, never a
# download by Selenium.
if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
    log "installing chromium and chromium-driver"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver
fi

# The Docker engine before the Python side, so the base image (Debian packages through
# mmdebstrap: a minute or more on a fresh machine, mostly downloading) is built beside the
# pip install below instead of after it. It runs in a session of its own (setsid), so an
# early end of set-up stops all of it, mmdebstrap's workers included, by process group.
engine=0
base_pid=""
base_log="$(mktemp)"
stop_base_build() {
    [[ -n "$base_pid" ]] || return 0
    kill -TERM -- "-$base_pid" 2>/dev/null || true
}
trap 'stop_base_build; rm -f "$base_log"' EXIT
if [[ "$no_images" == "0" ]] && scripts/ensure-docker.sh; then
    engine=1
    log "the base image: checked, or built from Debian packages beside the Python install"
    setsid scripts/build-base-image.sh >/dev/null 2>"$base_log" &
    base_pid=$!
fi

# shellcheck source=scripts/python.sh
source scripts/python.sh
PYTHON="$(choose_python)"
if externally_managed "$PYTHON"; then
    # Debian's python3 refuses pip (PEP 668): the package goes into ./.venv instead, which
    # every script then uses (scripts/python.sh).
    log "$PYTHON is managed by the system (PEP 668): installing into ./.venv"
    if ! "$PYTHON" -m venv .venv 2>/dev/null; then
        log "installing python3-venv"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
        rm -rf .venv
        "$PYTHON" -m venv .venv
    fi
    PYTHON="$PWD/.venv/bin/python"
fi
# The stamp records a finished install of this checkout into this interpreter; a change of
# pyproject or of interpreter redoes it.
if [[ ! -f .setup-stamp || pyproject.toml -nt .setup-stamp || "$(cat .setup-stamp)" != "$PYTHON" ]]; then
    log "installing the dynaeval package and its dependencies (pip, into $PYTHON)"
    "$PYTHON" -m pip install -q --disable-pip-version-check -e '.[test]'
    printf '%s' "$PYTHON" > .setup-stamp
fi
export PYTHON  # the image builders below use the same interpreter

# moto's S3 server (the test extra): the S3 blob store's tests start it on 127.0.0.1
# (tests/s3.py); without it they skip locally and fail in CI.
if "$PYTHON" -c "import moto.server, boto3" 2>/dev/null; then
    log "moto's S3 server is installed (python -m moto.server)"
else
    log "WARNING: moto's S3 server is not importable: the S3 tests will skip (CI fails them);" \
        "install it with: $PYTHON -m pip install -e '.[test]'"
fi

if [[ "$no_images" == "1" ]]; then
    log "images not checked (--no-images)"
    exit 0
fi
docker_ok=0
base_ok=0
if [[ "$engine" == "1" ]]; then
    if wait "$base_pid"; then
        base_ok=1
        tail -n 1 "$base_log" >&2  # "built … in N s", or "cached: …"
    else
        tail -n 30 "$base_log" >&2
    fi
    base_pid=""
fi
if [[ "$base_ok" == "1" ]]; then
    command -v docker-compose >/dev/null || { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        $SUDO apt-get install -y -qq --no-install-recommends docker-compose; } || log "no docker-compose"
    # Every image a first serve needs (the catalog's examples, two at a time, each said as
    # it is built); with --docker also each example folder's own, which the tests run;
    # build-deploy-images.sh: the compose deployment's images (deploy/, tests/deploy). All are
    # cached by Docker: a second run takes seconds.
    every_folder=()
    [[ "$need_docker" == "0" ]] || every_folder=(--every-folder)
    if "$PYTHON" -m client.examples "${every_folder[@]}" >&2 \
        && { [[ "$deploy_images" == "0" ]] || scripts/build-deploy-images.sh >/dev/null; }; then
        docker_ok=1
    fi
fi
if [[ "$docker_ok" == "1" ]]; then
    log "Docker engine and example images ready"
elif [[ "$need_docker" == "1" ]]; then
    log "ERROR: a Docker engine and the example images are required here"; exit 1
else
    log "no usable Docker engine: example models will run as local processes"
fi
