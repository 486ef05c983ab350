"""Prometheus exporter for PostgreSQL asynchronous I/O (PostgreSQL 18 AIO)."""

__version__ = "0.1.0"
