# The two set-up commands of the README are `make run` and `make test`; each creates or
# updates the local virtual environment .venv (plain venv + pip) before doing its job.
# .venv holds the reproduction's exact versions: requirements/lock.txt, every package pinned
# with its hashes (`make lock` writes it from pyproject.toml's ranges), then focalcal itself,
# editable, with nothing more resolved.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LOCK   := requirements/lock.txt
CORES  ?= 2

.PHONY: run test lint bench docs docs-serve venv lock package-test clean-results

venv: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m focalcal build-kernels || true  # compiled once, shared by every checkout; the eager path if it fails
	@touch $(STAMP)

# Re-resolve the lock after an edit of pyproject.toml's requirements: uv keeps every version the
# lock already holds unless a range excludes it (`make lock UPGRADE=1` takes the newest instead).
# One platform, the reproduction's: CPython 3.11 on x86_64 Linux.
lock:
	@test -x build/lock-tools/bin/uv || ($(PYTHON) -m venv build/lock-tools && build/lock-tools/bin/pip install --quiet 'uv>=0.9')
	build/lock-tools/bin/uv pip compile pyproject.toml --extra all --extra dev --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 $(if $(UPGRADE),--upgrade) \
		--output-file $(LOCK)

run: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES) --profile profiles/default

# The tests, and the examples of the API reference as doctests (every public name of the four
# library packages has one: tests/test_api_docstrings.py).
DOCTESTS := src/focalcal/metrics src/focalcal/calibration src/focalcal/losses src/focalcal/theory

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist worksteal --durations=20 tests --doctest-modules $(DOCTESTS)

lint: $(STAMP)
	$(VENV)/bin/ruff check

bench: $(STAMP)
	$(PY) -m bench

# The documentation site (mkdocs.yml), into site/; --strict: a warning (a broken link, a docstring
# the API reference cannot read) fails the build. Its Python packages are the `docs` extra, in the
# lock; its front-end files (KaTeX, offline search) come from npm by docs/package-lock.json.
docs: $(STAMP) docs/node_modules/.package-lock.json
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

docs/node_modules/.package-lock.json: docs/package-lock.json
	npm ci --prefix docs --no-audit --no-fund --silent

# The site with live reload while editing, at http://127.0.0.1:8000/
docs-serve: $(STAMP) docs/node_modules/.package-lock.json
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve -a 127.0.0.1:8000

# The package as users get it: the wheel and sdist built and checked, then installed into clean
# environments (core only; the lowest and the newest versions pyproject.toml admits) where the
# library's tests and doctests run. CI runs it; see .ci/package_test.sh.
package-test:
	bash .ci/package_test.sh

clean-results:
	rm -rf results
