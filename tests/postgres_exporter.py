"""prometheus-community's postgres_exporter (Debian's package) watching the same server as ours:
the neighbour whose pg_up, pg_settings_* and pg_postmaster_start_time_seconds share our names."""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import psycopg

from harness import terminate, wait_for
from pg_aio_exporter.demo.server import LocalServer, free_port

BINARY = shutil.which("prometheus-postgres-exporter") or "/usr/bin/prometheus-postgres-exporter"
ROLE = "postgres_exporter"
# Its statements collector: Debian's 0.11.1 has no --collector.stat_statements (0.13 and later
# do), so the same query and series, per statement {user, datname, queryid}, come from its
# --extend.query-path, with the later collector's names and labels
# (collector/pg_stat_statements.go).
STATEMENTS = """
pg_stat_statements:
  query: >-
    SELECT r.rolname AS user, d.datname, s.queryid::text AS queryid,
    s.calls AS calls_total, s.total_exec_time / 1000.0 AS seconds_total, s.rows AS rows_total,
    s.shared_blk_read_time / 1000.0 AS block_read_seconds_total,
    s.shared_blk_write_time / 1000.0 AS block_write_seconds_total
    FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
    JOIN pg_database d ON d.oid = s.dbid
  master: true
  metrics:
    - user: {usage: LABEL, description: Name of user}
    - datname: {usage: LABEL, description: Name of database}
    - queryid: {usage: LABEL, description: Query ID}
    - calls_total: {usage: COUNTER, description: Number of times executed}
    - seconds_total: {usage: COUNTER, description: Total time spent in the statement, in seconds}
    - rows_total: {usage: COUNTER, description: Total number of rows retrieved or affected}
    - block_read_seconds_total: {usage: COUNTER, description: Total time reading blocks}
    - block_write_seconds_total: {usage: COUNTER, description: Total time writing blocks}
"""


class PostgresExporter:
    """Connects as its own role, for which track_io_timing is off: its pg_settings_track_io_timing
    is then 0 while the server's (and ours) is 1, so a rule that reads its series shows."""

    def __init__(
        self,
        server: LocalServer,
        web_config: str | None = None,
        tls: ssl.SSLContext | None = None,
        statements: bool = False,
    ) -> None:
        """`web_config`: its --web.config.file; `tls` the client context when that turns TLS on;
        `statements`: its per-statement series on (pg_stat_statements on 17+ in the server)."""
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone():
                conn.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE pg_monitor")
                conn.execute(f"ALTER ROLE {ROLE} SET track_io_timing = off")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://{self.address}"
        self.log_path = Path(tempfile.mkstemp(prefix="postgres-exporter-", suffix=".log")[1])
        self._log = self.log_path.open("w")
        self.queries_path = Path(tempfile.mkstemp(prefix="postgres-exporter-", suffix=".yaml")[1])
        self.queries_path.write_text(STATEMENTS if statements else "")
        dsn = f"postgresql://{ROLE}@127.0.0.1:{server.port}/postgres?sslmode=disable"
        self.proc = subprocess.Popen(
            [
                BINARY,
                f"--web.listen-address={self.address}",
                *([f"--web.config.file={web_config}"] if web_config else []),
                *([f"--extend.query-path={self.queries_path}"] if statements else []),
            ],
            env={"DATA_SOURCE_NAME": dsn, "PATH": "/usr/bin:/bin"},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._up, 30, "postgres_exporter to reach the server", every=0.5)

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(self.log_path.read_text()[-3000:])
        try:
            return b"\npg_up 1" in self.get("/metrics")[0]
        except OSError:
            return False

    def get(self, path: str) -> tuple[bytes, http.client.HTTPMessage]:
        """The body and the headers of a 200 answer."""
        with urllib.request.urlopen(self.url + path, timeout=5, context=self.tls) as resp:  # noqa: S310
            return resp.read(), resp.headers

    def stop(self) -> None:
        terminate(self.proc)
        self._log.close()
        self.log_path.unlink(missing_ok=True)
        self.queries_path.unlink(missing_ok=True)
