#!/usr/bin/env bash
# `make image`: deploy/Dockerfile built with podman (scripts/podman.sh) into
# localhost/pg-aio-exporter:dev; prints the image's name.
#
# The base is PYTHON_IMAGE when given; otherwise python:3.13-slim-bookworm (the release base)
# when it is in podman's storage or can be pulled; otherwise, on a machine that reaches no image
# registry, a base made here from Debian's archive with mmdebstrap (Debian 12's Python 3.11),
# kept as a tarball and an imported image under ~/.cache/pg_aio_exporter/containers, made once
# (about 3 minutes) for every clone. The build reaches PyPI through the host's network, with
# the host's CA bundle mounted read-only into its RUN steps: on a network whose TLS goes
# through a local certificate authority, only the host's bundle trusts it.
set -euo pipefail
cd "$(dirname "$0")/.."

podman=scripts/podman.sh
cache=${PG_AIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pg_aio_exporter}/containers
tag=${IMAGE:-localhost/pg-aio-exporter:dev}
release_base=docker.io/library/python:3.13-slim-bookworm
# Bump the suffix when the package list changes: a new tarball and image are made.
debian_base=localhost/pg-aio-exporter-base:bookworm-1
debian_packages=python3,python3-venv,python-is-python3,ca-certificates

# Debian's base: the tarball first (mmdebstrap, from the archive apt uses), then the image.
debian_base() {
    "$podman" image exists "$debian_base" && return
    mkdir -p "$cache"
    exec 8>"$cache/base.lock"
    flock 8
    "$podman" image exists "$debian_base" && return
    local tar=$cache/${debian_base##*:}.tar
    if [ ! -s "$tar" ]; then
        echo "making the base image from Debian's archive (mmdebstrap, ~3 minutes, once)" >&2
        # Documentation, manual pages and translations are no use in a container.
        mmdebstrap --quiet --format=tar --variant=minbase --include="$debian_packages" \
            --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            bookworm "$tar.new" >&2
        mv "$tar.new" "$tar"
    fi
    "$podman" import --quiet --change 'CMD ["python3"]' "$tar" "$debian_base" >/dev/null
}

base=${PYTHON_IMAGE:-}
if [ -z "$base" ]; then
    if "$podman" image exists "$release_base" || "$podman" pull --quiet "$release_base" >/dev/null 2>&1; then
        base=$release_base
    else
        debian_base
        base=$debian_base
    fi
fi

# The host's bundle (Debian's path, else Fedora's) over the base's own: Debian's pip and
# python:3.13's (truststore) both read it, and a mount over a file the base already has
# leaves no empty mount point behind in the image's layers.
mounts=()
for bundle in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
    if [ -s "$bundle" ]; then
        mounts=(-v "$bundle:/etc/ssl/certs/ca-certificates.crt:ro")
        break
    fi
done
# --format docker: OCI image configs have no HEALTHCHECK, podman would drop it. The version
# label stays the Dockerfile's `dev` (the release sets VERSION): a label from git would rebuild
# the final stage at every commit and leave an unused image behind each time.
"$podman" build --quiet --format docker --network host "${mounts[@]}" \
    --label org.opencontainers.image.base.name="$base" \
    --build-arg PYTHON_IMAGE="$base" \
    --ignorefile deploy/Dockerfile.dockerignore -f deploy/Dockerfile -t "$tag" . >/dev/null
echo "$tag"
