# The two set-up commands of the README are `make run` and `make test`; each creates or
# updates the local virtual environment .venv (plain venv + pip) before doing its job.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CORES  ?= 2

.PHONY: run test lint bench docs venv clean-results

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

# The documentation site (mkdocs.yml), into site/; --strict: a warning (a broken link, a docstring
# the API reference cannot read) fails the build. It needs only the `docs` extra's pins, installed
# into .venv by name, so an edit of pyproject.toml re-installs nothing else.
docs:
	@test -x $(PY) || $(MAKE) venv
	$(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"]))' \
		| xargs $(PY) -m pip install --quiet
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean-results:
	rm -rf results
