#!/usr/bin/env bash
# Prometheus 3.5 and its promtool for the tests that run on both 2.x (Debian's) and 3.x.
# No Debian package ships 3.x, so both are built from the Go module proxy (module version
# v0.305.0 is Prometheus 3.5.0; `go install` refuses it: its go.mod has replace directives)
# and cached outside the clone, where every checkout and CI run on this machine shares them
# (scripts/gobuild.sh). Building takes 3-5 minutes on 2 cores, once. Prints the directory
# holding the binaries.
set -euo pipefail

version=3.5.0
module=github.com/prometheus/prometheus@v0.305.0
name="Prometheus $version"
slug=prometheus-$version
tools=(prometheus promtool)
. "$(dirname "$0")/gobuild.sh"
gobuild_prepare

src=$(download "$module")
[ -n "$src" ] || fail "go mod download $module gave no directory"
# The module cache is read-only and the build writes into the tree: build a writable copy.
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
# The release process stamps the version in; --version and the build_info metric show it.
stamp="-X github.com/prometheus/common/version.Version=$version"
(cd "$work/src" && "$go" build -ldflags "$stamp" -o "$work/bin/" ./cmd/prometheus ./cmd/promtool) \
    >>"$log" 2>&1 || fail "go build failed"
gobuild_install prometheus "version $version"
