#!/usr/bin/env bash
# Prometheus 3.5 and its promtool for the tests that run on both 2.x (Debian's) and 3.x.
# No Debian package ships 3.x, so both are built from the Go module proxy (module version
# v0.305.0 is Prometheus 3.5.0; `go install` refuses it: its go.mod has replace directives)
# and cached outside the clone, where every checkout and CI run on this machine shares them.
# Building takes 3-5 minutes on 2 cores, once. Prints the directory holding the binaries.
set -euo pipefail

version=3.5.0
module=github.com/prometheus/prometheus@v0.305.0
# Debian 12's Go (1.19) is older than the module allows and cannot fetch a newer one itself.
newer_go=1.24.6
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

# Downloads a module@version through the proxy and prints its directory in the module cache.
download() {
    "$go" mod download -json "$1" >"$work/download.json" 2>>"$log" || {
        cat "$work/download.json" >>"$log" # its JSON answer says why
        fail "go mod download $1 failed"
    }
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' "$work/download.json"
}

built && { echo "$dest"; exit 0; }
# Go where scripts/system-deps.sh or the upstream tarball puts it when it is not on PATH.
go=$(command -v go || ls /usr/local/go/bin/go /usr/lib/go/bin/go 2>/dev/null | head -1 || true)
[ -n "$go" ] || fail "no Go toolchain (scripts/system-deps.sh installs golang-go)"
mkdir -p "$cache"
# Checkouts building at the same moment wait for the first one instead of building twice.
exec 9>"$cache/prometheus-$version.lock"
flock 9
built && { echo "$dest"; exit 0; }

work=$(mktemp -d "$cache/prometheus-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
: >"$log"
# Go 1.21 and later fetch the toolchain the module asks for themselves; an older Go fetches
# Go $newer_go, itself a module of the proxy, into the cache.
export GOTOOLCHAIN=auto GOFLAGS=-buildvcs=false
if ! "$go" version | grep -qE ' go1\.(2[1-9]|[3-9][0-9])'; then
    if [ ! -x "$cache/go-$newer_go/bin/go" ]; then
        toolchain=$(download "golang.org/toolchain@v0.0.1-go$newer_go.linux-$("$go" env GOARCH)")
        cp -r "$toolchain" "$work/go"
        chmod -R u+w "$work/go"
        # Module archives keep no execute bits.
        chmod u+x "$work/go/bin/"* "$work/go/pkg/tool/"*/*
        rm -rf "$cache/go-$newer_go"
        mv "$work/go" "$cache/go-$newer_go"
    fi
    go=$cache/go-$newer_go/bin/go
fi
src=$(download "$module")
[ -n "$src" ] || fail "go mod download $module gave no directory"
# The module cache is read-only and the build writes into the tree: build a writable copy.
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
# The release process stamps the version in; --version and the build_info metric show it.
stamp="-X github.com/prometheus/common/version.Version=$version"
(cd "$work/src" && "$go" build -ldflags "$stamp" -o "$work/bin/" ./cmd/prometheus ./cmd/promtool) \
    >>"$log" 2>&1 || fail "go build failed"
"$work/bin/prometheus" --version 2>&1 | grep -q "version $version" ||
    fail "the built prometheus does not report version $version"
rm -rf "$dest"
mv "$work/bin" "$dest"
echo "$dest"
