"""The package as users get it: sdist -> wheel -> a fresh venv, started exactly as the container
image starts it (ENTRYPOINT + CMD + ENV of deploy/Dockerfile; its ports moved to free ones, the
host's being the parallel suite's), against a real PostgreSQL 18, connected as the
least-privilege role that the compose stack's init script creates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

from deploy_files import (
    DEPLOY,
    REPO,
    final_stage,
    image_env,
    load_yaml_docs,
    on_free_ports,
    one,
    run,
)
from harness import parse, wait_for
from pg_aio_exporter import __version__
from pg_aio_exporter.demo.server import LocalServer, embedded_bin_dir

INIT_SCRIPT = DEPLOY / "postgres" / "initdb" / "10-pgaio-monitor.sh"
ROLE = "pgaio_monitor"


def build_wheel(out: Path) -> Path:
    # python -m build makes the sdist, then the wheel from the unpacked sdist: a file missing
    # from the sdist fails here rather than for users installing from it.
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    with tarfile.open(sdist) as archive:
        top = {name.split("/")[1] for name in archive.getnames() if "/" in name}
    # The source package and nothing else (an unanchored include once pulled in deploy/ files).
    assert top == {"exporter", "README.md", "pyproject.toml", "LICENSE", "PKG-INFO", ".gitignore"}
    with zipfile.ZipFile(wheel) as archive:
        licenses = [n for n in archive.namelist() if ".dist-info/licenses/" in n]
        assert licenses == [f"pg_aio_exporter-{__version__}.dist-info/licenses/LICENSE"]
        assert archive.read(licenses[0]) == (REPO / "LICENSE").read_bytes()
    return wheel


def install(wheel: Path, where: Path) -> Path:
    venv.create(where, with_pip=True)
    subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
    )
    return where / "bin"


def create_role(server: LocalServer, password_file: Path) -> None:
    """Run the compose stack's init script, twice: it must be idempotent."""
    env = {
        **os.environ,
        "PATH": f"{embedded_bin_dir()}:{os.environ['PATH']}",
        "PGHOST": "127.0.0.1",
        "PGPORT": str(server.port),
        "PGAIO_MONITOR_PASSWORD_FILE": str(password_file),
    }
    for _ in range(2):
        result = run("sh", INIT_SCRIPT, env=env)
        assert result.returncode == 0, result.stderr


def memory_limit_mib() -> float:
    (deployment,) = load_yaml_docs(DEPLOY / "kubernetes" / "deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    limit: str = container["resources"]["limits"]["memory"]
    assert limit.endswith("Mi"), limit
    return float(limit.removesuffix("Mi"))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_installed_wheel_runs_with_the_image_command(pg18: LocalServer, tmp_path: Path) -> None:
    started = time.monotonic()
    bin_dir = install(build_wheel(tmp_path / "dist"), tmp_path / "venv")
    install_seconds = time.monotonic() - started

    password_file = tmp_path / "password"
    password_file.write_text("not-a-real-secret\n")
    create_role(pg18, password_file)

    stage = final_stage()
    entrypoint = one(stage, "ENTRYPOINT").exec_form()
    cmd, probe, port = on_free_ports(
        one(stage, "CMD").exec_form(), one(stage, "HEALTHCHECK").exec_form()
    )
    env = {
        **os.environ,
        **{k: v for k, v in image_env(stage).items() if k != "PATH"},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DATA_SOURCE_NAME": pg18.dsn(user=ROLE),
    }
    log = (tmp_path / "exporter.log").open("w")
    proc = subprocess.Popen(
        [str(bin_dir / entrypoint[0]), *entrypoint[1:], *cmd],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def scrape_after_poll() -> dict[str, dict[frozenset[tuple[str, str]], float]] | None:
            assert proc.poll() is None, (tmp_path / "exporter.log").read_text()
            try:
                with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:  # noqa: S310
                    samples = parse(resp.read().decode())
            except OSError:
                return None
            done = samples.get("pg_aio_exporter_last_poll_success_timestamp_seconds", {})
            return samples if done else None

        samples = wait_for(scrape_after_poll, 30, "a successful poll by the installed wheel")
        # The image's HEALTHCHECK, as Docker runs it, with the venv's python.
        result = run(*probe, env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin"})
        assert result.returncode == 0, result.stderr
        rss = rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()

    # No --target-name: the target is named after the server the DSN reaches.
    target = frozenset({("target", f"127.0.0.1:{pg18.port}/postgres")})
    assert samples["pg_up"] == {target: 1.0}
    assert samples["pg_aio_supported"] == {target: 1.0}
    # pg_monitor is enough: not one privilege (or other) error from any collector.
    errors = samples.get("pg_aio_exporter_poll_errors_total", {})
    assert not any(errors.values()), errors
    assert samples["pg_stat_io_reads_total"]
    (build_info,) = samples["pg_aio_exporter_build_info"]
    assert dict(build_info)["version"] == __version__
    # JSON logs, as CMD asks: every line parses.
    lines = (tmp_path / "exporter.log").read_text().splitlines()
    assert lines and all(line.startswith("{") for line in lines), lines[:3]
    limit = memory_limit_mib()
    assert rss < limit / 2, f"RSS {rss:.0f} MiB leaves no headroom under the {limit} Mi limit"
    print(f"wheel build+install {install_seconds:.1f}s, exporter RSS {rss:.1f} MiB")

    # The report ships in the wheel with its thresholds and schema: run from outside the clone.
    report = run(
        bin_dir / "pg-aio-exporter",
        "report",
        "--duration",
        "10s",
        "--format",
        "json",
        cwd=tmp_path,
        env=env,
    )
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert doc["schema"] == 3 and doc["verdict"]["storage"], doc
    # The base package pulls no charting library: a page needs the html extra, and says so in
    # one line (exit 2) before it measures anything.
    saved = tmp_path / "saved.json"
    saved.write_text(report.stdout)
    page = run(bin_dir / "pg-aio-exporter", "compare", str(saved), str(saved), "--format", "html")
    assert page.returncode == 2, page.stderr
    assert page.stderr.strip().endswith("pip install 'pg-aio-exporter[html]'"), page.stderr
    assert run(bin_dir / "python", "-c", "import matplotlib").returncode == 1
    installed = run(
        bin_dir / "python",
        "-c",
        "import pg_aio_exporter.report.document as d; print(d.SCHEMA_FILE.read_text()[:1])",
    )
    assert installed.stdout.strip() == "{"
