"""The PromQL of the panels: which series a panel reads (the rules' selector and the server
variables) and the rules' formulas (alerts/promql.py) over Grafana's rate interval, now, $offset
ago or over the dashboard's whole range. Panels compute the recording rules' formulas instead of
reading the rules' fixed windows: they hold at any scrape interval (set it as the data source's
scrape interval) and need no rules loaded. Every query carries the rules' selector
(alerts/params.yaml), so another exporter's series of the same names never show. A panel that
needs a formula in another shape (a scope, a row set, a grouping) passes it to the formula's
function: no formula is rewritten as a string.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from alerts import promql
from alerts.params import THRESHOLDS, load_params

from pg_aio_exporter import thresholds
from pg_aio_exporter.vocabulary import SUBMISSION_QUEUE

# Every series of ours: the shipped rules' selector (target!="" keeps other exporters out).
OURS = load_params()["selector"]
# Which servers the panels show: Prometheus' scrape labels, the extra labels a target may carry
# (`labels:` / `--label`, or a Prometheus external label; add yours here), then the target. Each
# is a multi-value variable whose "All" is a pattern (frame.py _label_values).
SCRAPE_LABELS = ("job", "instance")
EXTRA_LABELS = ("cluster",)
SERVER_LABELS = (*SCRAPE_LABELS, *EXTRA_LABELS, "target")


def servers(labels: Sequence[str]) -> str:
    """Our series of the servers chosen with the variables of `labels`."""
    return promql.matchers(OURS, *(f'{label}=~"${label}"' for label in labels))


T = servers(SERVER_LABELS)
# The exporter's own series carry the target but not its extra labels.
T_SELF = servers([label for label in SERVER_LABELS if label not in EXTRA_LABELS])
# Matchers on pg_stat_io's row labels.
ROW_LABELS = ('backend_type=~"$backend_type"', 'object=~"$object"', 'context=~"$context"')
ROW_LEGEND = "{{target}} {{backend_type}} / {{object}} / {{context}}"
# Matchers for the sampler's wait event series, which have backend_type but no object/context.
BACKEND = 'backend_type=~"$backend_type"'
IO_WAITS = (BACKEND, 'wait_event_type="IO"')
# LWLocks that are waits for I/O: the io worker queue, and another backend's io_uring ring.
QUEUE_WAITS = (BACKEND, f'wait_event=~"{SUBMISSION_QUEUE}|AioUringCompletion"')
# Shown by the io worker panels when a target runs none (io_method sync or io_uring): their
# metrics are absent then, never 0.
NO_IO_WORKERS = "no io workers (io_method sync or io_uring)"
# The formulas over Grafana's rate interval (at least 4 scrapes), now and $offset ago; the
# exporter's own series over the same.
NOW = promql.Scope(T, "$__rate_interval")
EARLIER = promql.Scope(T, "$__rate_interval", offset="$offset")
SELF = promql.Scope(T_SELF, "$__rate_interval")
OVER = "over the rate interval"
BEFORE = "${offset} ago"


def whole_range(offset: str = "") -> promql.Scope:
    """The dashboard's whole time range as one window, ending now or `offset` ago."""
    return promql.Scope(T, "$__range", offset=offset)


def series(name: str) -> str:
    """A metric of the servers chosen with the variables."""
    return NOW.series(name)


def scaled(expr: str, scale: int) -> str:
    return f"(\n{expr}\n) * {scale}" if scale != 1 else expr


def io_figure(
    name: str, scope: promql.Scope = NOW, *, per_target: bool = False, scale: int = 1
) -> str:
    """A pg_stat_io read figure (alerts/promql.py io_formulas) per row chosen with the
    variables or, `per_target`, summed over all of a target's rows."""
    row = () if per_target else ROW_LABELS
    return scaled(promql.io_formulas(scope, *row, per_target=per_target)[name].expr, scale)


def write_figure(name: str, *, scale: int = 1) -> str:
    """A pg_stat_io write figure (alerts/promql.py write_formulas) per row chosen with the
    variables."""
    return scaled(promql.write_formulas(NOW, *ROW_LABELS)[name].expr, scale)


def now_and_before(formula: Callable[[promql.Scope], str]) -> tuple[str, str]:
    """A formula over the rate interval now and $offset ago."""
    return formula(NOW), formula(EARLIER)


def relative_change(formula: Callable[[promql.Scope], str]) -> str:
    """A formula over the dashboard's whole range divided by the same over the range $offset
    earlier, minus 1: one number per target."""
    now, earlier = (formula(whole_range(offset)) for offset in ("", "$offset"))
    return f"(\n{now}\n)\n/\n(\n{earlier}\n)\n- 1"


# The shipped thresholds, judging storage by the default storage class.
SHIPPED = thresholds.load(path=THRESHOLDS)
assert SHIPPED.writes is not None  # the shipped document has the write alerts
WRITE_WAIT_EVENTS = "|".join(SHIPPED.writes.io_write_events)
WRITE_LOCK_EVENTS = "|".join(SHIPPED.writes.write_lock_events)
DEFAULT_CLASS = SHIPPED.storage.name
MAX_WAL_SYNC = SHIPPED.storage.seconds_per_sync
