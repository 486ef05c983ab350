"""Stage 8, `pg-aio-exporter demo`: a throwaway PostgreSQL 18 with a read workload, and the
exporter on it.

The same server and workload code is the test suite's harness.
"""
