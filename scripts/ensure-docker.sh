#!/usr/bin/env bash
# Make sure a Docker engine answers and the tools the offline image builds need exist.
#
# * installs docker.io, mmdebstrap, docker-registry with apt-get, each only when missing;
# * starts dockerd in the background when no engine answers, then waits (bounded) until
#   `docker info` works. dockerd's log goes to ${DOCKERD_LOG:-/tmp/dynaeval-dockerd.log}.
#
# Needs root (or sudo) only when it has to install or start something.
# Environment: DOCKER_WAIT_S (default 60).
set -euo pipefail

log() { printf '[ensure-docker] %s\n' "$*" >&2; }
die() { printf '[ensure-docker] ERROR: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
    command -v sudo >/dev/null && SUDO="sudo"
fi

apt_updated=0
apt_install() {  # apt_install <command-to-check> <package>
    local cmd="$1" pkg="$2"
    if command -v "$cmd" >/dev/null 2>&1; then
        log "$pkg present ($(command -v "$cmd"))"
        return 0
    fi
    if [[ "$apt_updated" == "0" ]]; then
        log "apt-get update"
        $SUDO apt-get update -qq || die "apt-get update failed"
        apt_updated=1
    fi
    log "installing $pkg"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$pkg" \
        || die "apt-get install $pkg failed"
}

apt_install docker docker.io
apt_install mmdebstrap mmdebstrap
apt_install docker-registry docker-registry

if docker info >/dev/null 2>&1; then
    log "Docker engine answers (server $(docker version --format '{{.Server.Version}}'))"
    exit 0
fi

command -v dockerd >/dev/null || die "dockerd not found although docker.io is installed"
logfile="${DOCKERD_LOG:-/tmp/dynaeval-dockerd.log}"
log "no engine answers: starting dockerd in the background (log: $logfile)"
# setsid: dockerd must outlive this script and its process group.
$SUDO setsid dockerd >"$logfile" 2>&1 < /dev/null &

wait_s="${DOCKER_WAIT_S:-60}"
for ((i = 0; i < wait_s; i++)); do
    if docker info >/dev/null 2>&1; then
        log "Docker engine up after ${i} s"
        exit 0
    fi
    sleep 1
done
tail -n 20 "$logfile" >&2 || true
die "dockerd did not answer within ${wait_s} s (see $logfile)"
