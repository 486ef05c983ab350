"""The package's structure: the exposition of a recorded server state is byte for byte what the
code before the collector registry rendered, a new view is one registry entry, no import cycle,
imports go to earlier stages only (docs/architecture.md), and the reserved labels are derived
from what the collectors emit."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import recorded
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config.targets import RESERVED_LABELS
from pg_aio_exporter.demo.server import free_port
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10

pytestmark = pytest.mark.unit
PACKAGE = Path(recorded.__file__).resolve().parents[1] / "exporter" / "pg_aio_exporter"


# Families added since the reference's commit (issue 23: the write side), left out of the
# byte-for-byte comparison; each is checked against the rows in tests/test_collectors.py.
ADDED_SINCE_REFERENCE = frozenset(
    {
        *(f"pg_aio_{op}_latency_seconds" for op in ("write", "extend", "writeback", "fsync")),
        *(f"pg_aio_{op}_seconds_per_byte" for op in ("write", "extend")),
        "pg_aio_wal_sync_sampled_seconds_total",
        "pg_stat_wal_records_total",
        "pg_stat_wal_fpi_total",
        "pg_stat_wal_bytes_total",
        "pg_stat_wal_buffers_full_total",
        "pg_aio_wal_writes_total",
        "pg_aio_wal_write_time_seconds_total",
        "pg_aio_wal_syncs_total",
        "pg_aio_wal_sync_time_seconds_total",
        "pg_aio_wal_write_latency_seconds",
        "pg_aio_wal_sync_latency_seconds",
        *(f"pg_aio_checkpoint{n}_total" for n in ("s_timed", "s_requested", "_buffers_written")),
        "pg_aio_checkpoint_write_time_seconds_total",
        "pg_aio_checkpoint_sync_time_seconds_total",
        *(
            f"pg_aio_bgwriter_{n}_total"
            for n in ("buffers_clean", "maxwritten_clean", "buffers_alloc")
        ),
        "pg_settings_block_size_bytes",
    }
)
# Rendered otherwise since, on purpose: the hit ratio counts blocks (issue 49), its values
# checked against the rows in test_collectors.py.
CHANGED_SINCE_REFERENCE = frozenset({"pg_aio_hit_ratio"})


def without_families(body: bytes, names: frozenset[str]) -> bytes:
    """The exposition without the families (HELP, TYPE and samples) named in `names`."""
    kept, skipping = [], False
    for line in body.splitlines(keepends=True):
        if line.startswith(b"# HELP "):
            skipping = line.split()[2].decode() in names
        if not skipping:
            kept.append(line)
    return b"".join(kept)


def by_family(body: bytes) -> dict[bytes, bytes]:
    """The exposition's text of each family (HELP, TYPE and samples, byte for byte) by name."""
    out: dict[bytes, bytes] = {}
    name = b""
    for line in body.splitlines(keepends=True):
        if line.startswith(b"# HELP "):
            name = line.split()[2]
        out[name] = out.get(name, b"") + line
    return out


def without_idle_rows(body: bytes) -> bytes:
    """The exposition without the pg_stat_io rows whose every counter is 0, which the reference
    rendered and the collector leaves out since issue 46 (a family left with no row goes whole;
    test_collectors.py checks the rows that stay, and that the idle ones are gone)."""
    lines = body.splitlines(keepends=True)

    def row(line: bytes) -> bytes | None:
        """The labels of a pg_stat_io counter's sample, None for any other line."""
        name, _, rest = line.partition(b"{")
        is_counter = name.startswith(b"pg_stat_io_") and name.endswith(b"_total")
        return rest.rpartition(b"}")[0] if is_counter else None

    active: set[bytes] = set()
    for line in lines:
        if (labels := row(line)) is not None and float(line.rsplit(b" ", 1)[1]) != 0:
            active.add(labels)
    kept = [line for line in lines if row(line) in (None, *active)]
    # HELP and TYPE of a family whose every row went: its next kept line is no sample of it.
    out = []
    for i, line in enumerate(kept):
        if line.startswith((b"# HELP ", b"# TYPE ")):
            name = line.split()[2]
            following = kept[i + 1 : i + 3]
            if not any(f.startswith(name + b"{") or f.startswith(name + b" ") for f in following):
                continue
        out.append(line)
    return b"".join(out)


# The servers whose rows have a reference rendered by the code before the restructure: 19 was
# recorded later (its rows are checked against their expected values in test_collectors.py).
REFERENCED = ("16", "17", "18")


@pytest.mark.parametrize("major", REFERENCED)
def test_recorded_state_renders_the_reference_bytes(major: str) -> None:
    """tests/fixtures/exposition/pgNN.prom was rendered from the same rows by the code before
    the restructure (commit e8cc035's collectors, sampler and exposition); what was added since
    is compared apart."""
    reference = without_idle_rows(
        (recorded.FIXTURES / "exposition" / f"pg{major}.prom").read_bytes()
    )
    body = recorded.replay(major)
    changed = CHANGED_SINCE_REFERENCE
    # By family: a family's place follows the first row that has its column, and that row can
    # be an idle one, left out since issue 46 (pg_stat_io_fsyncs_total on 16).
    assert by_family(without_families(body, ADDED_SINCE_REFERENCE | changed)) == by_family(
        without_families(reference, changed)
    )

    def names(text: bytes) -> set[str]:
        return {
            line.split()[2].decode() for line in text.splitlines() if line.startswith(b"# HELP")
        }

    assert names(body) - names(reference) <= ADDED_SINCE_REFERENCE


@dataclass(frozen=True, slots=True)
class AnswerRow:
    """A row of the dummy view's SQL."""

    answer: int


class DummyCollector:
    """A view that is not PostgreSQL's: one gauge per row of `SELECT 1`."""

    name = "dummy"
    since = PG10
    labels = ("dummy_label",)
    row_type = AnswerRow

    def query(self, version_num: int) -> str | None:
        return "SELECT 41 + 1 AS answer"

    def collect(self, rows: list[AnswerRow], out: MetricSet) -> None:
        for row in rows:
            out.gauge("pg_dummy_answer", "The answer.", row.answer, dummy_label="x")


def test_a_new_view_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.POLL, DummyCollector.name, DummyCollector)
    for major in recorded.MAJORS:
        rows = recorded.load(major)["polls"]
        for poll in rows:
            poll["dummy"] = [{"answer": 42}]
        try:
            body = recorded.replay(major).decode()
        finally:
            for poll in rows:
                del poll["dummy"]
        assert 'pg_dummy_answer{cluster="c1",dummy_label="x",target="recorded"} 42.0\n' in body
    assert "dummy_label" in registry.labels()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, path: Path) -> set[str]:
    """The names an import statement of the module at `path` imports: `from m import a` gives
    m and m.a; a relative import (`from . import a`, `from ..poll import worker`) is resolved
    against the module's package, as Python does."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    module = node.module or ""
    if node.level:
        package = _module_name(path).split(".")
        if path.name != "__init__.py":
            package = package[:-1]  # a module's package; a package is its own
        base = package[: len(package) - (node.level - 1)]
        module = ".".join([*base, module] if module else base)
    found = {module} if node.module else set()
    found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _imports(path: Path) -> set[str]:
    """The package modules a module imports at its top level (not inside functions)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        found.update(_imported(node, path))
    return {name for name in found if name.startswith("pg_aio_exporter")}


def _module_graph() -> dict[str, set[str]]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        modules[_module_name(path)] = path
    graph = {}
    for name, path in modules.items():
        edges = set()
        for imported in _imports(path):
            # `from a.b import c` names module a.b.c when it exists, else an attribute of a.b.
            target = imported if imported in modules else imported.rpartition(".")[0]
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # Importing a submodule runs its parent packages' __init__ first.
            while target:
                if target != name:
                    edges.add(target)
                target = target.rpartition(".")[0]
        graph[name] = edges
    return graph


def test_no_import_cycle() -> None:
    graph = _module_graph()
    assert "pg_aio_exporter.collectors.registry" in graph  # the walk found the package
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                cycle = [*path[path.index(imported) :], imported]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if imported not in state:
                visit(imported, [*path, imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize(
    ("registry", "a"),
    [
        ("from pg_aio_exporter import a", "from pg_aio_exporter.collectors import registry"),
        ("from .. import a", "from .collectors import registry"),  # relative imports
    ],
)
def test_import_cycle_check_can_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: str, a: str
) -> None:
    fake = tmp_path / "pg_aio_exporter"
    (fake / "collectors").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "collectors" / "__init__.py").write_text("")
    (fake / "collectors" / "registry.py").write_text(registry + "\n")
    (fake / "a.py").write_text(a + "\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    with pytest.raises(AssertionError, match="import cycle"):
        test_no_import_cycle()


# docs/architecture.md's stages, lowest first: a module imports only modules of its own stage
# or of an earlier one (anywhere in the module: a deferred import is an import too).
STAGES = (
    (
        "pg_aio_exporter",
        "pg_aio_exporter.versions",
        "pg_aio_exporter.redact",
        "pg_aio_exporter.logs",
        "pg_aio_exporter.vocabulary",
        "pg_aio_exporter.thresholds",
    ),
    ("pg_aio_exporter.expose",),
    ("pg_aio_exporter.collectors",),
    ("pg_aio_exporter.config",),
    ("pg_aio_exporter.poll",),
    ("pg_aio_exporter.web",),
    ("pg_aio_exporter.report",),
    ("pg_aio_exporter.app",),
    ("pg_aio_exporter.demo",),
    ("pg_aio_exporter.cli", "pg_aio_exporter.__main__"),
)


def _stage(module: str) -> int:
    """The stage of a module: its own entry, else its package's (the longest match)."""
    best, stage = "", -1
    for index, prefixes in enumerate(STAGES):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, stage = prefix, index
    assert stage >= 0, f"{module} is in no stage of STAGES"
    return stage


def _all_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        found.update(_imported(node, path))
    return {name for name in found if name.startswith("pg_aio_exporter")}


def test_imports_go_to_earlier_stages_only() -> None:
    backwards = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for imported in sorted(_all_imports(path)):
            if _stage(imported) > _stage(module):
                backwards.append(f"{module} imports {imported}")
    assert backwards == []


def test_stage_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "pg_aio_exporter"
    (fake / "expose").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "expose" / "__init__.py").write_text("")
    (fake / "expose" / "metricset.py").write_text(
        "def f():\n    from pg_aio_exporter.poll import worker\n"
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    with pytest.raises(AssertionError, match=r"expose\.metricset imports pg_aio_exporter\.poll"):
        test_imports_go_to_earlier_stages_only()


@pytest.mark.parametrize(
    ("where", "statement"),
    [
        ("expose/metricset.py", "from ..poll import worker"),
        ("expose/metricset.py", "from .. import poll"),
        ("expose/__init__.py", "from ..poll.worker import TargetWorker"),
    ],
)
def test_stage_check_sees_relative_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, statement: str
) -> None:
    fake = tmp_path / "pg_aio_exporter"
    for package in ("", "expose", "poll"):
        (fake / package).mkdir(parents=True, exist_ok=True)
        (fake / package / "__init__.py").write_text("")
    (fake / "poll" / "worker.py").write_text("")
    (fake / where).write_text(f"def f():\n    {statement}\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    with pytest.raises(AssertionError, match=r"imports pg_aio_exporter\.poll"):
        test_imports_go_to_earlier_stages_only()


ROOT = PACKAGE.parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _layout_stages(text: str) -> dict[str, int]:
    """The packages in docs/architecture.md's layout block and the stage it gives each: lines
    like `expose/         1. what is served: ...`."""
    block = text.split("```")[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)/\s+(\d+)\. ", block, re.MULTILINE)}


def test_each_package_names_its_stage_as_the_architecture_does() -> None:
    stages = _layout_stages(ARCHITECTURE.read_text())
    packages = {path.parent.name: path for path in PACKAGE.glob("*/__init__.py")}
    assert sorted(stages) == sorted(packages), "the layout lists every package, and only those"
    wrong = []
    for name, stage in sorted(stages.items()):
        doc = ast.get_docstring(ast.parse(packages[name].read_text())) or ""
        if not doc.startswith(f"Stage {stage}, "):
            wrong.append(f"{name}/__init__.py begins {doc[:24]!r}, not 'Stage {stage}, '")
        if _stage(f"pg_aio_exporter.{name}") != stage:
            wrong.append(f"STAGES has {name} at {_stage(f'pg_aio_exporter.{name}')}, not {stage}")
    assert wrong == []


def test_stage_names_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "pg_aio_exporter"
    (fake / "expose").mkdir(parents=True)
    (fake / "expose" / "__init__.py").write_text('"""Stage 4, what to serve."""\n')
    architecture = tmp_path / "architecture.md"
    architecture.write_text("```\nexpose/         1. what is served\n```\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    monkeypatch.setattr(__import__(__name__), "ARCHITECTURE", architecture)
    with pytest.raises(AssertionError, match=r"expose/__init__\.py begins 'Stage 4, "):
        test_each_package_names_its_stage_as_the_architecture_does()


def _touches_sys_path(source: str) -> bool:
    """Whether code (not a comment or string) names sys.path: the import path is set where a
    program starts (pytest's pythonpath, the Makefile's HARNESS_PATH), never by a module."""
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
        for node in ast.walk(ast.parse(source))
    )


def test_no_module_changes_sys_path() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "tests/test_structure.py" in listed
    assert [name for name in listed if _touches_sys_path((ROOT / name).read_text())] == []


def test_sys_path_check_can_fail() -> None:
    assert _touches_sys_path("import sys\nsys.path.insert(0, 'tests')\n")
    assert not _touches_sys_path("# sys.path.insert(0, 'tests')\nPATH = 'sys.path'\n")


DAEMON_MODULES = """
import os, sys, threading, urllib.request
from pg_aio_exporter.cli import main

def dump():
    while True:
        try:
            urllib.request.urlopen(sys.argv[1], timeout=1).read()
        except OSError:
            threading.Event().wait(0.05)
            continue
        print("\\n".join(sorted(sys.modules)), flush=True)
        os._exit(0)

threading.Thread(target=dump, daemon=True).start()
main(sys.argv[2:])
"""


def test_the_daemon_does_not_import_the_report_or_the_demo() -> None:
    """The exporter, serving (its first poll failed: no server on the port), has loaded no
    report or demo module: they are imported where they run; nor prometheus_client, whose
    process_* and formatting expose/ does itself (docs/performance.md)."""
    port = free_port()
    result = subprocess.run(
        [
            *(sys.executable, "-c", DAEMON_MODULES, f"http://127.0.0.1:{port}/metrics"),
            *("--dsn", f"host=127.0.0.1 port={free_port()} user=x connect_timeout=1"),
            *("--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    modules = result.stdout.split()
    assert "pg_aio_exporter.poll.worker" in modules, "the daemon was serving"
    assert [
        m
        for m in modules
        if m.startswith(("pg_aio_exporter.report", "pg_aio_exporter.demo", "prometheus_client"))
    ] == []


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_reserved_labels_cover_every_label_the_collectors_emit(major: str) -> None:
    body = recorded.replay(major).decode()
    emitted = {
        name
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        for name in sample.labels
    }
    extra = set(recorded.BASE_LABELS) - {"target"}
    assert emitted - extra <= RESERVED_LABELS
    assert {"backend_type", "io_method", "wait_event", "operation"} <= RESERVED_LABELS
