# Everything runs in a local virtual environment (.venv) created from python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install install-test install-vision demo test docs clean autogluon-env

# Debian and Ubuntu ship venv's pip installer (ensurepip) in a separate package, python3-venv,
# that a machine with python3 and pip need not have: then the environment is created without
# pip, and pip is installed into it by running $(PYTHON)'s own pip inside it (a virtual
# environment is not "externally managed", PEP 668).
$(BIN)/python:
	@if ! err=$$($(PYTHON) -m venv $(VENV) 2>&1); then \
	    rm -rf $(VENV); \
	    if ! $(PYTHON) -c 'import pip' 2>/dev/null; then \
	        echo "$$err" >&2; \
	        echo "error: $(PYTHON) -m venv failed (above) and $(PYTHON) has no pip to fall back on; install pip (Debian/Ubuntu: apt-get install python3-pip python3-venv) or run make with PYTHON=/path/to/python3" >&2; \
	        exit 1; \
	    fi; \
	    echo "note: $(PYTHON) -m venv cannot install pip here (Debian/Ubuntu keep ensurepip in python3-venv); creating $(VENV) without it and installing pip into it from $(PYTHON)'s own pip"; \
	    $(PYTHON) -m venv --without-pip $(VENV) && \
	    PYTHONPATH="$$($(PYTHON) -c 'import os, pip; print(os.path.dirname(os.path.dirname(pip.__file__)))')" \
	        $(BIN)/python -m pip install --quiet --ignore-installed --disable-pip-version-check pip || \
	        { echo "error: could not install pip into $(VENV); install python3-venv (Debian/Ubuntu) and run make again" >&2; rm -rf $(VENV); exit 1; }; \
	fi
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# PyTorch's CPU build for image tasks' networks (the `vision` extra): from the package registry
# when it carries the +cpu build, else from PyTorch's own CPU index; PyPI's plain `torch` is a
# CUDA build of several GB. On a GPU machine install the CUDA build yourself instead.
TORCH_CPU ?= torch==2.13.0+cpu
$(VENV)/.installed-torch: | $(BIN)/python
	$(BIN)/python -c 'import torch' 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_CPU)" || \
	    $(BIN)/python -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu "$(TORCH_CPU)"
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-torch | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## The `vision` extra: image tasks' networks (PyTorch, CPU build).
install-vision: $(VENV)/.installed $(VENV)/.installed-torch
	$(BIN)/python -m pip install --quiet -e ".[vision]"

## Build the bundled demo task and search it for 2 minutes.
demo: install
	$(BIN)/mcgs demo --out demo_run --time-budget 2m

## Run the test suite (tests needing ../shared/data skip when it is absent, unless CI=true).
## Two pytest workers, one test file each at a time, each worker's candidates on one thread
## (tests/conftest.py): most of a test's wall time is candidate processes starting Python and
## importing pandas/scikit-learn, or waiting on limits, on one core; two files at once use both
## cores (file by file keeps each module's shared search fixture to one worker).
test: install-test
	$(BIN)/python -m pytest -q -rfEs -n 2 --dist loadfile --durations=15

## AutoGluon for `mcgs bench --competitors autogluon_medium,autogluon_best`, in its own
## environment (.venv-autogluon): autogluon.tabular pins an older pandas than mcgs, so it never
## shares the engine's packages. LightGBM, CatBoost and XGBoost models; no PyTorch.
AUTOGLUON_VERSION ?= 1.6.3
autogluon-env:
	$(PYTHON) -m venv .venv-autogluon
	.venv-autogluon/bin/python -m pip install --quiet --upgrade pip
	.venv-autogluon/bin/python -m pip install --quiet "autogluon.tabular[lightgbm,catboost,xgboost]==$(AUTOGLUON_VERSION)"

## Regenerate the CLI reference (docs/cli.md) from the commands' own help texts.
docs: install
	$(BIN)/typer mcgs.cli utils docs --name mcgs --output docs/cli.md

clean:
	rm -rf $(VENV) .venv-autogluon demo_run .pytest_cache *.egg-info
