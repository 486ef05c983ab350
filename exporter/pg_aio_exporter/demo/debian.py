"""PostgreSQL releases that only Debian's archive has yet (19 in `experimental`), run here
unchanged on an older Debian: fetched once per machine into CACHE.

The archive is the one this machine's own apt sources name. `apt-get download` takes the
server, its client and the libpq of the same source version, and the shared libraries they link
(and those link, libc6 included) from `sid`, under a private apt configuration (nothing in /etc
is changed; apt checks every file against the signed indexes). `dpkg-deb -x` unpacks them into
one tree, and Debian's `patchelf` points each executable at the tree's own loader and libraries:
the binaries need a newer C library than the system's. A DT_RPATH (not RUNPATH) of the
executable serves every library loaded into it, the extensions too.

The tree is unpacked in a dot-directory beside its final place and renamed there when
complete, under a lock (clones and CI runs of one machine share the cache). A finished tree is
reused without any network access; delete it to take a newer release.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from pg_aio_exporter.demo import iouring

CACHE = iouring.CACHE.parent / "postgres-debian"
# In a complete tree's root: the packages and versions it holds, one a line.
MARK = "packages.txt"
SUITES = ("sid", "experimental")
# The packages of a library: its name starts so (zlib1g is the one exception to "lib").
LIBRARY = re.compile(r"^(lib|zlib)")
# Where Debian's loader is, inside the tree, and where the libraries are (merged /usr).
LOADER = Path("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
ELF = b"\x7fELF"


class ArchiveError(Exception):
    """The archive could not give the release; the message is one line and says why."""


class NoRelease(ArchiveError):
    """The archive has no such release (the only reason a test may skip a version)."""


def installs(major: str) -> list[Path]:
    """Complete trees of `major` (e.g. 19~rc1-1), newest first."""
    if not CACHE.is_dir():
        return []
    found = [d for d in CACHE.glob(f"{major}[~.]*") if (d / MARK).exists()]
    return sorted(found, key=lambda d: d.stat().st_mtime, reverse=True)


def bin_dir(major: str) -> Path:
    """The bin directory of the newest tree of `major`, fetched first when there is none."""
    found = installs(major) or [fetch(major)]
    return found[0] / "usr" / "lib" / "postgresql" / major / "bin"


def fetch(major: str) -> Path:
    """Download and unpack the newest postgresql-`major` the archive has into CACHE."""
    if shutil.which("patchelf") is None:
        raise ArchiveError("patchelf missing (as root: apt-get install patchelf)")
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another clone may be fetching it right now
        if found := installs(major):
            return found[0]
        for stale in CACHE.glob(f".{major}*"):  # left by a killed fetch
            shutil.rmtree(stale)
        with tempfile.TemporaryDirectory(prefix="pg-aio-apt-") as work:
            apt = Apt(Path(work))
            version, debs = apt.download(major)
            tree = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=CACHE))
            try:
                for deb in debs:
                    _run(["dpkg-deb", "-x", str(deb), str(tree)], f"dpkg-deb -x {deb.name}")
                relocate(tree, CACHE / version)
                (tree / MARK).write_text("".join(f"{deb.name}\n" for deb in debs))
                tree.chmod(0o755)  # the unprivileged server user runs the binaries from here
                tree.rename(CACHE / version)
            finally:
                shutil.rmtree(tree, ignore_errors=True)
        return CACHE / version


def relocate(tree: Path, runs_at: Path) -> None:
    """Point every executable of the server packages in `tree` at the loader and libraries of
    the tree that will run at `runs_at` (the same tree, or a copy's place)."""
    rpath = ":".join(str(runs_at / d) for d in LIBRARY_DIRS)
    for program in sorted((tree / "usr" / "lib" / "postgresql").glob("*/bin/*")):
        with program.open("rb") as head:
            if head.read(4) != ELF:
                continue
        _run(
            [
                "patchelf",
                "--set-interpreter",
                str(runs_at / LOADER),
                "--force-rpath",
                "--set-rpath",
                rpath,
                str(program),
            ],
            f"patchelf {program.name}",
        )


def tree_of(bin_dir: Path) -> Path | None:
    """The tree `bin_dir` belongs to, if it is one of this module's."""
    return next((p for p in bin_dir.parents if (p / MARK).exists()), None)


class Apt:
    """apt-get and apt-cache on the system's archive with a private configuration in `work`
    (a temp dir outside root's home, which apt's download user could not enter)."""

    def __init__(self, work: Path) -> None:
        self.uri, keyring = system_archive()
        etc = work / "etc"
        (etc / "sources.list.d").mkdir(parents=True)
        (etc / "sources.list").write_text("")
        signed_by = f"Signed-By: {keyring}\n" if keyring else ""
        (etc / "sources.list.d" / "pg.sources").write_text(
            f"Types: deb\nURIs: {self.uri}\nSuites: {' '.join(SUITES)}\nComponents: main\n"
            f"{signed_by}"
        )
        (work / "lists" / "partial").mkdir(parents=True)
        (work / "cache" / "archives" / "partial").mkdir(parents=True)
        self.debs = work / "debs"
        self.debs.mkdir()
        self.options = [
            f"-oDir::Etc::SourceList={etc / 'sources.list'}",
            f"-oDir::Etc::SourceParts={etc / 'sources.list.d'}",
            f"-oDir::State::Lists={work / 'lists'}",
            f"-oDir::Cache={work / 'cache'}",
            "-oDir::State::status=/dev/null",  # nothing counts as installed
            "-oAcquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
            "-oAcquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
        ]
        sandbox_may_write(work)

    def download(self, major: str) -> tuple[str, list[Path]]:
        """The newest postgresql-`major` (sid's if it has one, else experimental's), its
        client, the libpq of its version and their libraries: (version, .deb files)."""
        _run(["apt-get", *self.options, "update", "-qq"], f"apt-get update at {self.uri}")
        server = f"postgresql-{major}"
        records = self.show([server])
        if not records:
            raise NoRelease(
                f"Debian's archive at {self.uri} has no {server} in {' or '.join(SUITES)}"
            )
        version = records[0]["Version"]
        pinned = [f"{server}={version}", f"postgresql-client-{major}={version}"]
        libpq = f"libpq5={version}" if self.show([f"libpq5={version}"]) else "libpq5"
        wanted = [*pinned, libpq, *sorted(self.libraries([*pinned, libpq]))]
        _run(["apt-get", *self.options, "download", "-qq", *wanted], "apt-get download", self.debs)
        return version, sorted(self.debs.glob("*.deb"))

    def libraries(self, packages: list[str]) -> set[str]:
        """The library packages `packages` depend on, and theirs, at each one's candidate."""
        seen: set[str] = {"libpq5"}
        todo = packages
        while todo:
            named = set()
            for record in self.show(todo):
                for field in ("Pre-Depends", "Depends"):
                    for alternatives in record.get(field, "").split(","):
                        # The first alternative, without version or architecture.
                        name = alternatives.split("|")[0].split("(")[0].split(":")[0].strip()
                        if LIBRARY.match(name) and name not in seen:
                            named.add(name)
            seen |= named
            todo = sorted(named)
        return seen - {"libpq5"}

    def show(self, packages: list[str]) -> list[dict[str, str]]:
        """The candidate records of `packages` (`name` or `name=version`); none for a name
        the archive does not have."""
        result = subprocess.run(
            ["apt-cache", *self.options, "show", "--no-all-versions", *packages],
            capture_output=True,
            text=True,
            check=False,
        )
        records = []
        for stanza in result.stdout.split("\n\n"):
            fields = dict(re.findall(r"^([\w-]+): (.*)$", stanza, re.M))
            if "Package" in fields:
                records.append(fields)
        return records


def system_archive(etc: Path = Path("/etc")) -> tuple[str, str | None]:
    """URI (and keyring) of the apt source that serves this release's own suite."""
    codename = os_release(etc).get("VERSION_CODENAME")
    if codename is None:
        raise ArchiveError(f"no VERSION_CODENAME in {etc / 'os-release'}: not Debian")
    for uri, suites, keyring in apt_sources(etc / "apt"):
        if codename in suites:
            return uri, keyring
    raise ArchiveError(f"no apt source for {codename} in {etc / 'apt'}/sources.list(.d)")


def apt_sources(apt: Path) -> list[tuple[str, list[str], str | None]]:
    """(uri, suites, keyring) of every enabled `deb` source, one-line and deb822 formats."""
    found: list[tuple[str, list[str], str | None]] = []
    for path in [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]:
        if path.exists():
            for line in path.read_text().splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
                if len(words) >= 3 and words[0] == "deb":
                    keyring = re.search(r"signed-by=(\S+?)[\s\]]", line)
                    found.append((words[1], [words[2]], keyring[1] if keyring else None))
    for path in sorted((apt / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields = dict(
                re.findall(r"^([\w-]+):[ \t]*(.*)$", re.sub(r"(?m)^#.*\n?", "", stanza), re.M)
            )
            if "deb" in fields.get("Types", "").split() and fields.get("Enabled") != "no":
                keyring = fields.get("Signed-By")
                for uri in fields.get("URIs", "").split():
                    found.append((uri, fields.get("Suites", "").split(), keyring))
    return found


def os_release(etc: Path) -> dict[str, str]:
    text = (etc / "os-release").read_text()
    return {key: value.strip('"') for key, value in re.findall(r"^(\w+)=(.*)$", text, re.M)}


def sandbox_may_write(path: Path) -> None:
    """As root, apt downloads as the user _apt: let it write where it downloads."""
    if os.geteuid() != 0:
        return
    try:
        sandbox = pwd.getpwnam("_apt")
    except KeyError:
        return
    for entry in [path, *path.rglob("*")]:
        os.chown(entry, sandbox.pw_uid, -1)


def _run(argv: list[str], what: str, cwd: Path | None = None) -> None:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-1:]
        raise ArchiveError(f"{what} failed{': ' + detail[0] if detail else ''}")
