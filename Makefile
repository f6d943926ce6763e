# The two front-door commands (README): `make demo` and `make test`. Both create the
# virtual environment on first use, so a fresh clone needs only Python 3.11+ and pip.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CODE   := src tests bench tools
# The FinOps Foundation's focus-validator checks the FOCUS export in the tests. It needs
# Python 3.12+ and dependencies gpufleet's own dev tools refuse, so it has its own venv, made
# with PYTHON312, else python3.13, else pyenv's first 3.12 or newer.
PYTHON312 ?= python3.12
FOCUS  := $(VENV)/focus-validator/.installed-stamp

.PHONY: demo test docs lint typecheck layers unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

## demo: simulate the bundled openb workload with kube-default, best-fit and fgd
demo: $(STAMP)
	$(BIN)/gpufleet simulate

## test: every check — ruff, mypy strict, import-linter layer contracts, the docs site, pytest
test: lint typecheck layers docs unit

## docs: the documentation site from docs/ (mkdocs.yml), built strictly: a broken link fails
# (not --quiet: it drops the warnings that --strict counts, and a broken link would pass)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

$(FOCUS): $(STAMP)
	py=$$(for c in $(PYTHON312) python3.13; do \
	        $$c -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && command -v $$c && break; \
	      done); \
	[ -n "$$py" ] || py=$$(ls -d "$$(pyenv root 2>/dev/null)"/versions/3.1[2-9]*/bin/python3 2>/dev/null | head -1); \
	[ -n "$$py" ] || { echo "focus-validator needs Python 3.12 or newer: set PYTHON312=/path/to/python3.12" >&2; exit 1; }; \
	"$$py" -m venv $(VENV)/focus-validator
	$(VENV)/focus-validator/bin/python -m pip install --quiet 'focus-validator==2.2.1' 'pyarrow<22'
	touch $@

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# The tests run a real Prometheus and chromium (Debian's packages): installed if missing.
unit: $(STAMP) $(FOCUS)
	tools/debian-packages
	$(BIN)/python -m pytest -n auto

## bench: the benchmark scripts (they rewrite their sections of docs/benchmarks.md)
bench: $(STAMP)
	$(BIN)/python -m bench.openb_speed
	$(BIN)/python -m bench.cycle
	$(BIN)/python -m bench.events
	$(BIN)/python -m bench.watch
	$(BIN)/python -m bench.http1
	$(BIN)/python -m bench.topology
	$(BIN)/python -m bench.mig
	$(BIN)/python -m bench.dra
	$(BIN)/python -m bench.openb_headroom
	$(BIN)/python -m bench.openb_gpufleet
	$(BIN)/python -m bench.openb_fidelity
	$(BIN)/python -m bench.sweep

clean:
	rm -rf $(VENV) gpufleet-report .mypy_cache .ruff_cache .pytest_cache .hypothesis
