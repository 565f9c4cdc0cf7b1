# The two commands a newcomer needs: `make demo` and `make test`. Both set everything up.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
KGRAG := $(BIN)/kgrag

.PHONY: setup demo test chaos lint typecheck unit integration services-up services-down clean

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

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q -ra tests/unit

integration: services-up
	$(BIN)/pytest -q -ra tests/integration

# Soak the exactly-once tests (crash, scale-out, forced rebalances): RUNS repetitions.
RUNS ?= 5
chaos: services-up
	for i in $$(seq 1 $(RUNS)); do \
	  echo "chaos run $$i of $(RUNS)"; \
	  $(BIN)/pytest -q -ra tests/integration/test_ingest_robustness.py || exit 1; \
	done

# Services up, lint, the layers (import-linter), repeated code (pylint), types, every test,
# services down (even when something fails).
test: setup
	$(KGRAG) services up
	status=0; \
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports \
	  && $(BIN)/pylint --score=n $(PACKAGES) && $(BIN)/mypy \
	  && $(BIN)/pytest -q -ra || status=$$?; \
	$(KGRAG) services down; \
	exit $$status

# Services up, a worker, the sample news published and indexed, questions answered.
demo: setup
	$(KGRAG) demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
