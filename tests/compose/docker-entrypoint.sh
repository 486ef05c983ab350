#!/bin/sh
# The official image's start-up, reduced to what deploy/compose.yaml uses: as root, hand the
# volume to postgres; on an empty data directory, initdb with the password file's password,
# run /docker-entrypoint-initdb.d/*.sh against a server listening on its socket only, and stop
# it; then exec the command (postgres ARGS) as postgres.
set -eu
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid postgres --regid postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    # UTF8 as the official image's (LANG=en_US.utf8): without a locale, initdb would pick
    # SQL_ASCII.
    initdb --username=postgres --pwfile="$POSTGRES_PASSWORD_FILE" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    printf "listen_addresses = '*'\nunix_socket_directories = '%s'\n" "$PGHOST" \
        >>"$PGDATA/postgresql.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    for script in /docker-entrypoint-initdb.d/*.sh; do
        if [ -e "$script" ]; then sh "$script"; fi
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "${1:-}" = postgres ]; then
    shift
    exec postgres -D "$PGDATA" "$@"
fi
exec "$@"
