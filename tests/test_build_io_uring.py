"""scripts/build-postgres-io-uring.py, demo/iouring.py and demo/debian.py, the parts that are
pure logic: which archive the machine's apt sources name, what counts as a finished build, and
the one-line refusal when the kernel forbids io_uring. (The build itself runs in `make test`.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from harness import REPO
from pg_aio_exporter.demo import debian, iouring

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def script() -> ModuleType:
    path = REPO / "scripts" / "build-postgres-io-uring.py"
    spec = importlib.util.spec_from_file_location("build_postgres_io_uring", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def etc(tmp_path: Path, codename: str, sources: dict[str, str]) -> Path:
    (tmp_path / "os-release").write_text(f'PRETTY_NAME="Debian"\nVERSION_CODENAME={codename}\n')
    (tmp_path / "apt" / "sources.list.d").mkdir(parents=True)
    for name, text in sources.items():
        (tmp_path / "apt" / name).write_text(text)
    return tmp_path


def test_the_archive_of_the_systems_own_suite_deb822(tmp_path: Path) -> None:
    sources = (
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n"
        "\n"
        "# a comment line\n"
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n"
        "\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        "\n"
        "Types: deb\nURIs: http://security.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    found = debian.system_archive(
        etc(tmp_path, "bookworm", {"sources.list.d/debian.sources": sources})
    )
    assert found == (
        "http://mirror.example/debian",
        "/usr/share/keyrings/debian-archive-keyring.gpg",
    )


def test_the_archive_of_the_systems_own_suite_one_line(tmp_path: Path) -> None:
    sources = (
        "deb http://security.example/debian-security bookworm-security main\n"
        "# deb http://old.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/etc/k.gpg] http://mirror.example/debian bookworm main\n"
    )
    found = debian.system_archive(etc(tmp_path, "bookworm", {"sources.list": sources}))
    assert found == ("http://mirror.example/debian", "/etc/k.gpg")


def test_no_source_for_the_suite_is_one_line(tmp_path: Path) -> None:
    root = etc(tmp_path, "noble", {"sources.list": "deb http://x.example/debian bookworm main\n"})
    with pytest.raises(debian.ArchiveError) as raised:
        debian.system_archive(root)
    assert str(raised.value).startswith("no apt source for noble in ")
    assert "\n" not in str(raised.value)


def test_a_kernel_that_forbids_io_uring_stops_the_build_in_one_line(
    script: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sysctl = tmp_path / "io_uring_disabled"
    sysctl.write_text("2\n")
    monkeypatch.setattr(iouring, "SYSCTL", sysctl)
    monkeypatch.setattr(iouring, "CACHE", tmp_path / "cache")  # nothing may be created
    assert script.main() == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "build-postgres-io-uring: io_method=io_uring cannot run on this machine:"
        " io_uring is disabled by the kernel (kernel.io_uring_disabled = 2)\n"
    )
    assert not (tmp_path / "cache").exists()
    with pytest.raises(iouring.IoUringUnavailable, match=r"kernel\.io_uring_disabled = 2"):
        iouring.bin_dir()


def test_only_finished_builds_of_this_recipe_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(iouring, "CACHE", tmp_path)
    monkeypatch.setattr(iouring, "kernel_refusal", lambda: None)
    with pytest.raises(iouring.IoUringUnavailable, match=r"build-postgres-io-uring\.py"):
        iouring.bin_dir()
    (tmp_path / ".build-x1y2" / "stage").mkdir(parents=True)  # a half-built tree
    (tmp_path / "18.6-1").mkdir()  # built another way, by an older script
    (tmp_path / "build.log").write_text("")
    with pytest.raises(iouring.IoUringUnavailable):
        iouring.bin_dir()
    (tmp_path / f"18.6-3+{iouring.RECIPE}").mkdir()
    assert iouring.bin_dir() == tmp_path / f"18.6-3+{iouring.RECIPE}" / "bin"


def test_the_build_runs_as_a_top_level_make(script: ModuleType) -> None:
    """`make test` runs the script: an inherited MAKELEVEL makes PostgreSQL's makefiles skip
    their generated headers, and a fresh machine's build failed on utils/errcodes.h."""
    outer = {"PATH": "/usr/bin", "MAKELEVEL": "1", "MAKEFLAGS": "w -j2", "MFLAGS": "-w"}
    env = script.child_environment(outer, {"DEBIAN_FRONTEND": "noninteractive"})
    assert env == {"PATH": "/usr/bin", "DEBIAN_FRONTEND": "noninteractive"}


def test_only_complete_debian_trees_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree is complete once it has its package list (written last, before the rename); a
    dot-directory is a fetch under way or cut off, another major's tree is not this one's."""
    monkeypatch.setattr(debian, "CACHE", tmp_path)
    for name, complete in (
        ("19~rc1-1", True),
        (".19~rc2-1-abc", True),
        ("19.1-1", False),
        ("18.6-1", True),
    ):
        (tmp_path / name / "usr" / "lib" / "postgresql").mkdir(parents=True)
        if complete:
            (tmp_path / name / debian.MARK).write_text("postgresql-19_19~rc1-1_amd64.deb\n")
    assert debian.installs("19") == [tmp_path / "19~rc1-1"]
    bin_dir = tmp_path / "19~rc1-1" / "usr" / "lib" / "postgresql" / "19" / "bin"
    assert debian.tree_of(bin_dir) == tmp_path / "19~rc1-1"
    assert debian.tree_of(tmp_path / "19.1-1" / "usr") is None
