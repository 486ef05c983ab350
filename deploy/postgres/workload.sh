#!/bin/sh
# Demo read load for the compose stack (profile "workload"). The pgbench table (~300 MB at
# scale 20) is several times shared_buffers, so reads reach storage instead of the buffer
# cache: random index lookups (pgbench -S) and sequential scans, the case where PostgreSQL 18
# combines blocks into larger reads.
set -eu
PGPASSWORD="$(cat /run/secrets/postgres_password)"
export PGPASSWORD
SCALE="${WORKLOAD_SCALE:-20}"

until pg_isready --quiet; do sleep 1; done
if ! psql --quiet --no-psqlrc -tAc "SELECT 1 FROM pgbench_accounts LIMIT 1" >/dev/null 2>&1; then
    pgbench --initialize --quiet --scale "$SCALE"
fi
while true; do
    psql --quiet --no-psqlrc -tAc "SELECT count(*) FROM pgbench_accounts" >/dev/null &
    pgbench --select-only --client 4 --jobs 2 --time 60 --no-vacuum --progress 30
    wait
done
