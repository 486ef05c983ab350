#!/usr/bin/env bash
# uv, run with the arguments given: what builds the clone's virtualenv (Makefile) in seconds
# instead of pip's minute. It is installed from PyPI once per machine and version into
# ~/.cache/pg_aio_exporter/uv-VERSION (under a lock; a stamp marks it complete); its own cache
# (~/.cache/uv) holds the wheels it links into each virtualenv.
set -euo pipefail
version=0.13.9
python=${PYTHON:-python3}
home=$HOME/.cache/pg_aio_exporter/uv-$version

mkdir -p "$(dirname "$home")"
(
    flock 9
    if [ ! -e "$home/.installed-stamp" ]; then
        rm -rf "$home"
        "$python" -m venv "$home"
        "$home/bin/pip" install --quiet "uv==$version"
        touch "$home/.installed-stamp"
    fi
) 9> "$home.lock"
# The system's Python, never one uv would download.
UV_PYTHON_DOWNLOADS=never exec "$home/bin/uv" "$@"
