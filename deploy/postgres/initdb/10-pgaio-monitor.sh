#!/bin/sh
# The least-privilege monitoring role of docs/deploy.md; not named pg_...: PostgreSQL reserves
# those role names. The postgres image runs this once, on an empty data directory, as the
# superuser; it is idempotent, so it also serves to rotate the password. The password comes
# from a file (a compose secret) so that it never appears in any container's environment or in
# `docker inspect`.
set -eu
password_file="${PGAIO_MONITOR_PASSWORD_FILE:-/run/secrets/pgaio_monitor_password}"
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" \
    --dbname "${POSTGRES_DB:-postgres}" -v password="$(cat "$password_file")" <<'SQL'
SELECT 'CREATE ROLE pgaio_monitor'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgaio_monitor')\gexec
ALTER ROLE pgaio_monitor WITH LOGIN PASSWORD :'password';
GRANT pg_monitor TO pgaio_monitor;
SQL
