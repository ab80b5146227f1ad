"""cocotb testbench of the dense combination engine, on its generated Verilog.

Run through :func:`mixgcn.sim.runner.run_cocotb` (``make sim`` / pytest); the
configuration arrives as JSON in ``MIXGCN_DCE_CONFIG``. Every test is crossed with
random idle cycles on every input and random backpressure on the output; expected rows
come from :mod:`mixgcn.sim.verify.dce_model` (the golden fixed-point operators).
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from mixgcn.gen.config import DCEConfig
from mixgcn.golden import fixed
from mixgcn.hdl.dce import DCELayouts
from mixgcn.host.device import TIMEOUTS
from mixgcn.sim.verify.dce_model import make_job
from mixgcn.sim.verify.streams import EngineTB, high

CFG = DCEConfig(**json.loads(os.environ.get("MIXGCN_DCE_CONFIG", "{}")))
ENGINE = DCELayouts(CFG)
LO, HI = fixed.mant_range(CFG.width)
SEED = int(os.environ.get("MIXGCN_SEED", "1"))

# (probability an input idles in a cycle, probability the output is ready in a cycle)
FLOW = [(0.0, 1.0), (0.4, 1.0), (0.0, 0.4), (0.4, 0.4)]


class TB(EngineTB):
    def __init__(self, dut, idle=0.0, ready=1.0, seed=SEED):
        super().__init__(dut, {"cmd": ENGINE.cmd_layout, "a": ENGINE.a_layout,
                               "b": ENGINE.b_layout, "mask": None},
                         ENGINE.out_layout, CFG.cols, idle, ready, seed)
        self.cmd, self.a, self.b, self.mask = self.sources.values()

    def submit(self, job):
        self.cmd.put([job.cmd()])
        self.a.put(job.a_words)
        self.b.put(job.b_words)
        self.mask.put(job.mask_words)

    async def run_jobs(self, jobs):
        """Submit jobs back to back; check every output row and each job's statistics."""
        expected = []
        for job in jobs:
            self.submit(job)
            for i, r in enumerate(job.expected.tolist()):
                expected.append(r + [int(i == len(job.expected) - 1)])
        # The statistics belong to the last operation: read them when the engine is
        # idle after it (values sampled at a clock edge are those before it, so an idle
        # cycle that also accepts the next command still shows the finished one's).
        work = len(expected) + sum(len(j.a_words) + len(j.b_words) + j.rows * j.k
                                   for j in jobs)
        budget = TIMEOUTS.cycles(work, slowdown=1 / ((1 - self.idle) * self.ready_p))
        accepted = done = 0
        dut = self.dut
        for _ in range(budget):
            await RisingEdge(dut.clk)
            if high(dut.idle) and accepted == done + 1:
                j = jobs[done]
                got = (int(dut.max_abs.value), int(dut.saturated.value))
                assert got == (j.max_abs, j.saturated), (
                    f"job {done} ({j.op}): stats {got} != {(j.max_abs, j.saturated)}")
                done += 1
            if high(dut.cmd__valid) and high(dut.cmd__ready):
                accepted += 1
            if len(self.received) >= len(expected) and done == len(jobs):
                break
        assert len(self.received) == len(expected), (
            f"timeout: {len(self.received)} of {len(expected)} rows")
        for i, (got, want) in enumerate(zip(self.received, expected, strict=True)):
            assert got == want, f"row {i}: got {got}, want {want}"
        self.received.clear()

    async def start(self):
        await self.reset()


def random_matrix(rng, shape, kind="random"):
    if kind == "random":
        return rng.integers(LO, HI + 1, size=shape)
    if kind == "max":
        return np.full(shape, HI)
    if kind == "min":
        return np.full(shape, LO)
    if kind == "zero":
        return np.zeros(shape, dtype=np.int64)
    if kind == "alternating":
        return np.where(np.indices(shape).sum(axis=0) % 2 == 0, HI, LO)
    if kind == "small":
        return rng.integers(-8, 9, size=shape)
    raise ValueError(kind)


def job(rng, op, n, k, m, kind_x="random", kind_w="random", shift=None, relu=False,
        masked=False):
    x = random_matrix(rng, (n, k), kind_x)
    wshape = {"xw": (k, m), "xwt": (m, k), "xtg": (n, m)}[op]
    w = random_matrix(rng, wshape, kind_w)
    mask = (rng.random((n, m)) < 0.5) if masked else None
    if shift is None:  # a typical shift: the result's magnitude fits the output
        acc = fixed.gemm(op, x, w)
        top = int(np.abs(acc).max()).bit_length()
        shift = max(0, top - (CFG.width - 1))
    return make_job(CFG, op, x, w, shift, relu=relu, mask=mask, junk=rng)


def shapes_job_list(rng):
    """Random shapes: 1×1, k not a multiple of R, tall and skinny, every tile width."""
    R, C = CFG.rows, CFG.cols
    jobs = [job(rng, "xw", 1, 1, 1), job(rng, "xwt", 1, 1, 1), job(rng, "xtg", 1, 1, 1)]
    for k in (R - 1, R, R + 1, 3 * R + 1, 4 * R):
        if k >= 1:
            jobs.append(job(rng, "xw", 3, k, C))
            jobs.append(job(rng, "xwt", 2, k, max(1, C - 1), masked=True))
    jobs.append(job(rng, "xw", 40, 2, 1))  # tall and skinny
    jobs.append(job(rng, "xtg", 40, R, C, relu=True))  # a long reduction over rows
    jobs.append(job(rng, "xtg", 3, max(1, R - 1), 1))
    return jobs


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_shapes(dut, flow):
    tb = TB(dut, *flow)
    await tb.start()
    await tb.run_jobs(shapes_job_list(tb.rng))


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_wider_than_array(dut, flow):
    """An output wider than C and a reduction longer than R: tile by tile, as the driver
    does, and the tiles put back together give the whole product."""
    tb = TB(dut, *flow)
    await tb.start()
    C = CFG.cols
    n, k, mtot = 5, 2 * CFG.rows + 3, 2 * C + 1
    x = random_matrix(tb.rng, (n, k))
    w = random_matrix(tb.rng, (k, mtot))
    tiles = [make_job(CFG, "xw", x, w[:, c0:c0 + C], 18, junk=tb.rng)
             for c0 in range(0, mtot, C)]
    await tb.run_jobs(tiles)
    whole, _ = fixed.output_stage(fixed.gemm("xw", x, w), 18, CFG.width)
    stitched = np.concatenate([t.expected[:, :t.m] for t in tiles], axis=1)
    assert np.array_equal(stitched, whole)


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_extreme_values(dut, flow):
    """Saturation both ways, the most negative integer, zeros, alternating signs."""
    tb = TB(dut, *flow)
    await tb.start()
    R, C = CFG.rows, CFG.cols
    jobs = []
    for op in ("xw", "xwt", "xtg"):
        k = R if op == "xtg" else 2 * R + 1
        for kx, kw in (("max", "max"), ("min", "min"), ("min", "max"), ("zero", "random"),
                       ("alternating", "alternating"), ("alternating", "min")):
            for shift in (0, CFG.width - 1):
                jobs.append(job(tb.rng, op, 3, k, C, kx, kw, shift=shift,
                                relu=kx == "min" and kw == "max"))
        jobs.append(job(tb.rng, op, 2, k, C, "max", "max", shift=CFG.acc_width - 1))
    await tb.run_jobs(jobs)


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_reset_mid_operation(dut, flow):
    tb = TB(dut, *flow)
    await tb.start()
    for op in ("xw", "xwt", "xtg"):
        k = CFG.rows if op == "xtg" else 3 * CFG.rows
        tb.submit(job(tb.rng, op, 30, k, CFG.cols))
        await ClockCycles(dut.clk, int(tb.rng.integers(5, 60)))
        await tb.reset()
        await tb.run_jobs([job(tb.rng, "xw", 4, CFG.rows + 1, CFG.cols),
                           job(tb.rng, op, 3, k, CFG.cols)])


@cocotb.test()
@cocotb.parametrize(flow=[(0.0, 1.0), (0.3, 0.6)])
async def test_random_stress(dut, flow):
    """Many random operations back to back."""
    tb = TB(dut, *flow)
    await tb.start()
    R, C = CFG.rows, CFG.cols
    jobs = []
    for _ in range(int(os.environ.get("MIXGCN_STRESS_JOBS", "60"))):
        op = str(tb.rng.choice(["xw", "xwt", "xtg"]))
        k = int(tb.rng.integers(1, R + 1)) if op == "xtg" else int(tb.rng.integers(1, 5 * R))
        kind = str(tb.rng.choice(["random", "small", "max", "min", "alternating"]))
        jobs.append(job(tb.rng, op, int(tb.rng.integers(1, 9)), k,
                        int(tb.rng.integers(1, C + 1)), kind_x=kind,
                        relu=bool(tb.rng.random() < 0.3),
                        masked=op != "xtg" and bool(tb.rng.random() < 0.3)))
    await tb.run_jobs(jobs)


@cocotb.test()
async def test_counters(dut):
    """busy + starved + blocked = cycles of the operation; no backpressure, no idling:
    a long X·W keeps the array busy almost every cycle."""
    tb = TB(dut, 0.0, 1.0)
    await tb.start()
    before = [int(getattr(dut, n).value) for n in ("busy_cycles", "starved_cycles",
                                                    "blocked_cycles")]
    j = job(tb.rng, "xw", 20, 4 * CFG.rows, CFG.cols)
    await tb.run_jobs([j])
    after = [int(getattr(dut, n).value) for n in ("busy_cycles", "starved_cycles",
                                                   "blocked_cycles")]
    busy, starved, blocked = (a - b for a, b in zip(after, before, strict=True))
    op_cycles = int(dut.op_cycles.value)
    assert busy + starved + blocked == op_cycles
    assert busy >= len(j.a_words) + len(j.b_words)
    if CFG.out_fifo_depth >= 8:  # room for every row in flight: never blocked
        assert blocked == 0

    tb.ready_p = 0.2  # now a slow consumer: the engine must report being blocked
    await tb.run_jobs([job(tb.rng, "xw", 20, 1, CFG.cols)])
    assert int(dut.blocked_cycles.value) > after[2]
