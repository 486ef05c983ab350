"""The shipped Prometheus rules: promql.py (the formulas the dashboards share), generate.py
(`python -m alerts.generate` from the repository's root renders alerts/*.yml and docs/alerts.md's
tables from params.yaml and the package's thresholds.yaml)."""
