#!/usr/bin/env bash
# Prometheus 3.5 and its promtool for the tests that run on both 2.x (Debian's) and 3.x.
# No Debian package ships 3.x, so both are built from the Go module proxy (module version
# v0.305.0 is Prometheus 3.5.0; `go install` refuses it: its go.mod has replace directives)
# and cached outside the clone, where every checkout and CI run on this machine shares them.
# Building takes 3-5 minutes on 2 cores, once. Prints the directory holding the binaries.
set -euo pipefail

version=3.5.0
module=github.com/prometheus/prometheus@v0.305.0
cache=${PG_AIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pg_aio_exporter}
dest=$cache/prometheus-$version
log=$cache/prometheus-$version.log

fail() {
    local where=""
    [ -s "$log" ] && where=" (log: $log)"
    echo "cannot build Prometheus $version for the tests: $*$where" >&2
    exit 1
}

built() { [ -x "$dest/prometheus" ] && [ -x "$dest/promtool" ]; }

built && { echo "$dest"; exit 0; }
command -v go >/dev/null || fail "no Go toolchain on PATH (Go 1.21 or later, https://go.dev/dl)"
mkdir -p "$cache"
# Checkouts building at the same moment wait for the first one instead of building twice.
exec 9>"$cache/prometheus-$version.lock"
flock 9
built && { echo "$dest"; exit 0; }

work=$(mktemp -d "$cache/prometheus-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
: >"$log"
# An older local Go fetches the toolchain the module asks for (through the module proxy).
export GOTOOLCHAIN=auto GOFLAGS=-buildvcs=false
# Its JSON answer names the module's directory, or says why there is none.
go mod download -json "$module" >"$work/module.json" 2>>"$log" || {
    cat "$work/module.json" >>"$log"
    fail "go mod download $module failed"
}
src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' "$work/module.json")
[ -n "$src" ] || fail "go mod download $module gave no directory"
# The module cache is read-only and the build writes into the tree: build a writable copy.
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
# The release process stamps the version in; --version and the build_info metric show it.
stamp="-X github.com/prometheus/common/version.Version=$version"
(cd "$work/src" && go build -ldflags "$stamp" -o "$work/bin/" ./cmd/prometheus ./cmd/promtool) \
    >>"$log" 2>&1 || fail "go build failed"
"$work/bin/prometheus" --version 2>&1 | grep -q "version $version" ||
    fail "the built prometheus does not report version $version"
rm -rf "$dest"
mv "$work/bin" "$dest"
echo "$dest"
