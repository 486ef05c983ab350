"""pg_stat_statements (extension, PostgreSQL 13+): how long statements took, in total.

The exporter exports totals per target (no per-statement series), from one row per statement
without its text; the report reads the rows with their texts, to match statements across
versions (queryid is not stable across major versions) and to name the ones that slowed.

Only top-level statements count (PG 14+ `toplevel`): with pg_stat_statements.track = all a
function's inner statements would count their time twice. Read time is the time waited on
shared block reads: `blk_read_time` before 17, `shared_blk_read_time` from 17.

The table's sums are not monotonic: a statement evicted from the extension's table (more
distinct statements than pg_stat_statements.max) takes its counts with it, and
pg_stat_statements_reset() takes them all, which rate() would read as a counter reset (and a
mean statement time over it as a spike). So the exported totals are the exporter's own, and
start at 0: the first poll only records each statement's counts, and each later poll adds what
each statement counted since the poll before (all its counts when it is new, or when its
counts went back: reset), so they never fall. A new exporter process starts at 0 again, which
rate() reads as the reset it is; were the first poll to add the statements' cumulative counts,
every restart would read as weeks of history done in one scrape interval. A new server behind
the target (another system identifier, or a postmaster restart) is a first poll too: its
statements' counts are not the ones recorded. What a statement counted between its last poll
and its eviction is all they miss. The evictions are exported too, from
pg_stat_statements_info.dealloc (14+). The price: the last poll's counts of every statement,
about 200 bytes each (pg_stat_statements.max, default 5000, bounds them).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import psycopg

from pg_aio_exporter.collectors.base import Counter
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG13, PG14, PG17

PREFIX = "pg_aio_statements"  # our own: postgres_exporter has pg_stat_statements_* per query

HIDDEN_TEXT = "<insufficient privilege>"
# The exporter's own statements (prepared at connect, and the session's SET) are left out of
# the report's workload: they are not the user's work.
OWN_STATEMENTS = re.compile(r"^\s*(PREPARE\s+pg_aio_exporter_|SET\s+statement_timeout)", re.I)


@dataclass(frozen=True, slots=True)
class StatementCounters:
    """pg_stat_statements counts of one statement, or summed over many; times in seconds."""

    calls: float
    exec_seconds: float
    rows: float
    blocks_read: float
    blocks_hit: float
    read_seconds: float
    # Sum over calls of each call's execution time squared (seconds^2), from the extension's
    # mean and stddev_exec_time: the per-call variance of any window. None: not read (a saved
    # report of schema 2).
    exec_squares: float | None = None

    def _squares(self, other: StatementCounters, sign: float) -> float | None:
        if self.exec_squares is None or other.exec_squares is None:
            return None
        return self.exec_squares + sign * other.exec_squares

    def __add__(self, other: StatementCounters) -> StatementCounters:
        return StatementCounters(
            self.calls + other.calls,
            self.exec_seconds + other.exec_seconds,
            self.rows + other.rows,
            self.blocks_read + other.blocks_read,
            self.blocks_hit + other.blocks_hit,
            self.read_seconds + other.read_seconds,
            self._squares(other, 1.0),
        )

    def __sub__(self, other: StatementCounters) -> StatementCounters:
        return StatementCounters(
            self.calls - other.calls,
            self.exec_seconds - other.exec_seconds,
            self.rows - other.rows,
            self.blocks_read - other.blocks_read,
            self.blocks_hit - other.blocks_hit,
            self.read_seconds - other.read_seconds,
            self._squares(other, -1.0),
        )

    @property
    def call_variance(self) -> float | None:
        """Variance of one call's execution time (seconds^2) over these calls."""
        if self.exec_squares is None or self.calls <= 0:
            return None
        mean = self.exec_seconds / self.calls
        return max(0.0, self.exec_squares / self.calls - mean * mean)

    @property
    def went_back(self) -> bool:
        return min(self.calls, self.exec_seconds, self.blocks_read, self.blocks_hit) < 0


NO_STATEMENTS = StatementCounters(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

# Constant lists: PostgreSQL 18 squashes `IN ($1, $2, $3)` into `IN ($1 /*, ... */)` (and
# ARRAY[...] the same way) and numbers the later parameters accordingly; 17 lists them all.
# A list's items may carry casts, which 18 squashes with them: 17's `IN ($1::int, $2::int)` is
# 18's `IN ($1 /*, ... */)` (measured on 16.14, 17.10 and 18.6: tests/test_statement_texts.py).
_CAST = (
    r"(?:\s*::\s*[\w.\"]+(?:\s+(?:varying|precision|with(?:out)?\s+time\s+zone))?"
    r"(?:\s*\([\d\s,]*\))?(?:\s*\[\s*\])*)*"
)
_ITEM = rf"\$\d+{_CAST}"
_SQUASHED = re.compile(
    rf"(\bIN\s*\(|\bARRAY\s*\[)\s*{_ITEM}(?:\s*/\*,\s*\.\.\.\s*\*/|(?:\s*,\s*{_ITEM})*)\s*(?=[)\]])",
    re.I,
)
# `x = ANY(ARRAY[...])` is parsed as `x IN (...)` is (one queryid, so pg_stat_statements shows
# whichever text it saw first), and 18 puts lists of every length in one entry where 17 has one
# per length: the same statement may show either form on either version.
_ANY_ARRAY = re.compile(r"=\s*ANY\s*\(\s*ARRAY\s*\[\.\.\.\]\s*\)", re.I)
_PARAMETER = re.compile(r"\$\d+")
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """A statement's text as pg_stat_statements shows it, made the same on 16, 17 and 18:
    constant lists squashed (casts and all, and `= ANY(ARRAY[...])` as the `IN (...)` it is),
    parameters unnumbered, white space collapsed."""
    text = _SQUASHED.sub(lambda m: m.group(1) + "...", text)
    text = _ANY_ARRAY.sub("IN (...)", text)
    text = _PARAMETER.sub("$", text)
    return _SPACE.sub(" ", text).strip().rstrip(";").strip()


def fingerprint(text: str) -> str:
    """What identifies a statement across servers and versions, without its text."""
    return hashlib.sha256(normalize(text).encode()).hexdigest()[:16]


StatementKey = tuple[str, str, str]  # fingerprint, database, user


def _columns(version_num: int) -> str:
    read_time = "shared_blk_read_time" if version_num >= PG17 else "blk_read_time"
    return (
        "calls::float8 AS calls, total_exec_time::float8 AS exec_time, rows::float8 AS rows,"
        " shared_blks_read::float8 AS blocks_read, shared_blks_hit::float8 AS blocks_hit,"
        f" {read_time}::float8 AS read_time,"
        " (calls * (stddev_exec_time ^ 2 + mean_exec_time ^ 2))::float8 AS exec_squares"
    )


@dataclass(frozen=True, slots=True)
class StatementRow:
    """A row of either query of the collector (_columns() and the fields after them). Its
    fields with defaults are those only one of the two selects: the exporter's totals carry
    `dealloc` and the server's identity, the report's rows the text and the names.
    `statements`: how many statements the row stands for (tests/fixtures' recorded totals are
    sums, with their count)."""

    calls: float | None
    exec_time: float | None
    rows: float | None
    blocks_read: float | None
    blocks_hit: float | None
    read_time: float | None
    exec_squares: float | None
    userid: int | None = None
    dbid: int | None = None
    queryid: int | None = None
    dealloc: float | None = None
    system_id: str | None = None
    start_time: float | None = None
    query: str | None = None
    datname: str | None = None
    rolname: str | None = None
    statements: int = 1


def counters(row: StatementRow) -> StatementCounters:
    """A row's counts in base units (pg_stat_statements times are milliseconds)."""
    return StatementCounters(
        calls=row.calls or 0.0,
        exec_seconds=(row.exec_time or 0.0) / 1000.0,
        rows=row.rows or 0.0,
        blocks_read=row.blocks_read or 0.0,
        blocks_hit=row.blocks_hit or 0.0,
        read_seconds=(row.read_time or 0.0) / 1000.0,
        exec_squares=(row.exec_squares or 0.0) / 1e6,
    )


def absent_reason(exc: Exception) -> str | None:
    """Why pg_stat_statements cannot be read, when the cause is that it is not there (not
    installed, not preloaded, or an extension version older than the server's), else None."""
    if isinstance(exc, psycopg.errors.UndefinedFunction | psycopg.errors.UndefinedTable):
        return "extension not installed in this database (CREATE EXTENSION pg_stat_statements)"
    if isinstance(exc, psycopg.errors.ObjectNotInPrerequisiteState):
        return "not in shared_preload_libraries"
    if isinstance(exc, psycopg.errors.UndefinedColumn):
        return "extension older than the server (ALTER EXTENSION pg_stat_statements UPDATE)"
    return None


# Served from the totals of StatementCounters, whose fields are the columns here (counters()
# turns the SQL's into base units).
COUNTERS = (
    Counter("calls", f"{PREFIX}_calls", "Statements executed (top level)."),
    Counter("exec_seconds", f"{PREFIX}_exec_seconds", "Time statements spent executing."),
    Counter("rows", f"{PREFIX}_rows", "Rows statements returned or affected."),
    Counter("blocks_read", f"{PREFIX}_shared_blocks_read", "Shared blocks statements read."),
    Counter("blocks_hit", f"{PREFIX}_shared_blocks_hit", "Shared blocks found in the buffers."),
    Counter(
        "read_seconds",
        f"{PREFIX}_shared_block_read_seconds",
        "Time statements waited on shared block reads; needs track_io_timing.",
    ),
)
# A statement's identity in pg_stat_statements (top-level entries only): user, database, queryid.
_Key = tuple[int | None, int | None, int | None]
# The server's: system identifier and postmaster start (the statements' counts of another
# server, or of another run of this one, do not subtract from the recorded ones).
_Server = tuple[str | None, float | None]


def _key(row: StatementRow) -> _Key:
    return row.userid, row.dbid, row.queryid


class PgStatStatementsCollector:
    """Totals per target for the exporter; `per_statement` (the report's): one row per
    statement with its text, summed to the same totals."""

    name = "pg_stat_statements"
    since = PG13
    labels: tuple[str, ...] = ()
    families = (
        *(c.series for c in COUNTERS),
        f"{PREFIX}_entries",
        f"{PREFIX}_deallocations_total",
    )
    row_type = StatementRow

    def __init__(self, per_statement: bool = False) -> None:
        self.per_statement = per_statement
        self._last: dict[_Key, StatementCounters] = {}  # each statement's counts, last poll
        self._server: _Server | None = None  # whose counts _last holds; None: no poll yet
        self._totals = NO_STATEMENTS  # what is exported: they only grow

    def query(self, version_num: int) -> str | None:
        if version_num < self.since:
            return None
        top = " WHERE toplevel" if version_num >= PG14 else ""
        key = "s.userid::int8 AS userid, s.dbid::int8 AS dbid, s.queryid"
        if not self.per_statement:
            # Evictions since the last reset (pg_stat_statements_info: 14+), on every row.
            dealloc = (
                "(SELECT dealloc FROM pg_stat_statements_info)::float8"
                if version_num >= PG14
                else "NULL::float8"
            )
            # pg_control_system() is executable by every role (PostgreSQL grants it to public).
            server = (
                "(SELECT system_identifier FROM pg_control_system())::text AS system_id,"
                " extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time"
            )
            return (
                f"SELECT {key}, {_columns(version_num)}, {dealloc} AS dealloc, {server}"
                f" FROM pg_stat_statements(false) s{top}"
            )
        where = " AND s.toplevel" if version_num >= PG14 else ""
        return (
            f"SELECT {key}, {_columns(version_num)}, s.query, d.datname, r.rolname"
            " FROM pg_stat_statements(true) s"
            " LEFT JOIN pg_database d ON d.oid = s.dbid LEFT JOIN pg_roles r ON r.oid = s.userid"
            f" WHERE s.calls > 0{where}"
        )

    def absent(self, exc: Exception) -> str | None:
        return absent_reason(exc)

    def snapshot(self, rows: list[StatementRow]) -> Statements | None:
        """The report's per-statement view of this poll (None from the totals' rows)."""
        if not self.per_statement:
            return None
        return Statements(statements(rows), hidden(rows))

    def collect(self, rows: list[StatementRow], out: MetricSet) -> None:
        # An empty table says nothing about the server: what was recorded stays.
        server = (rows[0].system_id, rows[0].start_time) if rows else self._server
        first = server is None or server != self._server
        now: dict[_Key, StatementCounters] = {}
        grown = NO_STATEMENTS
        for row in rows:
            key, counted = _key(row), counters(row)
            now[key] = counted
            if first:
                continue  # recorded, not added: counted before we watched, or elsewhere
            before = self._last.get(key)
            since = counted if before is None else counted - before
            grown += counted if since.went_back else since
        totals = self._totals + grown
        for counter in COUNTERS:
            counter.publish(getattr(totals, counter.column), out)
        out.gauge(
            f"{PREFIX}_entries",
            "Statements pg_stat_statements holds (pg_stat_statements.max bounds it).",
            float(sum(row.statements for row in rows)),
        )
        dealloc = rows[0].dealloc if rows else None
        if dealloc is not None:
            out.counter(
                f"{PREFIX}_deallocations",
                "Times pg_stat_statements evicted statements to make room"
                " (pg_stat_statements_info.dealloc); the totals leave out what they had counted.",
                dealloc,
            )
        # Kept only once all is collected: a collect that raised half-way changes nothing.
        self._last, self._totals, self._server = now, totals, server


@dataclass(frozen=True)
class Statement:
    """One statement of the report's window: where it ran, its text, what it counted."""

    database: str
    user: str
    text: str
    counters: StatementCounters

    @property
    def key(self) -> StatementKey:
        return fingerprint(self.text), self.database, self.user


def statements(rows: list[StatementRow]) -> dict[StatementKey, Statement]:
    """The per-statement rows of one poll, by key; rows whose text this role may not see (no
    pg_read_all_stats) and the exporter's own statements are left out. Statements whose texts
    normalise alike (a list of 3 and of 4 constants on 17) are summed."""
    out: dict[StatementKey, Statement] = {}
    for row in rows:
        text = row.query
        if text is None or text == HIDDEN_TEXT or OWN_STATEMENTS.match(text):
            continue
        stmt = Statement(row.datname or "", row.rolname or "", text, counters(row))
        seen = out.get(stmt.key)
        if seen is not None:
            stmt = Statement(stmt.database, stmt.user, seen.text, seen.counters + stmt.counters)
        out[stmt.key] = stmt
    return out


def hidden(rows: list[StatementRow]) -> int:
    """Statements whose text this role may not see (it needs pg_read_all_stats)."""
    return sum(1 for row in rows if row.query in (None, HIDDEN_TEXT))


@dataclass(frozen=True)
class Statements:
    """The view's snapshot for the report: one poll's statements by key, and how many this
    role could not see."""

    by_key: dict[StatementKey, Statement]
    hidden: int
