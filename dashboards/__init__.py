"""The shipped Grafana dashboards: generate.py (`python -m dashboards.generate` from the
repository's root writes dashboards/*.json over alerts/promql.py's formulas), dashboard_queries.py
(every query a dashboard makes, for the tests and the pictures)."""
