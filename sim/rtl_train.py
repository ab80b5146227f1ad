"""cocotb module behind ``mixgcn train --backend rtl``: trains a GCN with every kernel on
the simulated chip (:mod:`mixgcn.sim.rtl_backend`). The training loop runs in a
thread (``cocotb.bridge``); it blocks on each kernel while the simulator runs it.
Options arrive as JSON in ``MIXGCN_TRAIN_ARGS``; the metrics go to ``MIXGCN_TRAIN_OUT``.
"""

from __future__ import annotations

import itertools
import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.task import bridge
from cocotb.triggers import ClockCycles

from mixgcn.golden.datasets import load_dataset
from mixgcn.golden.gcn import GCNConfig
from mixgcn.host.train import train
from mixgcn.sim.rtl_backend import RTLBackend


@cocotb.test()
async def train_on_rtl(dut):
    from mixgcn.host.cli import progress_printer

    args = json.loads(os.environ["MIXGCN_TRAIN_ARGS"])
    Clock(dut.clk, 10, unit="ns").start()
    dut.start.value = 0
    dut.stall.value = 0
    dut.mem_load.value = 0
    dut.mem_dump.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 1)

    backend = RTLBackend(dut, pipeline=args.get("pipeline", True))
    config = GCNConfig(**args["config"])
    dataset = load_dataset(args["dataset"], args["data_dir"], seed=config.seed)
    show = None if args.get("quiet") else progress_printer(config.epochs, backend)
    epoch_cycles = [0]  # cumulative cycles at the end of each epoch

    def progress(state):
        epoch_cycles.append(backend.summary()["cycles"])
        if show is not None:
            show(state)

    def work():
        return train(dataset, config, precision="fixed16", backend=backend, progress=progress,
                     reorder=args.get("reorder", "none"))

    try:
        result = await bridge(work)()
    except ValueError as e:  # a refused operand (too large, ...): the user's message
        with open(os.environ["MIXGCN_TRAIN_OUT"], "w") as f:
            json.dump({"error": str(e)}, f)
        return
    result.update(backend.summary())
    result["epoch_cycles"] = [b - a for a, b in itertools.pairwise(epoch_cycles)]
    with open(os.environ["MIXGCN_TRAIN_OUT"], "w") as f:
        json.dump(result, f)
