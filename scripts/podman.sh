#!/usr/bin/env bash
# podman with the engine settings this project's image build and tests need, in storage of its
# own under ~/.cache/pg_aio_exporter/containers (the machine's other containers are left
# alone). `scripts/podman.sh compose ARGS` runs Debian's podman-compose with the same settings.
# Why each setting (Debian 12's podman 4.3 on a kernel with hybrid cgroups, run as root without
# CAP_SYS_RESOURCE):
#   runtime runc     - crun, podman's default, refuses hybrid cgroups; runc works;
#   cgroupfs         - no systemd to manage the containers' cgroups;
#   ulimits 1024     - podman's default rlimits are above what can be raised here;
#   events to a file - no journald.
set -euo pipefail

cache=${PG_AIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pg_aio_exporter}
root=$cache/containers
# Runtime state belongs on tmpfs: after a reboot podman must find it gone, not stale. One
# directory per storage (PG_AIO_CACHE may point elsewhere).
run=/run/pg_aio_exporter-containers-$(printf %s "$root" | md5sum | cut -c1-8)
mkdir -p "$root" "$run"
# Written at every call (a few bytes), so that an edit here reaches every existing cache; each
# call writes its own copy and renames it into place, so concurrent calls never read half.
cat >"$root/containers.conf.$$" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$run/libpod"

[network]
network_config_dir = "$root/networks"
CONF
cat >"$root/storage.conf.$$" <<CONF
[storage]
driver = "overlay"
graphroot = "$root/storage"
runroot = "$run/storage"
CONF
mv "$root/containers.conf.$$" "$root/containers.conf"
mv "$root/storage.conf.$$" "$root/storage.conf"
export CONTAINERS_CONF=$root/containers.conf CONTAINERS_STORAGE_CONF=$root/storage.conf

if [ "${1:-}" = compose ]; then
    shift
    exec podman-compose "$@"
fi
exec podman "$@"
