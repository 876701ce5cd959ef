# The two commands of the contract: `make run` and `make test`; `make lint` is the style and type gate
# (ruff, and mypy --strict on gateway/, translators/ and plugins/ as configured in pyproject.toml) and
# the import contracts of .importlinter (lint-imports; the examples' packages on its PYTHONPATH).
PY ?= python3
# Python caches compiled modules (__pycache__, ignored by git) even where the environment turned it
# off: the suite starts hundreds of interpreters (test workers, `gateway serve`), and compiling the
# gateway and the tests again in each cost `make test` about 12 s of CPU per process that collects.
export PYTHONDONTWRITEBYTECODE :=
VENV := .venv
BIN := $(VENV)/bin
# Reinstalled when the dependencies or their pins change (the stamp's name is their checksum).
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

.PHONY: run test bench bench-compare bench-servers lint install lock

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Every extra (test: the suite; dev: lint and types; bench), at the versions of constraints.txt.
$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,dev,bench]'
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

# `make lock` regenerates constraints.txt: a scratch virtualenv takes the newest versions
# pyproject.toml's ranges allow for the project and all its extras, and pip freeze pins them
# (the project itself left out). Then `make lint test`, and commit constraints.txt if they pass.
lock:
	@scratch=$$(mktemp -d) && trap 'rm -rf "$$scratch"' EXIT && \
	$(PY) -m venv "$$scratch" && \
	"$$scratch/bin/python" -m pip install -q --upgrade pip && \
	"$$scratch/bin/python" -m pip install -q -e '.[test,dev,bench]' && \
	{ sed -n '/^#/p' constraints.txt; \
	  "$$scratch/bin/python" -m pip freeze --all --exclude-editable | grep -v '^pip=='; } > constraints.txt.new && \
	mv constraints.txt.new constraints.txt
	@echo "constraints.txt regenerated: git diff constraints.txt, then make lint test"

run: $(STAMP)
	$(BIN)/gateway serve --config config/gateway.yaml

# The suite on two pytest-xdist workers per core (TEST_WORKERS=0 runs it in this process; the tests
# that use the machine's Redis run in one group, in turn: tests/conftest.py). About half of a test's
# time is waiting, so two per core finish sooner than one (docs/performance.md, "The test suite").
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

# `make bench` writes bench/results/latest.md (about 15 minutes; QUICK=1: about 3); it needs wrk
# (apt-get install -y wrk). `make bench-compare` adds the LiteLLM proxy from its own virtualenv
# (bench/.litellm-venv, never a dependency of the gateway). `make bench-servers`: the floor and the
# gateway on every supported ASGI server (bench/results/servers.md).
BENCH_ENV := BENCH_QUICK=$(QUICK)

bench: $(STAMP)
	$(BENCH_ENV) $(BIN)/python -m bench

bench/.litellm-venv/bin/litellm:
	$(PY) -m venv bench/.litellm-venv
	bench/.litellm-venv/bin/python -m pip install -q 'litellm[proxy]'

bench-compare: $(STAMP) bench/.litellm-venv/bin/litellm
	$(BENCH_ENV) BENCH_COMPARE=1 $(BIN)/python -m bench

bench-servers: $(STAMP)
	$(BENCH_ENV) $(BIN)/python -m bench.servers

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	PYTHONPATH=examples/ollama_plugin:examples/sample_plugin $(BIN)/lint-imports
