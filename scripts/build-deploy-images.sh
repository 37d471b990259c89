#!/usr/bin/env bash
# Build the production images deploy/docker-compose.yml runs, from Debian packages and a
# wheelhouse made on this machine (no registry, no network inside any build):
#
#   dynaeval/deploy-base:<hash>  mmdebstrap bookworm: python3, python3-venv, wordnet-base,
#                                tini, ca-certificates -> docker import
#   dynaeval/pg-base:<hash>      mmdebstrap bookworm: postgresql-15 -> docker import
#   dynaeval/app:<hash>          deploy-base + the project and its runtime dependencies
#                                (+ moto[server] for the S3 service) in /opt/dynaeval
#   dynaeval/postgres:<hash>     pg-base + deploy/postgres/entrypoint.sh (initdb on first start)
#
# Every tag names its content (sha256 of what goes in: this script, the package lists, the
# Dockerfiles, the project's sources, the pinned dependency versions); :latest points at the
# newest. A second run finds the tags and only re-points :latest (a second or two), so it is
# idempotent and cheap to call from setup and tests. Python packages: binary wheels that
# `pip download` fetches from the package index on this host for the image's python3
# (bookworm's CPython 3.11.2, manylinux), kept in
# ${DYNAEVAL_WHEEL_CACHE:-~/.cache/dynaeval/deploy-wheels}/<hash of the requirements>; the
# project itself is installed from its sources inside the build, offline.
#
# Prints the app and postgres tags. Environment: DYNAEVAL_DEBIAN_MIRROR (default
# http://deb.debian.org/debian), PYTHON (default python3), FORCE=1 to rebuild everything.
set -euo pipefail

MIRROR="${DYNAEVAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="bookworm"
PYTHON="${PYTHON:-python3}"
APP_PACKAGES="python3,python3-venv,libpython3.11-stdlib,wordnet-base,tini,ca-certificates"
PG_PACKAGES="postgresql-15"
# The project's sources, copied into the build context (the tree is never written).
SOURCES=(api client configs dynascore evaluator metrics perturbations store usecases worker
    pyproject.toml README.md)

log() { printf '[build-deploy-images] %s\n' "$*" >&2; }
die() { printf '[build-deploy-images] ERROR: %s\n' "$*" >&2; exit 1; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
deploy="$root/deploy"
script_path="$(readlink -f "${BASH_SOURCE[0]}")"
started_ns=$(date +%s%N)

command -v docker >/dev/null || die "docker CLI not found (run scripts/ensure-docker.sh)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (run scripts/ensure-docker.sh)"

exists() { docker image inspect "$1" >/dev/null 2>&1; }
build() {  # build <tag> <base> <context>: no network; the output only when it fails
    local output
    if ! output="$(docker build --quiet --network none --build-arg "BASE=$2" -t "$1" "$3" 2>&1)"
    then
        printf '%s\n' "$output" >&2
        die "building $1 failed"
    fi
}
short() { sha256sum | cut -c1-16; }

# mmdebstrap unpacks in the fast scratch place; the work folder stays beside the wheel cache's
# file system, which its hard links need
# shellcheck source=scripts/fast-scratch.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/fast-scratch.sh"
scratch="$(fast_scratch)"
workdir="$(mktemp -d "${TMPDIR:-/tmp}/dynaeval-deploy.XXXXXX")"
trap 'rm -rf "$workdir"' EXIT

# -- Debian roots (mmdebstrap -> docker import), cached by package list ------------------------
debian_root() {  # debian_root <repo> <packages> [extra customize hooks...] -> prints the tag
    local repo="$1" packages="$2"
    shift 2
    local hash tag rootfs
    hash="$( { printf '%s\n' "$packages" "$SUITE" "$@"; } | short)"
    tag="$repo:$hash"
    if [[ "${FORCE:-0}" != "1" ]] && exists "$tag"; then
        echo "$tag"
        return 0
    fi
    command -v mmdebstrap >/dev/null || die "mmdebstrap not found (run scripts/ensure-docker.sh)"
    rootfs="$workdir/$(basename "$repo").tar"
    log "building $tag: mmdebstrap $SUITE from $MIRROR with $packages"
    local hooks=()
    for hook in "$@"; do hooks+=(--customize-hook="$hook"); done
    TMPDIR="$scratch" mmdebstrap --variant=apt --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        "${hooks[@]}" \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        "$SUITE" "$rootfs" "$MIRROR" >&2 \
        || die "mmdebstrap failed (is a Debian mirror reachable at $MIRROR?)"
    docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --message "dynaeval deploy root: debian $SUITE + $packages" \
        "$rootfs" "$tag" >/dev/null || die "docker import failed"
    rm -f "$rootfs"
    echo "$tag"
}

app_base="$(debian_root dynaeval/deploy-base "$APP_PACKAGES" \
    'chroot "$1" python3 -c "import venv, ensurepip"' \
    'test -f "$1/usr/share/wordnet/index.noun"')"
# The package's postinst makes a "main" cluster: ours is made at first start, in a volume.
pg_base="$(debian_root dynaeval/pg-base "$PG_PACKAGES" \
    'rm -rf "$1"/var/lib/postgresql/15/main "$1"/etc/postgresql/15/main' \
    'test -x "$1/usr/lib/postgresql/15/bin/initdb"')"

# -- dynaeval/postgres ------------------------------------------------------------------------
pg_hash="$( { echo "$pg_base"; cat "$script_path" "$deploy/postgres/Dockerfile" \
    "$deploy/postgres/entrypoint.sh"; } | short)"
pg_tag="dynaeval/postgres:$pg_hash"
if [[ "${FORCE:-0}" == "1" ]] || ! exists "$pg_tag"; then
    log "building $pg_tag"
    build "$pg_tag" "$pg_base" "$deploy/postgres"
fi
docker tag "$pg_tag" dynaeval/postgres:latest

# -- dynaeval/app -----------------------------------------------------------------------------
# Runtime dependencies from pyproject.toml, moto's server, and the project's build backend, as
# binary wheels for the image's python3 (bookworm: CPython 3.11.2, glibc 2.36).
requirements="$workdir/requirements.txt"
(cd "$root" && "$PYTHON" - "$requirements" <<'EOF_PY'
import sys, tomllib
pyproject = tomllib.load(open("pyproject.toml", "rb"))
project = pyproject["project"]
moto = [d for d in project["optional-dependencies"]["test"] if d.startswith("moto")]
build = ["setuptools>=70.1", "wheel"] + pyproject["build-system"]["requires"]
open(sys.argv[1], "w").write("\n".join([*project["dependencies"], *moto, *build]) + "\n")
EOF_PY
) || die "cannot read the dependencies from pyproject.toml"
wheel_root="${DYNAEVAL_WHEEL_CACHE:-$HOME/.cache/dynaeval/deploy-wheels}"
version_file="$wheel_root/python-${app_base#*:}"  # asked once per base image
if [[ ! -s "$version_file" ]]; then
    mkdir -p "$wheel_root"
    docker run --rm --network none "$app_base" python3 -c \
        'import platform; print(platform.python_version())' > "$version_file.partial" \
        || die "no python3 in $app_base"
    mv "$version_file.partial" "$version_file"
fi
image_python="$(cat "$version_file")"
deps_hash="$( { cat "$requirements"; echo "$image_python"; } | short)"
sources_hash="$(cd "$root" && find "${SOURCES[@]}" -type f ! -path '*/__pycache__/*' \
    ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum | short)"
app_hash="$( { echo "$app_base" "$deps_hash" "$sources_hash"; cat "$script_path" \
    "$deploy/app/Dockerfile" "$deploy/app/entrypoint.sh"; } | short)"
app_tag="dynaeval/app:$app_hash"

if [[ "${FORCE:-0}" == "1" ]] || ! exists "$app_tag"; then
    cache="$wheel_root/$deps_hash"
    if [[ ! -f "$cache/requirements.txt" ]]; then
        log "wheelhouse for python $image_python: pip download -> $cache"
        rm -rf "$cache.partial" && mkdir -p "$cache.partial"
        platforms=()
        for tag in manylinux_2_36 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 \
            manylinux_2_24 manylinux_2_17 manylinux2014 manylinux2010 manylinux1 linux; do
            platforms+=(--platform "${tag}_x86_64")
        done
        "$PYTHON" -m pip download -q --disable-pip-version-check --only-binary=:all: \
            --python-version "$image_python" --implementation cp --abi cp311 --abi abi3 \
            --abi none "${platforms[@]}" --platform any -d "$cache.partial" -r "$requirements" \
            >&2 || die "pip download of the dependencies failed"
        cp "$requirements" "$cache.partial/requirements.txt"
        rm -rf "$cache" && mv "$cache.partial" "$cache"
    fi
    context="$workdir/app"
    mkdir -p "$context/project"
    # hard links where one file system holds both; a failed attempt leaves a partial copy
    cp -al "$cache" "$context/wheels" 2>/dev/null || { rm -rf "$context/wheels" && cp -a "$cache" "$context/wheels"; }
    cp "$deploy/app/Dockerfile" "$deploy/app/entrypoint.sh" "$context/"
    (cd "$root" && cp -a "${SOURCES[@]}" "$context/project/")
    find "$context/project" -name __pycache__ -prune -exec rm -rf {} +
    log "building $app_tag"
    build "$app_tag" "$app_base" "$context"
fi
docker tag "$app_tag" dynaeval/app:latest

log "ready in $(( ($(date +%s%N) - started_ns) / 1000000 )) ms"
echo "$app_tag"
echo "$pg_tag"
