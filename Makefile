# The two commands of the contract: `make run` and `make test`; `make lint` is the style and type gate
# (ruff, and mypy --strict on gateway/, translators/ and plugins/ as configured in pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test bench bench-compare bench-servers lint install

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/gateway serve --config config/gateway.yaml

test: $(STAMP)
	$(BIN)/python -m pytest

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
