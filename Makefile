# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rankkit-installed
PIP := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: install test test-fast durations demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# CPU torch first, pinned, so nothing later pulls a CUDA build.
	$(PIP) install -q -c constraints.txt "torch==2.13.0"
	$(PIP) install -q -c constraints.txt -e ".[dev,bench]"
	touch $(STAMP)

# Lint and type-check first (seconds), then the suite.
test: $(STAMP)
	$(BIN)/ruff check rankkit tests bench examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q tests

# The fast subset (no JVM, no OpenVINO, no module measured at 1.2 s of CPU or more in tests/durations.json): under
# 30 s of CPU, enforced by pytest --fast (tests/conftest.py). Bytecode is cached here whatever the shell says:
# recompiling rankkit and the test modules (and pytest's assertion rewriting) every run costs ~8 s of CPU.
test-fast: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q --fast tests

# Every test module's CPU time, written to tests/durations.json (commit it): what decides the fast subset.
durations: $(STAMP)
	RANKKIT_RECORD_DURATIONS=1 $(BIN)/python -m pytest -q tests

demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash examples/demo.sh

clean:
	rm -rf $(VENV) build *.egg-info
