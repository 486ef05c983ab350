#!/bin/sh
# First step of .github/workflows/release.yml: the pushed tag must be "v" + the package version,
# and CHANGELOG.md must hold a dated section for that version. From the repository root:
#   scripts/release-check.sh v0.1.0
set -eu

tag="${1:?usage: scripts/release-check.sh vX.Y.Z}"
init=exporter/pg_aio_exporter/__init__.py
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$init")"
if [ "$tag" != "v$version" ]; then
    echo "release-check: tag $tag does not name the package version $version ($init)" >&2
    exit 1
fi
pattern="^## \[$(printf '%s' "$version" | sed 's/\./\\./g')\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\$"
if ! grep -Eq "$pattern" CHANGELOG.md; then
    echo "release-check: CHANGELOG.md has no section '## [$version] - YYYY-MM-DD'" >&2
    exit 1
fi
echo "release-check: $tag = package version $version, dated in CHANGELOG.md"
