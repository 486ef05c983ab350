"""The shipped Grafana dashboards: generate.py (`python -m dashboards.generate` from the
repository's root writes dashboards/*.json), one module per dashboard row in rows/, over
figures.py (the panels' PromQL: alerts/promql.py's formulas), panels.py (grid, graph, stat) and
frame.py (variables, annotations); dashboard_queries.py (every query a dashboard makes, for the
tests and the pictures)."""
