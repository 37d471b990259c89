#!/usr/bin/env bash
# Build the offline model base image dynaeval/python-base from Debian packages.
#
#   mmdebstrap (bookworm, variant apt) -> rootfs tarball -> docker import
#
# The tag dynaeval/python-base:<hash> names the content: <hash> is the sha256 of this
# script (which holds the package list, mirror and suite). A second run finds the tag and
# only re-points :latest, so the script is idempotent and cheap to call from test fixtures.
#
# The image adds a non-root user "model" (uid/gid 10001) but does not switch to it: model
# images say `USER 10001` themselves, and the Docker sandbox forces 10001:10001 anyway.
#
# Environment: DYNAEVAL_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#              DYNAEVAL_BASE_REPO (default dynaeval/python-base), FORCE=1 to rebuild.
set -euo pipefail

REPO="${DYNAEVAL_BASE_REPO:-dynaeval/python-base}"
MIRROR="${DYNAEVAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="bookworm"
# python3-minimal lacks http.server, json, socketserver, email...: libpython3.11-stdlib
# (pulled in by python3) has them. fastapi + uvicorn serve Dynalab 2.0 style models
# (Debian ships no `uvicorn` command: a two-line shim in /usr/local/bin provides it).
# iptables + iproute2 are for the sandbox's network guard (evaluator/docker_sandbox.py),
# which runs this image with CAP_NET_ADMIN to lock down a run's network namespace; model
# containers get no capabilities, so the tools are inert for them.
PACKAGES="python3,python3-minimal,libpython3.11-stdlib,python3-fastapi,python3-uvicorn,python3-flask"
# Pillow reads and writes the pictures of image tasks (the VQA example model reads them).
PACKAGES+=",python3-pil"
PACKAGES+=",iptables,iproute2"

log() { printf '[build-base-image] %s\n' "$*" >&2; }
die() { printf '[build-base-image] ERROR: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "docker CLI not found (run scripts/ensure-docker.sh)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found (run scripts/ensure-docker.sh)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (run scripts/ensure-docker.sh)"

script_path="$(readlink -f "${BASH_SOURCE[0]}")"
hash="$( { cat "$script_path"; printf '%s\n' "$PACKAGES" "$SUITE"; } | sha256sum | cut -c1-16)"
tag="${REPO}:${hash}"

if [[ "${FORCE:-0}" != "1" ]] && docker image inspect "$tag" >/dev/null 2>&1; then
    log "cached: $tag exists; pointing ${REPO}:latest at it"
    docker tag "$tag" "${REPO}:latest"
    echo "$tag"
    exit 0
fi

# shellcheck source=scripts/fast-scratch.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/fast-scratch.sh"
scratch="$(fast_scratch)"
workdir="$(mktemp -d "$scratch/dynaeval-base.XXXXXX")"
trap 'rm -rf "$workdir"' EXIT
rootfs_tar="$workdir/rootfs.tar"
start=$(date +%s)

log "building $tag: mmdebstrap $SUITE from $MIRROR with $PACKAGES"
TMPDIR="$scratch" mmdebstrap \
    --variant=apt \
    --include="$PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='echo "model:x:10001:10001:dynaeval model:/tmp:/usr/sbin/nologin" >> "$1/etc/passwd"' \
    --customize-hook='echo "model:x:10001:" >> "$1/etc/group"' \
    --customize-hook='echo "model:!:19000:0:99999:7:::" >> "$1/etc/shadow"' \
    --customize-hook='mkdir -p "$1/model" && chmod 0755 "$1/model"' \
    --customize-hook='printf "#!/bin/sh\nexec python3 -m uvicorn \"\$@\"\n" > "$1/usr/local/bin/uvicorn"' \
    --customize-hook='chmod 0755 "$1/usr/local/bin/uvicorn"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    --customize-hook='chroot "$1" python3 -c "import http.server, json, socketserver, fastapi, uvicorn"' \
    --customize-hook='chroot "$1" iptables-nft --version' \
    --customize-hook='chroot "$1" uvicorn --version' \
    "$SUITE" "$rootfs_tar" "$MIRROR" \
    || die "mmdebstrap failed (is a Debian mirror reachable at $MIRROR?)"

log "importing rootfs ($(du -h "$rootfs_tar" | cut -f1)) as $tag"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
    --change 'ENV PYTHONUNBUFFERED=1' \
    --change 'ENV PORT=8080' \
    --change 'WORKDIR /model' \
    --change 'CMD ["python3"]' \
    --message "dynaeval base image: debian $SUITE + $PACKAGES" \
    "$rootfs_tar" "$tag" >/dev/null \
    || die "docker import failed"
docker tag "$tag" "${REPO}:latest"
log "built $tag in $(( $(date +%s) - start )) s"
echo "$tag"
