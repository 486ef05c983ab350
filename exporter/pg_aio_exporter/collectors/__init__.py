"""Stage 2, what to read: one module per PostgreSQL view, each owning its version-gated SQL, the
parsing of its rows and its metric families; registry.py lists them."""
