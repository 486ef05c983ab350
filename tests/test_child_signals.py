"""The suite stops its children however it was launched (issue 48): a shell starts a background
job (`nohup make test > log 2>&1 &`) with SIGINT ignored, and every child inherits that. So
conftest.py restores SIGINT for the children, SIGINT is sent only by harness.interrupt, which
fails on a child that ignores it, and nothing else in the repository sends SIGINT."""

from __future__ import annotations

import ast
import signal
import subprocess
from pathlib import Path

import pytest

from harness import CTRL_C, REPO, ignores_sigint, interrupt, passes_in_background

pytestmark = pytest.mark.unit

HARNESS = REPO / "tests" / "harness.py"
# Where children are started and stopped: no SIGINT at all but harness.interrupt's.
STOPPERS = ("tests", "bench", "scripts")
# The package: it answers SIGINT (the exporter's loop, the demo), it never sends it.
PACKAGE = ("exporter",)
SENDERS = {"send_signal", "kill", "killpg", "pidfd_send_signal", "raise_signal", "pthread_kill"}
SIGINT_NAMES = {"SIGINT", "CTRL_C"}
DISPOSITION = {"signal", "getsignal"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def sigint_uses(source: str, *, any_mention: bool) -> list[int]:
    """The lines of `source` that send SIGINT (a signal-sending call given SIGINT, CTRL_C or 2)
    or, with `any_mention`, name SIGINT other than to set or read its disposition."""
    tree = ast.parse(source)
    dispositions = {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _name(node.func) in DISPOSITION and node.args
    }
    lines = []
    for node in ast.walk(tree):
        if (
            any_mention
            and isinstance(node, (ast.Name, ast.Attribute))
            and _name(node) == "SIGINT"
            and id(node) not in dispositions
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and _name(node.func) in SENDERS:
            args = [*node.args, *(k.value for k in node.keywords)]
            if any(
                _name(a) in SIGINT_NAMES or (isinstance(a, ast.Constant) and a.value == 2)
                for a in args
            ):
                lines.append(node.lineno)
    return sorted(set(lines))


def tracked(top: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", f"{top}/*.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [REPO / name for name in listed.split("\0") if name]


def test_sigint_is_sent_by_harness_interrupt_only() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for top, any_mention in [*((d, True) for d in STOPPERS), *((d, False) for d in PACKAGE)]
        for path in tracked(top)
        if path != HARNESS
        for line in sigint_uses(path.read_text(), any_mention=any_mention)
    ]
    assert not found, f"SIGINT outside harness.interrupt (use it, or SIGTERM): {found}"


def test_the_sigint_scan_can_fail() -> None:
    sends = (
        "import os, signal\n"
        "proc.send_signal(signal.SIGINT)\n"
        "os.killpg(proc.pid, CTRL_C)\n"
        "os.kill(pid, 2)\n"
        "proc.terminate()\n"
        "os.kill(pid, signal.SIGTERM)\n"
        "stop = signal.SIGINT\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    )
    assert sigint_uses(sends, any_mention=False) == [2, 3, 4]
    assert sigint_uses(sends, any_mention=True) == [2, 3, 4, 7]


def test_interrupt_refuses_a_child_that_ignores_sigint() -> None:
    """What a child started under `nohup ... &` would be without conftest.py's restore: it is
    named, not waited for until a timeout."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the shell sets it for a job
    try:
        proc = subprocess.Popen(["sleep", "60"])
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        assert ignores_sigint(proc.pid)
        with pytest.raises(AssertionError, match="ignores SIGINT"):
            interrupt(proc)
    finally:
        proc.kill()
        proc.wait()


def test_a_child_of_the_suite_stops_on_ctrl_c() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert not ignores_sigint(proc.pid)
        interrupt(proc)
        assert proc.wait(10) == -CTRL_C
    finally:
        proc.kill()
        proc.wait()


def test_the_suite_restores_sigint_under_a_parent_ignoring_it() -> None:
    """The test above, run by a pytest started as a shell starts a background job (SIGINT,
    SIGQUIT and SIGHUP ignored). A nested pytest: about 2 s of CPU."""
    node = f"{Path(__file__).relative_to(REPO)}::test_a_child_of_the_suite_stops_on_ctrl_c"
    passes_in_background([node], timeout=120)
