# Two entry points: `make demo` (the product on the built-in virtual lab) and `make test`.
# Both work on a fresh Debian 12 machine as root: they create .venv and install what they need.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit lab-tests deps system-deps venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

system-deps:
	scripts/ensure-system-deps.sh

deps: venv system-deps

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -m "not lab"

# Unit tests on every core (they share nothing); lab tests that measure no data-plane rate or
# timing (marker lab_parallel) two files at a time; the others one at a time, alone.
test: deps lint typecheck
	$(BIN)/pytest -m "not lab" -n auto --durations=10
	$(BIN)/pytest -m "lab and lab_parallel" -n 2 --dist loadfile --durations=10
	$(BIN)/pytest -m "lab and not lab_parallel" --durations=25

demo: deps
	scripts/demo.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
