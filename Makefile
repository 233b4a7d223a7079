# scalesweep: the two commands a newcomer needs are `make demo` and `make test` (README, "The two commands").
# Both create .venv when it is missing and install what they need.

PYTHON ?= python3
VENV ?= .venv
# torch is installed first, with a pin a user can override. PyPI's Linux torch is the CUDA build (several GB);
# TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu gets the CPU build, .../whl/cu128 a CUDA one (README).
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
# `all` is the sweeper, the service and the figures (pyproject.toml); `make test` and `make demo` need them all.
EXTRAS ?= all,dev,text,dino
PYTEST_ARGS ?=
# `make test` runs the suite as two pytest sessions side by side on disjoint files (tests/lanes.py, docs/testing.md);
# LANES=1 runs it as one.
LANES ?= 2
# Free space needed to create .venv (CPU torch and the extras take about 2 GB).
MIN_FREE_GB ?= 3

# Python writes its bytecode caches (__pycache__/, ignored by git) even where the environment says not to, as some
# container images do (PYTHONDONTWRITEBYTECODE=1; an empty value lets Python write them): without them pytest
# rewrites the asserts of every test module on every run. Collecting the suite (`.venv/bin/python -m pytest
# --collect-only -q`) took 21.7 s with the variable set and 11.8 s from the caches (2-core AMD EPYC, 2026-12-04).
export PYTHONDONTWRITEBYTECODE :=

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# What the stamp records: changing any of these reinstalls on the next make.
TORCH_LINE := $(strip $(TORCH_SPEC) $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)))
INSTALL_LINE := torch: $(TORCH_LINE) | extras: $(EXTRAS)

# A recipe that fails deletes its target, so a half-made stamp is never trusted.
.DELETE_ON_ERROR:
.PHONY: venv test test-fast test-deploy deploy-local lint typecheck bench rederive clean demo FORCE

# Prerequisites, checked only when .venv must be (re)built, each failure one line naming what to install.
ifneq ($(shell cat $(STAMP) 2>/dev/null),$(INSTALL_LINE))
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),test)),)
ifeq ($(shell command -v $(PYTHON) 2>/dev/null),)
$(error $(PYTHON) not found: install Python 3.11 or newer (Debian/Ubuntu: apt-get install python3 python3-venv), or pass PYTHON=/path/to/python3.11)
endif
ifneq ($(shell $(PYTHON) -c 'import sys; print(sys.version_info >= (3, 11))'),True)
$(error $(PYTHON) is Python $(shell $(PYTHON) -c 'import platform; print(platform.python_version())'); scalesweep needs 3.11 or newer: install it and pass PYTHON=/path/to/python3.11)
endif
ifneq ($(shell $(PYTHON) -c 'import venv, ensurepip; print("ok")' 2>/dev/null),ok)
$(error $(PYTHON) has no working venv module: install it (Debian/Ubuntu: apt-get install python3-venv, or python3.X-venv for your version))
endif
ifeq ($(wildcard $(BIN)/pip),)
FREE_GB := $(shell df -Pk . 2>/dev/null | awk 'NR==2 {print int($$4 / 1048576)}')
ifneq ($(shell [ -n "$(FREE_GB)" ] && [ "$(FREE_GB)" -lt "$(MIN_FREE_GB)" ] && echo short),)
$(error $(FREE_GB) GB free here; creating $(VENV) needs about $(MIN_FREE_GB) GB (more with PyPI's CUDA torch): free some disk space)
endif
endif
endif
$(STAMP): FORCE
endif

# Nothing is trusted until the last line: the stamp is removed first and written last, a failed venv creation
# removes the half-made .venv, a failed install leaves no stamp (the next make installs again), and changed torch
# settings rebuild .venv from scratch (pip would keep an installed torch==X whatever its build).
$(STAMP): pyproject.toml
	@rm -f $(STAMP)
	@if [ -d $(VENV) ] && [ "$$(cat $(VENV)/.torch 2>/dev/null)" != "$(TORCH_LINE)" ]; then \
	  echo "$(VENV) has no torch installed as $(TORCH_LINE): rebuilding it"; rm -rf $(VENV); fi
	@if [ ! -x $(BIN)/pip ]; then \
	  rm -rf $(VENV); \
	  $(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet --upgrade pip \
	    || { rm -rf $(VENV); echo "creating $(VENV) failed (see above); it was removed" >&2; exit 1; }; fi
	@if [ ! -f $(VENV)/.torch ]; then \
	  echo "installing $(TORCH_LINE)"; \
	  $(BIN)/pip install --quiet $(TORCH_LINE) \
	    || { echo "installing torch failed (see above); run make again to retry" >&2; exit 1; }; \
	  printf '%s\n' "$(TORCH_LINE)" > $(VENV)/.torch; fi
	@echo "installing scalesweep[$(EXTRAS)]"
	@$(BIN)/pip install --quiet -e ".[$(EXTRAS)]" \
	  || { echo "installing the project failed (see above); run make again to retry" >&2; exit 1; }
	@$(BIN)/python -m trials.optim._native
	@printf '%s\n' "$(INSTALL_LINE)" > $(STAMP).tmp && mv $(STAMP).tmp $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy trials scaling dashboards sweeper api

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python tests/lanes.py --lanes $(LANES) --durations=20 $(PYTEST_ARGS)

# The contributor's loop (docs/testing.md): ruff and the unit tests, under 3 minutes on 2 cores. Tests marked
# `integration` (a live service, Ray, a driver or MLflow server process, a trained trial) are left to `make test`.
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -m "not integration" -q $(PYTEST_ARGS)

# The compose topology as local processes on loopback (docs/deployment.md, "Running the deployment locally"):
# PostgreSQL, an MLflow server, a Ray head and a worker, the service; prints the URLs, Ctrl-C stops everything.
# Needs PostgreSQL's server binaries (Debian: postgresql) and the deploy extra (EXTRAS=all,dev,text,dino,deploy).
deploy-local: $(STAMP)
	$(BIN)/python -m api.deploy_local

# The tests on that topology (tests/deploy, not part of `make test`): a sweep over REST, PostgreSQL stopped
# mid-sweep, the migrations on PostgreSQL.
test-deploy: $(STAMP)
	$(BIN)/python -m pytest tests/deploy --durations=0 $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/optimizer_step.py

# The study pages' tables (docs/studies/) re-derived from the raw records committed under benchmarks/studies/
# (docs/testing.md, "Study records and `make rederive`"): prints them and exits 1 naming every printed figure that differs from its records.
rederive: $(STAMP)
	$(BIN)/python benchmarks/rederive.py

# The whole study on embedded defaults (README, "The two commands"); NO_WAIT=1 exits when done, PROFILE=full for
# the longer study.
demo: $(STAMP)
	$(BIN)/scalesweep demo --profile $(or $(PROFILE),quick) $(if $(NO_WAIT),--no-wait)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
