"""A judged window: the summary with its findings, verdict and comparison, and the exit code
it implies."""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.report.compare import RowComparison, compare
from pg_aio_exporter.report.findings.context import Context, Finding
from pg_aio_exporter.report.findings.registry import findings
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.verdict import Verdict, verdict
from pg_aio_exporter.report.workload import WorkloadComparison
from pg_aio_exporter.thresholds import SEVERITIES, Thresholds

FAIL_ON = ("warning", "critical")


@dataclass(frozen=True)
class Report:
    summary: Summary
    findings: list[Finding]
    verdict: Verdict
    baseline: Summary | None = None
    comparison: list[RowComparison] | None = None
    workload: WorkloadComparison | None = None  # workload time against the baseline


def judge(summary: Summary, thresholds: Thresholds, baseline: Summary | None = None) -> Report:
    ctx = Context(summary, thresholds, baseline)
    found = findings(ctx)
    return Report(
        summary,
        found,
        verdict(ctx, found),
        baseline,
        None
        if baseline is None
        else compare(baseline, summary, thresholds.min_read_ops_per_second),
        ctx.workload(),
    )


def exit_code(report: Report, fail_on: str | None) -> int:
    """0 when a report was made; 1 when --fail-on names a severity a finding reaches."""
    if fail_on is None:
        return 0
    floor = SEVERITIES.index(fail_on)
    return 1 if any(SEVERITIES.index(f.severity) >= floor for f in report.findings) else 0
