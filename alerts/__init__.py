"""The shipped Prometheus rules. `python -m alerts.generate` from the repository's root (`make
rules`) renders alerts/*.yml and docs/alerts.md's tables: params.py loads params.yaml with the
package's thresholds.yaml and checks them, recording.py and alerting.py build the rules over
promql.py's formulas (which the dashboards share), render.py writes the YAML and the tables."""
