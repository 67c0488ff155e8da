# Two commands set up everything on a fresh machine with Python 3.11:
#   make demo   parse examples/ on the embedded engine -> results.jsonl, print the summary
#   make test   install the package with its test extras and run the test suite
#   make lint       ruff (lint and format check) over the code, tests and scripts; the import contract
#   make typecheck  mypy (strict on the core, the configuration, the model protocol, the journal)
#   make test-fast  the unit tests (no end-to-end runs of the CLI or the VLM), a few minutes
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin

.PHONY: demo test test-fast lint typecheck install dev pro-oracle redis-server chromium cjk-font doc-pdfs clean bench

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

dev: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	$(MAKE) --no-print-directory pro-oracle

# The Pro protocol's conformance oracle (test-only, never shipped): mineru-vl-utils 2.x, the
# client MinerU 4.0.x runs MinerU2.5-Pro with (`mineru-vl-utils>=2.0.5,<3`). It cannot share the
# venv with 0.1.22, the 2509 oracle (same package name), so it goes into its own folder and
# tests/vlm/pro_oracle.py runs it in a subprocess with that folder first on sys.path. --no-deps:
# the packages it imports (httpx, httpx-retries, aiofiles, pillow, pydantic, loguru, tqdm) are
# already in the venv through the dev extra (0.1.22's own dependencies; tqdm via transformers).
PRO_ORACLE := mineru-vl-utils==2.0.7
PRO_ORACLE_DIR := $(VENV)/pro-oracle

pro-oracle: $(BIN)/python
	@test -f $(PRO_ORACLE_DIR)/.$(PRO_ORACLE) || { rm -rf $(PRO_ORACLE_DIR) && \
	  $(BIN)/pip install -q --no-deps --target $(PRO_ORACLE_DIR) '$(PRO_ORACLE)' && touch $(PRO_ORACLE_DIR)/.$(PRO_ORACLE); }

demo: install
	$(BIN)/mineru parse examples/ --out results.jsonl

# The cache tests start a real Redis server on loopback; install it where we can (CI runs as root).
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) \
	      || echo "warning: could not install redis-server; the Redis tests will be skipped"; \
	  else echo "warning: redis-server not found (apt-get install redis-server); the Redis tests will be skipped"; fi; }

# The review page's tests open it in Debian's Chromium (driven by Playwright, which never
# downloads a browser); install it where we can, else those tests are skipped.
chromium:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; the review page's browser tests will be skipped"; \
	  else echo "warning: /usr/bin/chromium not found (apt-get install chromium); the review page's browser tests will be skipped"; fi; }

# The CJK text-layer test needs a CJK font (pdfium draws nothing for a font it does not have).
cjk-font:
	@fc-list 2>/dev/null | grep -qi -E 'wqy|noto.*cjk' || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-wqy-microhei >/dev/null) \
	      || echo "warning: could not install fonts-wqy-microhei; the CJK text-layer test will be skipped"; \
	  else echo "warning: no CJK font (apt-get install fonts-wqy-microhei); the CJK text-layer test will be skipped"; fi; }

# The embedded engine's real-page tests read a page of a Debian manual (libtasn1-doc, 0.6 MB).
doc-pdfs:
	@test -f /usr/share/doc/libtasn1-doc/libtasn1.pdf || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtasn1-doc >/dev/null) \
	      || echo "warning: could not install libtasn1-doc; its real-page test will be skipped"; \
	  else echo "warning: libtasn1-doc not installed (apt-get install libtasn1-doc); its real-page test will be skipped"; fi; }

test: dev redis-server chromium cjk-font doc-pdfs
	$(BIN)/python -m pytest -q

# The unit tests: everything not marked `e2e` (end-to-end runs of the CLI, the pipeline or
# the VLM on real pages; see tests/conftest.py).
test-fast: dev
	$(BIN)/python -m pytest -q -m "not e2e"

# Lint (rules and why in pyproject.toml's [tool.ruff]) and the one-way import flow
# ([tool.importlinter]); CI runs both, and the type check, before the tests.
lint: dev
	$(BIN)/ruff check mineru_cli tests scripts examples
	$(BIN)/ruff format --check mineru_cli tests scripts examples
	$(BIN)/lint-imports

typecheck: dev
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache results.jsonl

# Speed of the VLM runtimes on a full-size random-weight MinerU2.5 model (minutes on 2 cores).
bench: dev
	$(BIN)/mineru bench --repeat 3 --json bench.json
