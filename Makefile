# Two commands set up everything on a fresh machine with Python 3.11:
#   make demo   parse examples/ on the embedded engine -> results.jsonl, print the summary
#   make test   install the package with its test extras and run the test suite
#   make lint   ruff over the code, the tests and the scripts
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin

.PHONY: demo test lint install dev redis-server clean bench

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

dev: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'

demo: install
	$(BIN)/mineru parse examples/ --out results.jsonl

# The cache tests start a real Redis server on loopback; install it where we can (CI runs as root).
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) \
	      || echo "warning: could not install redis-server; the Redis tests will be skipped"; \
	  else echo "warning: redis-server not found (apt-get install redis-server); the Redis tests will be skipped"; fi; }

test: dev redis-server
	$(BIN)/python -m pytest -q

# Lint (rules and why in pyproject.toml's [tool.ruff]); CI runs it before the tests.
lint: dev
	$(BIN)/ruff check mineru_cli tests scripts examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache results.jsonl

# Speed of the VLM runtimes on a full-size random-weight MinerU2.5 model (minutes on 2 cores).
bench: dev
	$(BIN)/mineru bench --repeat 3 --json bench.json
