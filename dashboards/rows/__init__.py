"""The dashboards' rows, one module each: `panels(g)` returns the row's header and its panels,
placed on the dashboard's grid in order. dashboards/generate.py lists the rows of each
dashboard. Every query is a formula of alerts/promql.py (through dashboards/figures.py) or a
plain series of the metric contract (docs/metrics.md)."""
