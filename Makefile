# Two commands on a fresh machine: `make train` and `make test`.
# Both build .venv with the pinned stack (setup.cfg) when it is missing or older than
# setup.cfg / pyproject.toml, then run inside it.
PYTHON ?= python3.11
VENV ?= .venv
DEFAULT_RECIPE := recipes/zinc_siggate.yaml
RECIPE ?= $(DEFAULT_RECIPE)
# The default recipe's full schedule is the paper's (2000 epochs, 5 seeds: days on a CPU).
# `make train` runs a shortened schedule of it instead: 8 epochs (the cosine schedule and its
# warm-up compressed to fit; 10 took 11.5 min on an idle 2-core machine), seed 0. EPOCHS=N / SEEDS=0-4 change it; EPOCHS= runs the full one.
ifeq ($(RECIPE),$(DEFAULT_RECIPE))
EPOCHS ?= 8
SEEDS ?= 0
endif
EPOCHS ?=
SEEDS ?=
OUT ?= runs
# Offline copies of the benchmark data, when the checkout sits beside a shared/ folder.
ZOO_DATA ?= $(abspath $(wildcard ../shared/data))
export ZOO_DATA ZOO_CACHE ZOO_OFFLINE
PY := $(VENV)/bin/python
STAMP := $(VENV)/.zoo-installed

.PHONY: train test venv clean-venv records

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=/path/to/python3.11"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip<25" "setuptools>=61,<70" wheel
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) -c "import zoo, dgl, torch; print('zoo', zoo.__version__, '| dgl', dgl.__version__, '| torch', torch.__version__)"
	touch $@

train: $(STAMP)
	@$(if $(EPOCHS),echo "make train: $(RECIPE) on a shortened schedule of $(EPOCHS) epochs (EPOCHS= runs the full schedule)")
	$(PY) tools/train.py $(RECIPE) --out $(OUT) $(if $(EPOCHS),--epochs $(EPOCHS)) $(if $(SEEDS),--seeds $(SEEDS))

test: $(STAMP)
	$(PY) -m pytest -q --durations=25 tests

# The small record of every finished seed of the studies README reports (see .gitignore), staged
# for a commit so that a lost machine does not lose them; weights and TensorBoard events stay out.
STUDIES := runs/zinc_cpu runs/cpu_4c runs/ltga16 runs/csbm runs/pretrain
# The transfer table keeps the table, each method's summary and each seed's metrics.
TRANSFER := $(wildcard runs/transfer/transfer_table.json runs/transfer/*/*/metrics.json runs/transfer/*/*/seed*/metrics.json)
records:
	@git add -- $$(find $(STUDIES) -path '*/seed*/metrics.json' -printf '%h\n%h/../config.yaml\n' 2>/dev/null) \
	  $$(find $(STUDIES) -name summary.json 2>/dev/null) $(TRANSFER)
	@git status --short -- $(STUDIES) | grep -c '^A.*metrics.json' | xargs echo "finished seeds newly staged:"

clean-venv:
	rm -rf $(VENV)
