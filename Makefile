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

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache
