"""A throwaway CA with server and client certificates, made with the openssl CLI."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@dataclass(frozen=True)
class Certs:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def pair(self, name: str) -> tuple[Path, Path]:
        return self.dir / f"{name}.crt", self.dir / f"{name}.key"


def make_certs(
    directory: Path,
    names: tuple[str, ...] = ("server", "client"),
    stranger: bool = False,
    owner: int | None = None,
) -> Certs:
    """ca.crt plus NAME.crt/NAME.key for each name, valid for localhost and 127.0.0.1; with
    `stranger`, also stranger.crt/.key from the same CA for elsewhere.example only. With
    `owner` (a uid), each pair is that user's and its key readable by it only, as PostgreSQL
    demands of its own."""
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=pg_aio_exporter test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        cwd=directory,
    )
    sans = dict.fromkeys(names, "DNS:localhost,IP:127.0.0.1")
    if stranger:
        sans["stranger"] = "DNS:elsewhere.example"
    for name, san in sans.items():
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={name}",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            cwd=directory,
        )
        (directory / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
            cwd=directory,
        )
    if owner is not None:
        for name in sans:
            (directory / f"{name}.key").chmod(0o600)
            for suffix in ("crt", "key"):
                os.chown(directory / f"{name}.{suffix}", owner, -1)
    return Certs(directory)
