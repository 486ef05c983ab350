"""Stage 5, HTTP: /metrics from memory, the landing page and /healthz."""
