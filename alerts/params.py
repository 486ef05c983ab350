"""The rules' parameters: alerts/params.yaml with the thresholds they share with `pg-aio-exporter
report` (exporter/pg_aio_exporter/thresholds.yaml, through the package's loader
pg_aio_exporter.thresholds), merged with the user's overrides and validated: unknown keys,
durations, windows too short for the scrape interval, and the alerts that alerting.py builds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from alerts.alerting import ALERTS
from pg_aio_exporter import thresholds
from pg_aio_exporter.vocabulary import DURATION_UNITS

HERE = Path(__file__).resolve().parent
DEFAULT_PARAMS = HERE / "params.yaml"
# The thresholds the rules share with `pg-aio-exporter report`, shipped in the package: this
# repository's copy, which need not be the installed package's.
THRESHOLDS = HERE.parent / "exporter" / "pg_aio_exporter" / thresholds.PATH.name
REPORT_ONLY = "report"  # the section of THRESHOLDS that no rule reads
# The alerts judged by how much of the recent past was slow, not by the operations' count.
TIME_WEIGHTED = ("PgAioReadLatencyHigh", "PgAioWalSyncLatencyHigh")

DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")

Params = dict[str, Any]


class ParamsError(ValueError):
    pass


def merge(base: Any, override: Any, where: str = "") -> Any:
    """`override` over `base`, key by key; unknown keys are errors (a typo must not be ignored)."""
    if not isinstance(base, dict):
        return override
    if not isinstance(override, dict):
        raise ParamsError(f"{where or 'params'}: expected a mapping, got {override!r}")
    out = dict(base)
    for key, value in override.items():
        if key not in base:
            raise ParamsError(f"unknown parameter {where}{key}")
        out[key] = merge(base[key], value, f"{where}{key}.")
    return out


def union(base: Any, extra: Any, where: str = "") -> Any:
    """Two parameter trees that set different keys, as one; a key set in both is an error (one
    source per value)."""
    if not (isinstance(base, dict) and isinstance(extra, dict)):
        raise ParamsError(
            f"{where.rstrip('.')} is set in both {DEFAULT_PARAMS.name} and {THRESHOLDS.name}"
        )
    out = dict(base)
    for key, value in extra.items():
        out[key] = union(base[key], value, f"{where}{key}.") if key in base else value
    return out


def load_params(overrides: Sequence[Path] = ()) -> Params:
    shipped = thresholds.document(THRESHOLDS)
    report_only = shipped.pop(REPORT_ONLY)
    params: Params = union(yaml.safe_load(DEFAULT_PARAMS.read_text()), shipped)
    for path in overrides:
        params = merge(params, yaml.safe_load(path.read_text()) or {})
    params = validate(derive_windows(params))
    # The rules render the numbers as written (3, not 3.0); the typed form checks them.
    try:
        thresholds.Thresholds.from_params({**params, REPORT_ONLY: report_only})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ParamsError(f"thresholds: {type(exc).__name__}: {exc}") from None
    return params


def seconds(duration: str) -> float:
    if not DURATION.match(str(duration)):
        raise ParamsError(f"not a Prometheus duration: {duration!r}")
    return sum(int(n) * DURATION_UNITS[unit] for n, unit in DURATION_PART.findall(duration))


def duration(secs: float) -> str:
    for unit in ("d", "h", "m", "s"):
        if secs % DURATION_UNITS[unit] == 0:
            return f"{int(secs // DURATION_UNITS[unit])}{unit}"
    return f"{round(secs * 1000)}ms"


def derive_windows(params: Params) -> Params:
    """Fills in the windows left empty: the 5 minutes the alerts use (field reports read
    latency over 5 minutes), the only one the rate rules are recorded at, and the shortest a
    range can have at scrape_interval (4 scrapes), that of the last scrape interval's figures."""
    shortest = duration(4 * seconds(params["scrape_interval"]))
    alert_window = params["alert_window"] or duration(max(seconds(shortest), 300))
    return {
        **params,
        "rate_windows": params["rate_windows"] or [alert_window],
        "alert_window": alert_window,
        "interval_window": params["interval_window"] or shortest,
    }


def ranges(params: Params) -> dict[str, str]:
    """Every range the rules select over, by where it is set."""
    out = {f"rate_windows[{i}]": w for i, w in enumerate(params["rate_windows"])}
    out["interval_window"] = params["interval_window"]
    for name, alert in params["alerts"].items():
        out |= {f"{name}.{k}": alert[k] for k in ("window", "baseline_window") if k in alert}
    return out


def validate(params: Params) -> Params:
    durations = [params["scrape_interval"], params["alert_window"], *ranges(params).values()]
    for name, alert in params["alerts"].items():
        durations += [alert["for"]] if "for" in alert else []
        if alert["severity"] not in ("info", "warning", "critical"):
            raise ParamsError(f"{name}: severity must be info, warning or critical")
    for value in durations:
        seconds(value)
    if params["alert_window"] not in params["rate_windows"]:
        raise ParamsError("alert_window must be one of rate_windows")
    scrapes = 4 * seconds(params["scrape_interval"])
    for where, window in ranges(params).items():
        if seconds(window) < scrapes:
            raise ParamsError(
                f"{where} {window} holds fewer than 4 scrapes of scrape_interval "
                f"{params['scrape_interval']}"
            )
    for name in TIME_WEIGHTED:
        p = params["alerts"][name]
        if seconds(p["recent_window"]) < 2 * seconds(params["scrape_interval"]):
            raise ParamsError(
                f"{name}.recent_window {p['recent_window']} holds fewer than 2 scrapes of "
                f"scrape_interval {params['scrape_interval']}"
            )
        if not 0 < p["min_share"] <= 1:
            raise ParamsError(f"{name}.min_share must be above 0 and at most 1")
    if set(params["alerts"]) != set(ALERTS):
        raise ParamsError(f"alerts must be exactly {sorted(ALERTS)}")
    return params
