"""cocotb module of ``make bench``: DCE utilisation on Cora-shaped work.

Runs in the simulator through :func:`mixgcn.sim.runner.run_cocotb` on the
:class:`~mixgcn.sim.dce_harness.DCEHarness` Verilog. Cases arrive as JSON in
``MIXGCN_BENCH_CASES``; results go to ``MIXGCN_BENCH_OUT``. Python loads the memories
and issues one command per case; the clock then runs with no Python per cycle. Every
output row is compared with the golden model, so a case that measured a wrong
answer says so.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer

from mixgcn.gen.config import DCEConfig
from mixgcn.golden import fixed
from mixgcn.hdl.dce import DCELayouts
from mixgcn.sim.dce_model import OPS

CFG = DCEConfig(**json.loads(os.environ.get("MIXGCN_DCE_CONFIG", "{}")))
LAYOUTS = DCELayouts(CFG)
DEPTH = int(os.environ.get("MIXGCN_HARNESS_DEPTH", "4096"))


def _stream_data(rng, op, n, k, m):
    """The memory images and the operands they spell out (data repeats past DEPTH)."""
    R, V = CFG.rows, CFG.b_lanes
    a_mem = rng.integers(-2000, 2001, size=(DEPTH, R))
    if op == "xtg":
        a_words = n
        x = a_mem[np.arange(n) % DEPTH][:, :k]
        b_mem = rng.integers(-2000, 2001, size=(DEPTH, V))
        w = b_mem[np.arange(n) % DEPTH][:, :m]
        return a_mem, b_mem, a_words, n, x, w
    chunks = -(-k // R)
    a_words = n * chunks
    seq = a_mem[np.arange(a_words) % DEPTH].reshape(n, chunks * R)
    x = seq[:, :k]
    if op == "xw":
        w = rng.integers(-2000, 2001, size=(k, m))
        b_mem = np.zeros((k, V), dtype=np.int64)
        b_mem[:, :m] = w
    else:  # xwt: word (j, c) holds w[c, jR:(j+1)R]
        w = rng.integers(-2000, 2001, size=(m, k))
        wp = np.zeros((m, chunks * R), dtype=np.int64)
        wp[:, :k] = w
        b_mem = np.zeros((chunks * m, V), dtype=np.int64)
        b_mem[:, :R] = wp.reshape(m, chunks, R).transpose(1, 0, 2).reshape(chunks * m, R)
    return a_mem, b_mem, a_words, len(b_mem), x, w


def _load(handle, layout, rows):
    for i, row in enumerate(rows.tolist()):
        handle[i].value = layout.const(row).as_bits()


@cocotb.test()
async def bench(dut):
    cases = json.loads(os.environ["MIXGCN_BENCH_CASES"])
    rng = np.random.default_rng(0)
    Clock(dut.clk, 10, unit="ns").start()
    dut.start.value = 0
    dut.cmd_valid.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    results = []
    for case in cases:
        op, n, k, m = case["op"], case["n"], case["k"], case["m"]
        a_mem, b_mem, a_count, b_count, x, w = _stream_data(rng, op, n, k, m)
        acc = fixed.gemm(op, x, w)
        shift = max(0, int(np.abs(acc).max()).bit_length() - (CFG.width - 1))
        want, _ = fixed.output_stage(acc, shift, CFG.width)
        _load(dut.a_mem, LAYOUTS.a_layout, a_mem)
        _load(dut.b_mem, LAYOUTS.b_layout, b_mem)
        dut.a_count.value = a_count
        dut.b_count.value = b_count
        dut.rows_expected.value = len(want)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        before = {c: int(getattr(dut, c).value) for c in ("busy_cycles", "starved_cycles",
                                                          "blocked_cycles")}
        dut.cmd.value = LAYOUTS.cmd_layout.const(dict(
            op=OPS[op], rows=n, k=k, m=m, shift=shift, relu=0, mask=0)).as_bits()
        dut.cmd_valid.value = 1
        await RisingEdge(dut.clk)
        while not int(dut.cmd_ready.value):
            await RisingEdge(dut.clk)
        dut.cmd_valid.value = 0
        t0 = time.perf_counter()
        limit = Timer(20 * (a_count + b_count + len(want) + 1000) * 10, unit="ns")
        if not int(dut.done.value):
            fired = await First(RisingEdge(dut.done), limit)
            assert fired is not limit, f"{case}: timed out"
        wall = time.perf_counter() - t0
        await RisingEdge(dut.clk)
        got = np.array([[int(v) for v in LAYOUTS.out_layout.from_bits(
            int(dut.out_mem[i].value)).data] for i in range(len(want))])[:, :m]
        verified = bool(np.array_equal(got, want))
        assert verified, f"{case}: output differs from the golden model"
        elapsed = int(dut.elapsed.value)
        counters = {c: int(getattr(dut, c).value) - before[c] for c in before}
        macs = n * k * m
        steady = n if op == "xtg" else n * -(-k // CFG.rows)
        load = 0 if op == "xtg" else b_count
        results.append(dict(
            op=op, n=n, k=k, m=m, reduction=n if op == "xtg" else k, cycles=elapsed,
            op_cycles=int(dut.op_cycles.value), useful_macs=macs,
            ideal_cycles=-(-macs // (CFG.rows * CFG.cols)), steady_cycles=steady,
            weight_load_cycles=load, fill_drain_cycles=elapsed - steady - load,
            utilisation=macs / (CFG.rows * CFG.cols * elapsed),
            verified=verified, sim_seconds=wall, **counters))
        dut._log.info("%s", results[-1])
    with open(os.environ["MIXGCN_BENCH_OUT"], "w") as f:
        json.dump(results, f, indent=2)
