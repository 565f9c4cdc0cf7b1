# The two commands a newcomer needs: `make demo` and `make test`. Both set everything up.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
KGRAG := $(BIN)/kgrag

.PHONY: setup demo demo-stop browser test chaos lint typecheck unit integration services-up services-down bench bench-full clean

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,export]"
	touch $@

PACKAGES := kgrag core streams agents offline graph query prompts bench

# The project's modules compiled ahead (skipped when up to date): a worker restarted after a
# crash then reads bytecode instead of compiling a few hundred modules, which matters where
# PYTHONDONTWRITEBYTECODE keeps Python from caching what it compiles on import.
setup: $(VENV)/.installed
	@$(BIN)/python -m compileall -q -j0 $(PACKAGES)

services-up: setup
	$(KGRAG) services up

services-down: setup
	$(KGRAG) services down

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pylint --score=n $(PACKAGES)
	$(BIN)/python scripts/check_sizes.py
	$(BIN)/python -m bench.check_results

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q -ra tests/unit

integration: services-up browser
	$(BIN)/pytest -q -ra tests/integration

# Every benchmark, one at a time, quick (`make bench`) or full (`make bench-full`: the runs
# whose figures the targets judge; hours on 2 cores). ONLY="a b" runs those alone. Each writes
# its run into bench/results/<name>.json beside the other mode's; nothing it starts outlives it.
bench: services-up
	$(BIN)/python bench/run_all.py $(if $(ONLY),--only $(ONLY))

bench-full: services-up
	$(BIN)/python bench/run_all.py --full $(if $(ONLY),--only $(ONLY))

# Soak the exactly-once tests (crash, scale-out, forced rebalances): RUNS repetitions.
RUNS ?= 5
chaos: services-up
	for i in $$(seq 1 $(RUNS)); do \
	  echo "chaos run $$i of $(RUNS)"; \
	  $(BIN)/pytest -q -ra tests/integration/test_ingest_robustness.py || exit 1; \
	done

# The dashboard's browser tests drive Debian's Chromium (Playwright's own browser download
# is not reachable offline): installed from Debian when missing, as root or with sudo.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the dashboard's browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "the dashboard tests need Chromium: apt-get install chromium (as root)" >&2; exit 1; fi; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; }

# Services up, lint, the layers (import-linter), repeated code (pylint), module and function
# sizes, the benchmark results' stamps, types, every test, services down (even when something
# fails).
test: setup browser
	$(KGRAG) services up
	status=0; \
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports \
	  && $(BIN)/pylint --score=n $(PACKAGES) && $(BIN)/python scripts/check_sizes.py \
	  && $(BIN)/python -m bench.check_results && $(BIN)/mypy \
	  && $(BIN)/pytest -q -ra || status=$$?; \
	$(KGRAG) services down; \
	exit $$status

# Services up, a worker, the sample news published and indexed, questions answered; the
# dashboard is left running (its address is printed): `make demo-stop` stops it all.
demo: setup
	$(KGRAG) demo

demo-stop: setup
	$(KGRAG) demo --stop
	$(KGRAG) services down

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
