#!/usr/bin/env bash
# The virtualenv where `make unit-lowest` runs the unit tests with every direct dependency at
# the lowest version pyproject.toml allows (scripts/lowest_constraints.py): a lower bound the
# code outgrew fails there instead of in a user's install.
#
# The dependencies take minutes to install, so they are installed once per version of the
# constraints for every clone of the machine, in ~/.cache/pg_aio_exporter/lowest-venv-KEY
# (under a lock; a stamp marks it complete). The clone's own virtualenv ($1) reaches them
# through a .pth file and their programs (shellcheck, hadolint, ...) through links, and holds
# the package, installed editable: PIP_CONSTRAINT reaches pip's isolated build, so the lowest
# build backend builds it.
set -euo pipefail
dest=$1
python=${PYTHON:-python3}
cache=$HOME/.cache/pg_aio_exporter
# Keyed by what is installed, not by all of pyproject.toml: a marker's text or a tool's setting
# there would otherwise cost CI the minutes of a new install.
key=$( ("$python" scripts/lowest_constraints.py; "$python" scripts/lowest_constraints.py --requirements) \
    | sha256sum | cut -c1-12)
deps=$cache/lowest-venv-$key
site_packages='import sysconfig; print(sysconfig.get_paths()["purelib"])'

mkdir -p "$cache"
(
    flock 9
    if [ ! -e "$deps/.installed-stamp" ]; then
        rm -rf "$deps"
        "$python" -m venv "$deps"
        "$deps/bin/pip" install --quiet --upgrade pip
        "$python" scripts/lowest_constraints.py > "$deps/constraints.txt"
        "$python" scripts/lowest_constraints.py --requirements > "$deps/requirements.txt"
        "$deps/bin/pip" install --quiet -c "$deps/constraints.txt" -r "$deps/requirements.txt"
        touch "$deps/.installed-stamp"
    fi
) 9> "$deps.lock"

rm -rf "$dest"
"$python" -m venv --without-pip "$dest"
site=$("$dest/bin/python" -c "$site_packages")
echo "import site; site.addsitedir('$("$deps/bin/python" -c "$site_packages")')" > "$site/lowest-deps.pth"
for tool in "$deps"/bin/*; do
    [ -e "$dest/bin/$(basename "$tool")" ] || ln -s "$tool" "$dest/bin/"
done
# The package itself, editable, built by the lowest build backend.
PIP_CONSTRAINT=$deps/constraints.txt "$deps/bin/python" -m pip --python "$dest/bin/python" \
    install --quiet --no-deps -e .
touch "$dest/.installed-stamp"
