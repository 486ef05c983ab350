"""Stage 6, `pg-aio-exporter report`: one window of the exporter's own collectors and math,
summarised, judged against the alert rules' thresholds, and written for a terminal or as JSON."""
