# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rankkit-installed
PIP := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: install test test-fast demo bench clean

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

# The fast subset (no JVM, no OpenVINO, no slow modules; markers in tests/conftest.py): under a minute.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not java and not openvino" tests

demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash examples/demo.sh

clean:
	rm -rf $(VENV) build *.egg-info
