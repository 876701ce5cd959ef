# The two commands of the contract: `make run` and `make test`; `make lint` is the style and type gate
# (ruff, and mypy --strict on gateway/, translators/ and plugins/ as configured in pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test bench lint install

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

bench: $(STAMP)
	$(BIN)/python -m bench

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
