"""How the tests run the rules generator, alerts/generate.py."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# How the generator runs: `python -m alerts.generate` from the repository's root (make rules).
COMMAND = ("-m", "alerts.generate")
