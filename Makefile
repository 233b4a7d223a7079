# scalesweep: the two commands a newcomer needs are `make demo` and `make test`.
# Both create .venv when it is missing and install what they need.

PYTHON ?= python3
VENV ?= .venv
# torch is installed first, with a pin a user can override (e.g. TORCH_SPEC="torch==2.13.0+cu128 --index-url ...").
# An unpinned torch pulls a multi-GB CUDA build on a CPU-only machine.
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,text,dino
PYTEST_ARGS ?=

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test lint typecheck bench clean demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy trials scaling dashboards sweeper api

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/optimizer_step.py

# The whole study on embedded defaults (README, "The two commands"); NO_WAIT=1 exits when done, PROFILE=full for
# the longer study.
demo: $(STAMP)
	$(BIN)/scalesweep demo --profile $(or $(PROFILE),quick) $(if $(NO_WAIT),--no-wait)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
