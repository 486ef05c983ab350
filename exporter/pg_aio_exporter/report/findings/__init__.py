"""Findings: what the window's numbers support, each as pure function of the summary, the
thresholds and (optionally) a baseline window. A finding is emitted only when its data is there
and says so; missing data (no timing, no samples, too few reads) emits nothing or says that.

The conditions shared with the alert rules are the rules' own, read over the report's window
instead of a Prometheus range; where an alert compares with the target's own past (its median),
the report compares with the --baseline file. Every finding's severity is thresholds.yaml's: its
alert's, or the report-only finding's own.

context.py (what the checks read: Context, Finding), reads.py (the read checks), pool.py (io
worker pool sizing), workload_regression.py, combining.py (read combining), writes.py (the write
checks), registry.py (the one list of checks, run and sorted once).
"""
