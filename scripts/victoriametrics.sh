#!/usr/bin/env bash
# VictoriaMetrics single-node, vmalert and vmalert-tool for the tests that run the shipped rules
# and dashboards on VictoriaMetrics beside Prometheus 2 and 3. No Debian package ships them, so
# they are built from the Go module proxy (its go.mod has no replace directives: `go install`
# takes it) and cached outside the clone like Prometheus 3 (scripts/gobuild.sh), shared by
# every checkout and CI run on this machine. About 2-4 minutes on 2 cores, once. Prints the
# directory holding the binaries.
set -euo pipefail

version=v1.151.0
module=github.com/VictoriaMetrics/VictoriaMetrics
name="VictoriaMetrics $version"
slug=victoriametrics-$version
tools=(victoria-metrics vmalert vmalert-tool)
. "$(dirname "$0")/gobuild.sh"
gobuild_prepare

export GOBIN=$work/bin
# --version and the vm_app_version metric show the version the release process stamps in.
stamp="-X $module/lib/buildinfo.Version=victoria-metrics-$version"
packages=()
for tool in "${tools[@]}"; do packages+=("$module/app/$tool@$version"); done
"$go" install -ldflags "$stamp" "${packages[@]}" >>"$log" 2>&1 || fail "go install failed"
gobuild_install victoria-metrics "-$version"
