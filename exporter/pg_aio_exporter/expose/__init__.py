"""Stage 1, what to serve: metric families rendered to text once per poll or sample, and the
/metrics body assembled from them off the scrape path, with the exporter's own metrics."""
