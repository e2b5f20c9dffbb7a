# Two commands on a fresh machine: `make train` and `make test`.
# Both build .venv with the pinned stack (setup.cfg) when it is missing or older than
# setup.cfg / pyproject.toml, then run inside it.
PYTHON ?= python3.11
VENV ?= .venv
RECIPE ?= recipes/cora_gat.yaml
EPOCHS ?=
SEEDS ?=
OUT ?= runs
# Offline copies of the benchmark data, when the checkout sits beside a shared/ folder.
ZOO_DATA ?= $(abspath $(wildcard ../shared/data))
export ZOO_DATA ZOO_CACHE ZOO_OFFLINE
PY := $(VENV)/bin/python
STAMP := $(VENV)/.zoo-installed

.PHONY: train test venv clean-venv

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=/path/to/python3.11"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip<25" "setuptools>=61,<70" wheel
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) -c "import zoo, dgl, torch; print('zoo', zoo.__version__, '| dgl', dgl.__version__, '| torch', torch.__version__)"
	touch $@

train: $(STAMP)
	$(PY) tools/train.py $(RECIPE) --out $(OUT) $(if $(EPOCHS),--epochs $(EPOCHS)) $(if $(SEEDS),--seeds $(SEEDS))

test: $(STAMP)
	$(PY) -m pytest -q tests

clean-venv:
	rm -rf $(VENV)
