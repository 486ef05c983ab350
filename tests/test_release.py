"""The release as files: LICENSE, CHANGELOG.md, scripts/release-check.sh and the release workflow
(checked with actionlint, built from the Go module proxy: the workflow itself cannot run here)."""

from __future__ import annotations

import hashlib
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy_files import REPO, run, venv_tool
from gotools import go_tool
from pg_aio_exporter import __version__

pytestmark = pytest.mark.unit

WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
CHANGELOG = REPO / "CHANGELOG.md"
RELEASE_CHECK = REPO / "scripts" / "release-check.sh"
ACTIONLINT = ("github.com/rhysd/actionlint/cmd/actionlint", "v1.7.7")
# The workflow as PyYAML reads it: YAML 1.1 makes the key `on` the boolean True.
Workflow = dict[str | bool, Any]
# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt
APACHE_2_0 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_is_the_apache_2_0_text() -> None:
    assert hashlib.sha256((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == (
        "Apache-2.0"
    )


def changelog_versions(text: str) -> list[tuple[str, str]]:
    """(version, date or note) of every `## [version] - ...` heading, top first."""
    return re.findall(r"^## \[([^\]]+)\](?: - (.+))?$", text, flags=re.MULTILINE)


def test_changelog_has_the_package_version_and_links_the_policy() -> None:
    text = CHANGELOG.read_text()
    versions = changelog_versions(text)
    released = [v for v, _ in versions if v != "Unreleased"]
    assert released and released[0] == __version__, versions
    for version in released:
        assert f"[{version}]: https://" in text, f"no link for {version}"
    assert "docs/releasing.md" in text and (REPO / "docs" / "releasing.md").is_file()


# --- scripts/release-check.sh, the workflow's gate -----------------------------------------


def release_check(tmp_path: Path, tag: str, heading: str) -> tuple[int, str]:
    """The script in a copy of the repository's two files, CHANGELOG.md's top heading replaced."""
    init = tmp_path / "exporter" / "pg_aio_exporter" / "__init__.py"
    init.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "exporter" / "pg_aio_exporter" / "__init__.py", init)
    text = re.sub(
        rf"^## \[{re.escape(__version__)}\].*$",
        heading,
        CHANGELOG.read_text(),
        count=1,
        flags=re.MULTILINE,
    )
    (tmp_path / "CHANGELOG.md").write_text(text)
    result = run(RELEASE_CHECK, tag, cwd=tmp_path)
    return result.returncode, result.stdout + result.stderr


def test_release_check_accepts_the_version_tag_with_a_dated_section(tmp_path: Path) -> None:
    code, out = release_check(tmp_path, f"v{__version__}", f"## [{__version__}] - 2026-12-01")
    assert code == 0, out


@pytest.mark.parametrize(
    ("tag", "heading", "why"),
    [
        ("v9.9.9", "## [{v}] - 2026-12-01", "does not name the package version"),
        ("{v}", "## [{v}] - 2026-12-01", "does not name the package version"),
        ("v{v}", "## [{v}] - not yet released", "no section"),
        # The version's dots are literal: 0x1y0 is not 0.1.0.
        ("v{v}", "## [{x}] - 2026-12-01", "no section"),
    ],
)
def test_release_check_refuses(tmp_path: Path, tag: str, heading: str, why: str) -> None:
    x = __version__.replace(".", "x")
    code, out = release_check(
        tmp_path, tag.format(v=__version__), heading.format(v=__version__, x=x)
    )
    assert code == 1 and why in out, out


def test_release_check_passes_shellcheck() -> None:
    result = run(venv_tool("shellcheck"), RELEASE_CHECK)
    assert result.returncode == 0, result.stdout
    assert RELEASE_CHECK.stat().st_mode & 0o111


# --- .github/workflows/release.yml ---------------------------------------------------------


def actionlint(*args: str | Path) -> tuple[int, str]:
    # shellcheck from the dev extra on PATH: actionlint then checks every `run:` script too.
    env = {"PATH": f"{Path(venv_tool('shellcheck')).parent}:/usr/bin:/bin"}
    result = run(go_tool(*ACTIONLINT), "-no-color", *args, env=env)
    return result.returncode, result.stdout + result.stderr


def test_workflows_pass_actionlint_and_a_broken_one_does_not(tmp_path: Path) -> None:
    code, out = actionlint(*sorted((REPO / ".github" / "workflows").glob("*.yml")))
    assert code == 0, out
    broken = tmp_path / "broken.yml"
    broken.write_text(
        WORKFLOW.read_text()
        .replace("needs: [build, test]", "needs: [build, tests]", 1)
        .replace('run: scripts/release-check.sh "$GITHUB_REF_NAME"', "run: echo $1", 1)
    )
    code, out = actionlint(broken)
    assert code == 1 and '"tests"' in out and "SC2086" in out, out


@pytest.fixture(scope="module")
def workflow() -> Workflow:
    doc: Workflow = yaml.safe_load(WORKFLOW.read_text())
    return doc


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def test_release_runs_on_version_tags_only(workflow: Workflow) -> None:
    # PyYAML reads the key `on` as True (YAML 1.1).
    trigger = workflow[True]
    assert list(trigger) == ["push"] and list(trigger["push"]) == ["tags"]
    (pattern,) = trigger["push"]["tags"]
    assert pattern.startswith("v")
    assert workflow["permissions"] == {}, "every job asks for its own permissions"
    build = workflow["jobs"]["build"]
    assert any("scripts/release-check.sh" in s.get("run", "") for s in build["steps"])


def test_publishing_waits_for_the_tests_of_the_built_files(workflow: Workflow) -> None:
    jobs = workflow["jobs"]
    assert jobs["test"]["needs"] == "build"
    assert any(s.get("run") == ".ci/run" for s in jobs["test"]["steps"])
    for name in ("pypi", "image"):
        assert set(jobs[name]["needs"]) == {"build", "test"}, name
    # The files PyPI gets are the build job's artifact, not a rebuild.
    (upload,) = steps_using(jobs["build"], "actions/upload-artifact")
    (download,) = steps_using(jobs["pypi"], "actions/download-artifact")
    assert upload["with"]["name"] == download["with"]["name"]
    assert not any("python -m build" in s.get("run", "") for s in jobs["pypi"]["steps"])


def test_pypi_uses_trusted_publishing(workflow: Workflow) -> None:
    pypi = workflow["jobs"]["pypi"]
    assert pypi["permissions"] == {"id-token": "write"}
    assert pypi["environment"]["name"] == "pypi"
    (publish,) = steps_using(pypi, "pypa/gh-action-pypi-publish")
    # No API token: trusted publishing exchanges the job's OIDC token instead.
    assert "password" not in publish.get("with", {})
    assert "secrets." not in yaml.safe_dump(pypi)


def test_image_is_multi_arch_from_the_shipped_dockerfile(workflow: Workflow) -> None:
    image = workflow["jobs"]["image"]
    assert image["permissions"] == {"contents": "read", "packages": "write"}
    (push,) = steps_using(image, "docker/build-push-action")
    assert (REPO / push["with"]["file"]).resolve() == REPO / "deploy" / "Dockerfile"
    assert set(push["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert push["with"]["push"] is True
    assert steps_using(image, "docker/setup-qemu-action"), "arm64 builds on amd64 runners"
    (meta,) = steps_using(image, "docker/metadata-action")
    assert "latest" not in meta["with"]["tags"]
