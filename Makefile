# make demo: set up .venv and run NUTS on a GP probit classifier (Pima, first 100 rows).
# make test: set up .venv and run the test suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHARED_DATA := $(abspath ../shared/data)
GPDSL_DATA_MIRROR ?= $(if $(wildcard $(SHARED_DATA)/SOURCES.md),$(SHARED_DATA),)
export GPDSL_DATA_MIRROR
DEMO := demo_out
# ArviZ 1.x needs Python >= 3.12: when one is installed, the results module is also tested there.
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) \
	$(shell python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null))
ARVIZ1_STAMP := .venv312/.installed

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p $(DEMO)
	$(BIN)/python examples/pima_demo_data.py --rows 100 -o $(DEMO)/pima100.json
	$(BIN)/gpdsl check models/gp_classification.gpm
	$(BIN)/gpdsl sample models/gp_classification.gpm --data $(DEMO)/pima100.json --method nuts \
		--chains 4 --warmup 500 --draws 500 --seed 1 --out $(DEMO)/pima_probit.nc
	$(BIN)/gpdsl summary $(DEMO)/pima_probit.nc --vars sigma tau
	$(BIN)/gpdsl plot $(DEMO)/pima_probit.nc --kind trace --vars sigma tau -o $(DEMO)/pima_trace.png

$(ARVIZ1_STAMP): pyproject.toml
	$(PYTHON312) -m venv .venv312
	.venv312/bin/python -m pip install --quiet --upgrade pip
	.venv312/bin/python -m pip install --quiet numpy scipy xarray netCDF4 matplotlib pandas pytest 'arviz>=1'
	.venv312/bin/python -m pip install --quiet --no-deps -e .
	touch $@

test: $(STAMP) $(if $(PYTHON312),$(ARVIZ1_STAMP))
	$(BIN)/python -m pytest -q -m "not slow"
	$(if $(PYTHON312),.venv312/bin/python -m pytest -q tests/test_results.py tests/test_results_arviz_versions.py)

clean:
	rm -rf $(VENV) .venv312 $(DEMO) .pytest_cache
