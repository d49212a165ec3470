# loom_nb: `make demo` runs a scripted agent end to end; `make test` runs every check.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv servers litellm test-proxies demo test check fmt lint pytest lab bench browser clean notebooks binder-check screens postgres docs

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Third-party OpenAI-compatible servers the tests start on 127.0.0.1 (npm, pinned by the lockfile).
SERVERS_STAMP := tests/servers/node_modules/.installed
$(SERVERS_STAMP): tests/servers/package.json tests/servers/package-lock.json
	npm ci --prefix tests/servers --no-audit --no-fund
	touch $(SERVERS_STAMP)

# LiteLLM's proxy (tests/providers/test_litellm_reasoning.py): its own venv, every package pinned.
LITELLM_VENV := tests/servers/litellm/.venv
LITELLM_STAMP := $(LITELLM_VENV)/.installed
$(LITELLM_STAMP): tests/servers/litellm-requirements.txt
	rm -rf $(LITELLM_VENV) && python3 -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/pip install -q --no-deps -r tests/servers/litellm-requirements.txt
	touch $(LITELLM_STAMP)

servers: $(SERVERS_STAMP)

# The tests against LiteLLM's proxy (marked proxy): left out of `make test`, whose 20-minute budget
# cannot hold the proxy's install (~700 MB, 2-3 minutes) and start-up (20-60 s).
litellm: $(LITELLM_STAMP)
test-proxies: venv litellm
	$(VENV)/bin/pytest -m proxy tests

demo: venv
	$(VENV)/bin/loom-nb demo $$([ -t 0 ] || echo --yes)

lint: venv
	$(VENV)/bin/ruff check loom_nb tests bench docs/site_hooks.py
	$(VENV)/bin/ruff format --check loom_nb tests bench docs/site_hooks.py
	$(VENV)/bin/mypy

# Format the code in place (make lint checks it is formatted).
fmt: venv
	$(VENV)/bin/ruff format loom_nb tests bench docs/site_hooks.py
	$(VENV)/bin/ruff check --fix loom_nb tests bench docs/site_hooks.py

# The edit loop: lint and every test not marked slow or browser (no notebooks, no binder check).
check: lint postgres
	$(VENV)/bin/pytest -q -m "not slow and not browser" tests

browser:
	@command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)

# The key screens of the live view (JupyterLab in headless Chromium), as PNGs the README shows.
screens: venv browser
	$(PY) -m tests.notebook.screens docs/screens

# The PostgreSQL server the journal tests use (LOOM_TEST_POSTGRES): started here if it is installed
# and stopped; the test session itself fails at once, with a message, when it cannot reach it.
LOOM_TEST_POSTGRES ?= postgresql://postgres@127.0.0.1:5432/test
export LOOM_TEST_POSTGRES
postgres: venv
	@$(PY) -c "import psycopg, os; psycopg.connect(os.environ['LOOM_TEST_POSTGRES'], connect_timeout=3).close()" 2>/dev/null \
	  || { command -v pg_ctlcluster >/dev/null && pg_ctlcluster 15 main start 2>/dev/null; sleep 2; } || true
	@$(PY) -c "import psycopg, os; psycopg.connect(os.environ['LOOM_TEST_POSTGRES'], connect_timeout=3).close()" \
	  || { echo "PostgreSQL is not reachable at $$LOOM_TEST_POSTGRES: start PostgreSQL 15 there or set LOOM_TEST_POSTGRES"; exit 1; }

pytest: venv servers postgres
	$(VENV)/bin/pytest

test: lint browser servers postgres pytest binder-check

# The documentation site (mkdocs.yml) into site/: the README, the guides (docs/*.md), the tutorials
# with their stored outputs and the API reference from the docstrings; --strict fails on a broken
# link or reference (make test builds it too: tests/test_docs_site.py).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lab: venv
	$(VENV)/bin/jupyter lab notebooks

# Re-execute every tutorial in place (offline: API keys unset), storing the outputs nbval compares.
notebooks: venv
	cd notebooks && for nb in [0-9]*.ipynb; do \
	  env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY JUPYTER_PLATFORM_DIRS=1 \
	    ../$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace "$$nb" || exit 1; \
	done; ../$(VENV)/bin/python strip_metadata.py [0-9]*.ipynb

# Install from binder/requirements.txt alone in a fresh venv and run every tutorial there.
binder-check:
	binder/check.sh

bench: venv
	for b in bench/*.py; do case $$b in *_workload.py) continue;; esac; echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache tests/servers/node_modules tests/servers/litellm site
