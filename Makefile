# Two entry points: `make demo` (the product on the built-in virtual lab) and `make test`.
# Both work on a fresh Debian 12 machine as root: they create .venv and install what they need.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The docs site's address (mkdocs.yml site_url; the alert rules' runbook links use the default).
DOCS_URL ?= https://roce-fabric-agent.readthedocs.io/en/latest/

.PHONY: demo test drill lint typecheck unit lab-tests deps system-deps venv clean docs docs-check

# The editable install compiles the hot paths (twin, lab switch) with mypyc (setup.py);
# `require`: a compile that fails fails the build instead of falling back to pure Python.
$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	ROCE_AGENT_COMPILE=require $(BIN)/python -m pip install --quiet -e '.[dev]'
	@# The editable install compiled the hot paths in place: one timestamp for both, so the
	@# rule below does not compile them a second time.
	touch $(STAMP) $(COMPILED)

# The compiled modules again whenever a source of theirs changed (lossless/compiled.py lists
# them; the digest file is what the build compiled).
COMPILED := lossless/compiled.sha256
COMPILED_SOURCES := $(shell $(PYTHON) -c 'import runpy; m = runpy.run_path("lossless/compiled.py"); \
	print(*(n.replace(".", "/") + ".py" for n in m["COMPILED_MODULES"]), "lossless/compiled.py")')
$(COMPILED): $(STAMP) $(COMPILED_SOURCES)
	ROCE_AGENT_COMPILE=require $(BIN)/python setup.py --quiet build_ext --inplace
	touch $(COMPILED)

venv: $(STAMP) $(COMPILED)

system-deps:
	scripts/ensure-system-deps.sh

deps: venv system-deps

# ruff, and the complexity gate ruff cannot be: radon's count (boolean operators included) at
# most 15 a function, and a reason on every noqa (scripts/complexity.py).
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/complexity.py

typecheck: venv
	$(BIN)/mypy

# The reference pages are regenerated from the code, then the site is built into site/ in
# strict mode: a broken link or anchor, or a page missing from the nav, fails the build.
docs: venv
	@case '$(DOCS_URL)' in http://*/|https://*/) ;; \
	  *) echo "error: DOCS_URL: Expected: an http(s) URL ending in /. Actual: '$(DOCS_URL)'" >&2; \
	     exit 2;; esac
	$(BIN)/python scripts/gen_docs.py
	ROCE_AGENT_DOCS_URL='$(DOCS_URL)' NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# What `make test` runs: the committed reference pages are current and the site builds.
docs-check: venv
	$(BIN)/python scripts/gen_docs.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

unit: venv
	$(BIN)/pytest -m "not lab"

# The tests that run again on the Python source of the compiled modules (the fallback where no
# compiler was at hand): the shared model, the engine and the lab switch driven in-process
# (test_compiled.py compares both paths itself).
PURE_TESTS := tests/unit/test_lossless_*.py tests/unit/test_dcqcn.py \
	tests/unit/test_twin_engine.py tests/unit/test_twin_exact_time.py \
	tests/unit/test_twin_recovery.py tests/unit/test_twin_recovery_messages.py \
	tests/unit/test_twin_collectives.py tests/unit/test_vswitch_faults.py
# Two long scenario sweeps (80 s of the pass's 100 on the source) stay compiled-only:
# tests/unit/test_compiled.py compares both paths on seeded random scenarios instead.
PURE_SKIP := not (every_scenario_runs_and_the_books_balance or tune_all_to_all_runs)

# Unit tests four at a time (they share nothing, and many wait on a peer or a timer); lab tests
# that measure no data-plane rate or timing (marker lab_parallel) two modules at a time; the
# others one at a time, alone. The fault drill drills each row once, the platforms in turn;
# `make drill` runs its whole matrix.
test: deps lint typecheck docs-check
	$(BIN)/pytest -m "not lab" -n 4 --durations=10
	ROCE_AGENT_PURE_PYTHON=1 $(BIN)/pytest -m "not lab" -n auto -k "$(PURE_SKIP)" $(PURE_TESTS)
	ROCE_DRILL=rotated $(BIN)/pytest -m "lab and lab_parallel" -n 2 --dist loadgroup --durations=10 tests/lab
	$(BIN)/pytest -m "lab and not lab_parallel" --durations=25 tests/lab

# Every fault-drill row on every platform, the matrix printed at the end.
drill: deps
	$(BIN)/pytest tests/lab/test_fault_drill.py

demo: deps
	scripts/demo.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site build $(COMPILED)
	find agent lab lossless -name '*.so' -delete
	rm -f *__mypyc*.so
