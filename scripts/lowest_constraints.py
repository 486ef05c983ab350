#!/usr/bin/env python3
"""Print pip constraints that hold every direct dependency of pyproject.toml (the build backend,
the package's own and every extra's) at the lowest version its specifier allows.

`make test` installs the package with them into a second virtualenv and runs the unit tests
there, so that a lower bound the code has outgrown fails CI instead of a user's install. A
dependency without a lower bound is an error: it would be tested at no version in particular.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# name[extras] then the specifiers; an environment marker (;) is not used in this project.
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)")
_LOWEST = re.compile(r"(?:>=|==)\s*([^,\s]+)")


def lowest(requirement: str) -> str:
    """`name==version` for the lowest version `requirement` allows."""
    match = _REQUIREMENT.fullmatch(requirement)
    bound = _LOWEST.search(match.group(3)) if match else None
    if match is None or bound is None:
        raise SystemExit(f"{PYPROJECT.name}: {requirement!r} has no lower bound (>= or ==)")
    return f"{match.group(1)}=={bound.group(1)}"


def main(args: list[str]) -> None:
    """Constraints; with --requirements, the package's requirements themselves (every extra's
    too, not the build backend): what the virtualenv of the unit tests installs."""
    project = tomllib.loads(PYPROJECT.read_text())
    requirements = [
        *project["project"]["dependencies"],
        *(r for extra in project["project"]["optional-dependencies"].values() for r in extra),
    ]
    if args == ["--requirements"]:
        sys.stdout.write("".join(f"{line}\n" for line in sorted(set(requirements))))
        return
    requirements += project["build-system"]["requires"]
    sys.stdout.write("".join(f"{line}\n" for line in sorted(set(map(lowest, requirements)))))


if __name__ == "__main__":
    main(sys.argv[1:])
