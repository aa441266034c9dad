# The two set-up commands of the README are `make run` and `make test`; each creates or
# updates the local virtual environment .venv (plain venv + pip) before doing its job.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CORES  ?= 2

.PHONY: run test lint bench venv clean-results

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m focalcal build-kernels || true  # compiled once, shared by every checkout; the eager path if it fails
	@touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES) --profile profiles/default

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist worksteal tests

lint: $(STAMP)
	$(VENV)/bin/ruff check

bench: $(STAMP)
	$(PY) -m bench

clean-results:
	rm -rf results
