# Everything runs in a local virtual environment (.venv) created from python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install install-test demo test docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## Build the bundled demo task and search it for 2 minutes.
demo: install
	$(BIN)/mcgs demo --out demo_run --time-budget 2m

## Run the test suite (tests needing ../shared/data skip when it is absent, unless CI=true).
## Two pytest workers, one test file each at a time, each worker's candidates on one thread
## (tests/conftest.py): most of a test's wall time is candidate processes starting Python and
## importing pandas/scikit-learn, or waiting on limits, on one core; two files at once use both
## cores (file by file keeps each module's shared search fixture to one worker).
test: install-test
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

## Regenerate the CLI reference (docs/cli.md) from the commands' own help texts.
docs: install
	$(BIN)/typer mcgs.cli utils docs --name mcgs --output docs/cli.md

clean:
	rm -rf $(VENV) demo_run .pytest_cache *.egg-info
