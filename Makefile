# mixgcn — every target bootstraps .venv on a fresh machine by itself.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Cora for tests, benchmarks and demos: ../shared/data/planetoid unless MIXGCN_DATA says.
export MIXGCN_DATA ?= $(abspath ../shared/data/planetoid)

.PHONY: setup test demo verilog sim bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

test: $(STAMP)
	$(PY) -m pytest -W error

# The main job: train on the simulated engines (the first run also builds them).
demo: $(STAMP)
	$(VENV)/bin/mixgcn train --backend rtl --dataset synthetic --epochs 50 \
		--json build/demo.json

verilog: $(STAMP)
	$(PY) -m mixgcn.gen.verilog --out build/verilog --lint

sim: $(STAMP)
	$(PY) -m pytest -W error -m sim

bench: $(STAMP)
	$(PY) -m mixgcn.host.bench --out bench/results.json

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf build sim_build bench/results.json bench/results.txt .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +
