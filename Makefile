# mixgcn — every target bootstraps .venv on a fresh machine by itself.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# test workers: simulator builds and simulations of different designs run side by side
JOBS   ?= 2
PYTEST := $(PY) -m pytest -W error

.PHONY: setup test test-slow test-fast sim formal mutants demo demo-mpi verilog board bench bench-quick \
	bench-boards bench-peers lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

# The whole suite but its slow cases (warnings are errors); the 15 slowest tests listed,
# to see what keeps it above ten minutes on two cores (simulator builds, a board build).
test: $(STAMP)
	$(PYTEST) -n $(JOBS) --dist loadgroup -m "not slow" --durations 15

# The slow cases: larger systems of simulated chips (a quick one of each is in test).
test-slow: $(STAMP)
	$(PYTEST) -n $(JOBS) --dist loadgroup -m slow

# Everything but the HDL simulations: about a minute.
test-fast: $(STAMP)
	$(PYTEST) -m "not sim"

# Only the HDL simulations (cocotb on the generated Verilog, the simulated chip).
sim: $(STAMP)
	$(PYTEST) -n $(JOBS) --dist loadgroup -m sim

# Only the formal proofs (SymbiYosys, k-induction): the stream rules and invariants.
formal: $(STAMP)
	$(PYTEST) -n $(JOBS) -m formal

# Mutation testing: each mutant of hdl/ listed in sim/verify/mutants.py, on a scratch
# copy, against the tests that should kill it; fails if any survives.
mutants: $(STAMP)
	$(PY) -m mixgcn.sim.verify.mutants

# The main job: train on the simulated chip (the first run also builds it).
demo: $(STAMP)
	$(VENV)/bin/mixgcn train --backend rtl --dataset synthetic --epochs 50 \
		--json build/demo.json

# Mixture of Parallelism over MPI: one simulated chip per rank (mpiexec comes with the
# mpich wheel), on the built-in graph. CHIPS=P to change.
CHIPS ?= 2
demo-mpi: $(STAMP)
	$(VENV)/bin/mpiexec -n $(CHIPS) $(VENV)/bin/mixgcn train --backend rtl --chips $(CHIPS) \
		--dataset synthetic --epochs 20 --json build/demo-mpi.json

# Every preset's Verilog, linted; CHIPS=P [FABRIC=serial] also a system of P chips of
# each chip preset joined by an exchange fabric.
FABRIC ?= crossbar
verilog: $(STAMP)
	$(PY) -m mixgcn.gen.verilog --out build/verilog --lint --fabric $(FABRIC) \
		--chips $(if $(filter command line environment,$(origin CHIPS)),$(CHIPS),1)

# A bitstream for an FPGA board with the open toolchain (YoWASP, from PyPI), and its
# report from the tools: make board BOARD=ulx3s-85f CHIP=ecp5 [CHIPS=2 [FABRIC=serial]]
# [SEED=N] [TOP=link] [PNR_MINUTES=M] (serial: a chip per board, a bitstream each; SEED:
# nextpnr's placement seed; TOP=link: the chip behind its host link on the board's DRAM,
# ULX3S; PNR_MINUTES: stop place and route after M minutes, saying how far it got).
# Large chips take tens of minutes (place
# and route is single-threaded WebAssembly).
BOARD ?= ulx3s-85f
CHIP  ?= ecp5
board: $(STAMP)
	$(VENV)/bin/mixgcn board --board $(BOARD) --chip $(CHIP) --fabric $(FABRIC) \
		--chips $(if $(filter command line environment,$(origin CHIPS)),$(CHIPS),1) \
		$(if $(SEED),--seed $(SEED)) $(if $(TOP),--top $(TOP)) \
		$(if $(PNR_MINUTES),--pnr-minutes $(PNR_MINUTES))

# The bench: measures, never asserts; writes bench/results.json, results.txt,
# RESULTS.md and PNG plots, all from this run. bench-quick: the sections that take a
# few minutes (Cora on the chip, a Cora epoch per preset, the performance model,
# exploration).
bench: $(STAMP)
	$(PY) -m mixgcn.host.bench --out bench/results.json

bench-quick: $(STAMP)
	$(PY) -m mixgcn.host.bench --quick --out bench/results.json

# The slow tier of the bench: every board x preset of the table in docs/boards.md built,
# and the chip mixgcn explore chooses for Cora on the ECP5-85F (hours).
bench-boards: $(STAMP)
	$(PY) -m mixgcn.host.bench --only boards --out bench/boards.json

# PyTorch Geometric's GCN on this CPU beside the golden model and the chip's implied
# time (its RTL cycles over the Fmax of make board CHIP=ecp5's report): installs the
# peers extra (torch) first.
bench-peers: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,peers]'
	$(PY) -m mixgcn.host.bench --only peers --out bench/peers.json

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf build bench/*.json bench/*.txt bench/*.md bench/*.png .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +
