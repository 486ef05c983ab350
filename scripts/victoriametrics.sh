#!/usr/bin/env bash
# VictoriaMetrics single-node, vmalert and vmalert-tool for the tests that run the shipped rules
# and dashboards on VictoriaMetrics beside Prometheus 2 and 3. No Debian package ships them, so
# they are built from the Go module proxy (its go.mod has no replace directives: `go install`
# takes it) and cached outside the clone like Prometheus 3 (scripts/prometheus3.sh), shared by
# every checkout and CI run on this machine. About 2-4 minutes on 2 cores, once. Prints the
# directory holding the binaries.
set -euo pipefail

version=v1.151.0
module=github.com/VictoriaMetrics/VictoriaMetrics
tools=(victoria-metrics vmalert vmalert-tool)
cache=${PG_AIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pg_aio_exporter}
dest=$cache/victoriametrics-$version
log=$cache/victoriametrics-$version.log

fail() {
    local where=""
    [ -s "$log" ] && where=" (log: $log)"
    echo "cannot build VictoriaMetrics $version for the tests: $*$where" >&2
    exit 1
}

built() {
    local tool
    for tool in "${tools[@]}"; do [ -x "$dest/$tool" ] || return 1; done
}

built && { echo "$dest"; exit 0; }
go=$(command -v go || ls /usr/local/go/bin/go /usr/lib/go/bin/go 2>/dev/null | head -1 || true)
[ -n "$go" ] || fail "no Go toolchain (scripts/system-deps.sh installs golang-go)"
mkdir -p "$cache"
# Checkouts building at the same moment wait for the first one instead of building twice.
exec 9>"$cache/victoriametrics-$version.lock"
flock 9
built && { echo "$dest"; exit 0; }

# Debian 12's Go (1.19) cannot fetch the newer Go the module asks for; scripts/prometheus3.sh,
# which `make test` runs first, leaves one in the cache that can.
if ! "$go" version | grep -qE ' go1\.(2[1-9]|[3-9][0-9])'; then
    go=$(ls "$cache"/go-*/bin/go 2>/dev/null | tail -1)
    [ -n "$go" ] || fail "Go 1.21 or later needed: run scripts/prometheus3.sh first"
fi
work=$(mktemp -d "$cache/victoriametrics-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
: >"$log"
# Go 1.21 and later fetch the newer Go the module asks for from the proxy themselves.
export GOTOOLCHAIN=auto GOFLAGS=-buildvcs=false GOBIN=$work/bin
# --version and the vm_app_version metric show the version the release process stamps in.
stamp="-X $module/lib/buildinfo.Version=victoria-metrics-$version"
packages=()
for tool in "${tools[@]}"; do packages+=("$module/app/$tool@$version"); done
"$go" install -ldflags "$stamp" "${packages[@]}" >>"$log" 2>&1 || fail "go install failed"
"$work/bin/victoria-metrics" --version 2>&1 | grep -q -- "-$version" ||
    fail "the built victoria-metrics does not report version $version"
rm -rf "$dest"
mv "$work/bin" "$dest"
echo "$dest"
