"""alerts/generate.py, the rules generator, as a module for the tests."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from alerts import generate

REPO = Path(__file__).resolve().parents[1]
# How the generator runs: `python -m alerts.generate` from the repository's root (make rules).
COMMAND = ("-m", "alerts.generate")


def load_generator() -> ModuleType:
    return generate
