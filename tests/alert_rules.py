"""alerts/generate.py, the rules generator, as a module for the tests."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

GENERATOR = Path(__file__).resolve().parents[1] / "alerts" / "generate.py"


@functools.cache
def load_generator() -> ModuleType:
    # alerts/ is not a package: the generator is a standalone script users run, which imports
    # promql.py from its own directory.
    sys.path.insert(0, str(GENERATOR.parent))
    spec = importlib.util.spec_from_file_location("generate", GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate"] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module
