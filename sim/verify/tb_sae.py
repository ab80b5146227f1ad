"""cocotb testbench of the sparse aggregation engine, on its generated Verilog.

The configuration arrives as JSON in ``MIXGCN_SAE_CONFIG``; Cora is read from
``MIXGCN_DATA`` (its test is skipped when absent). Every stream gets random idle
cycles and the output random backpressure; expected rows come from
:mod:`mixgcn.sim.verify.sae_model` (the golden fixed-point operators).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from pathlib import Path

import cocotb
import numpy as np
import scipy.sparse as sp
from cocotb.triggers import ClockCycles, RisingEdge

from mixgcn.gen.config import SAEConfig
from mixgcn.golden import fixed
from mixgcn.golden.datasets import make_synthetic
from mixgcn.golden.graph import normalized_adjacency
from mixgcn.hdl.sae import SAELayouts, SAEOp
from mixgcn.host.device import TIMEOUTS
from mixgcn.sim.verify.sae_model import make_spmm_jobs
from mixgcn.sim.verify.streams import EngineTB, high

CFG = SAEConfig(**json.loads(os.environ.get("MIXGCN_SAE_CONFIG", "{}")))
LAYOUTS = SAELayouts(CFG)
LO, HI = fixed.mant_range(CFG.width)
SEED = int(os.environ.get("MIXGCN_SEED", "1"))
CORA = Path(os.environ.get("MIXGCN_DATA", "data/planetoid"))

FLOW = [(0.0, 1.0), (0.4, 1.0), (0.0, 0.4), (0.4, 0.4)]
FLOW2 = [(0.0, 1.0), (0.3, 0.5)]  # for the long runs


class TB(EngineTB):
    def __init__(self, dut, idle=0.0, ready=1.0, seed=SEED):
        super().__init__(dut, {"cmd": LAYOUTS.cmd_layout, "x": LAYOUTS.x_layout,
                               "csr": LAYOUTS.csr_layout, "mask": None},
                         LAYOUTS.out_layout, CFG.lanes, idle, ready, seed)
        self.cmd, self.x, self.csr, self.mask = self.sources.values()

    def submit(self, job):
        self.cmd.put(job.commands())
        self.x.put(job.x_words)
        self.csr.put(job.beats)
        self.mask.put(job.mask_words)

    async def run_jobs(self, jobs):
        """Submit jobs back to back; check every output row and each SPMM's statistics
        (read when the next SPMM is accepted, or when the engine is idle at the end)."""
        expected = []
        for job in jobs:
            self.submit(job)
            for i, r in enumerate(job.expected.tolist()):
                expected.append(r + [int(i == len(job.expected) - 1)])
        work = len(expected) + sum(len(j.beats) + len(j.x_words) for j in jobs)
        budget = TIMEOUTS.cycles(work, slowdown=1 / ((1 - self.idle) * self.ready_p))
        dut, received = self.dut, self.received
        started = checked = 0

        def check_stats():
            nonlocal checked
            j = jobs[checked]
            got = (int(dut.max_abs.value), int(dut.saturated.value))
            assert got == (j.max_abs, j.saturated), (
                f"SPMM {checked}: stats {got} != {(j.max_abs, j.saturated)}")
            checked += 1

        for _ in range(budget):
            await RisingEdge(dut.clk)
            if high(dut.cmd__valid) and high(dut.cmd__ready):
                cmd = LAYOUTS.cmd_layout.from_bits(int(dut.cmd__payload.value))
                if cmd.op == SAEOp.SPMM:
                    if started > checked:
                        check_stats()
                    started += 1
            elif high(dut.idle) and started == len(jobs) and checked < started:
                check_stats()
            if len(received) >= len(expected) and checked == len(jobs):
                break
        assert len(received) == len(expected), (
            f"timeout: {len(received)} of {len(expected)} rows")
        for i, (got, want) in enumerate(zip(received, expected, strict=True)):
            assert got == want, f"row {i}: got {got}, want {want}"
        received.clear()


def quantized_adjacency(edge_index, n):
    return fixed.quantize(normalized_adjacency(edge_index, n), CFG.width).mant


def random_features(rng, n, f, small=False):
    return rng.integers(-300, 301, size=(n, f)) if small else rng.integers(LO, HI + 1, (n, f))


def fitting_shift(s, x):
    top = int(np.abs(fixed.spmm(s, x)).max()).bit_length()
    return max(0, top - (CFG.width - 1))


def spmm(s, x, relu=False, masked=False, rng=None, shift=None, first_bank=0):
    mask = (rng.random((s.shape[0], x.shape[1])) < 0.5) if masked else None
    shift = fitting_shift(s, x) if shift is None else shift
    return make_spmm_jobs(CFG, s, x, shift, relu=relu, mask=mask, first_bank=first_bank,
                          junk=np.random.default_rng(int(x.sum()) % 1000))


@cocotb.test(skip=not (CORA / "ind.cora.graph").is_file())
@cocotb.parametrize(flow=FLOW2)
async def test_cora(dut, flow):
    """Cora's Â with random features, in passes of L lanes (F = 2L + 1)."""
    from mixgcn.golden.datasets import load_planetoid

    tb = TB(dut, *flow)
    await tb.reset()
    cora = load_planetoid("cora", CORA)
    s = quantized_adjacency(cora.edge_index, cora.num_nodes)
    x = random_features(tb.rng, cora.num_nodes, 2 * CFG.lanes + 1)
    await tb.run_jobs(spmm(s, x, relu=True))


@cocotb.test()
@cocotb.parametrize(flow=FLOW2)
async def test_power_law(dut, flow):
    tb = TB(dut, *flow)
    await tb.reset()
    ds = make_synthetic(nodes=1500, degree=10, seed=SEED)
    s = quantized_adjacency(ds.edge_index, ds.num_nodes)
    assert np.diff(s.indptr).max() > 10 * np.diff(s.indptr).mean()  # really skewed
    await tb.run_jobs(spmm(s, random_features(tb.rng, ds.num_nodes, CFG.lanes),
                           masked=True, rng=tb.rng))


@cocotb.test()
@cocotb.parametrize(flow=FLOW2)
async def test_star(dut, flow):
    """One row with 10 000 non-zeros (the hub), 10 000 rows with 2."""
    tb = TB(dut, *flow)
    await tb.reset()
    leaves = 10_000
    edges = np.stack([np.zeros(leaves, np.int64), np.arange(1, leaves + 1)])
    s = quantized_adjacency(np.concatenate([edges, edges[::-1]], axis=1), leaves + 1)
    assert np.diff(s.indptr).max() == leaves + 1
    await tb.run_jobs(spmm(s, random_features(tb.rng, leaves + 1, CFG.lanes)))


@cocotb.test(skip=not CFG.partial_rows)
@cocotb.parametrize(flow=FLOW2)
async def test_column_windows(dut, flow):
    """SpMMs planned for a buffer of 200 rows and 96 rows of partial sums: blocks of rows
    in column windows, each row's sum kept at accumulator width between windows and
    rounded once — Â of a skewed graph (masked, ReLU, two passes) and Xᵀ·G with Xᵀ
    gathering from every node."""
    tb = TB(dut, *flow)
    await tb.reset()
    rng = tb.rng
    small = dataclasses.replace(CFG, max_nodes=200, partial_rows=min(CFG.partial_rows, 96))
    ds = make_synthetic(nodes=700, degree=8, seed=SEED)
    s = quantized_adjacency(ds.edge_index, ds.num_nodes)
    x = random_features(rng, ds.num_nodes, CFG.lanes + 1)
    mask = rng.random((s.shape[0], x.shape[1])) < 0.5
    jobs = make_spmm_jobs(small, s, x, fitting_shift(s, x), relu=True, mask=mask,
                          junk=np.random.default_rng(SEED))
    xt = sp.csr_array(sp.random_array((40, ds.num_nodes), density=0.05, rng=rng,
                                      format="csr", data_sampler=lambda size: rng.integers(
                                          1, 3000, size)).astype(np.int64))
    g = random_features(rng, ds.num_nodes, CFG.lanes)
    jobs += make_spmm_jobs(small, xt, g, fitting_shift(xt, g), first_bank=len(jobs) % 2)
    assert any(j.keep for j in jobs) and any(j.accumulate for j in jobs)
    await tb.run_jobs(jobs)


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_empty_rows_repeated_columns_identity(dut, flow):
    tb = TB(dut, *flow)
    await tb.reset()
    rng = tb.rng
    n = 40
    # empty rows (degree 0) between rows that name the same column several times
    # (CSR kept as built: duplicate entries are not summed away)
    degree = [0 if i % 3 == 0 else int(rng.integers(1, 2 * CFG.edges + 2)) for i in range(n)]
    indptr = np.concatenate([[0], np.cumsum(degree)])
    cols = rng.integers(0, 6, size=indptr[-1])  # six columns: many repeats
    vals = rng.integers(LO, HI + 1, size=indptr[-1])
    rep = sp.csr_array((vals, cols, indptr), shape=(n, n))
    assert any(len(set(cols[a:b])) < b - a for a, b in itertools.pairwise(indptr))
    assert (np.diff(rep.indptr) == 0).sum() >= n // 3
    x = random_features(rng, n, CFG.lanes)
    ident = sp.csr_array(sp.identity(n, dtype=np.int64, format="csr"))
    jobs = (spmm(rep, x, relu=True) + spmm(ident, x, shift=0, first_bank=1)
            + spmm(sp.csr_array((n, n), dtype=np.int64), x))  # all rows empty
    assert np.array_equal(jobs[-2].expected, np.clip(x, LO, HI))  # I · X = X
    await tb.run_jobs(jobs)


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_sparse_features(dut, flow):
    """The other sparse operands: X·W with X sparse (S = X, the buffer holds W) and
    Xᵀ·G (S = Xᵀ, the buffer holds G)."""
    tb = TB(dut, *flow)
    await tb.reset()
    rng = tb.rng
    n, fin = 30, 50
    xs = sp.random_array((n, fin), density=0.08, rng=rng, format="csr",
                         data_sampler=lambda size: rng.integers(1, 3000, size))
    xs = sp.csr_array(xs.astype(np.int64))
    w = random_features(rng, fin, CFG.lanes)
    g = random_features(rng, n, CFG.lanes)
    await tb.run_jobs(spmm(xs, w) + spmm(sp.csr_array(xs.T), g, first_bank=1))


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_extreme_values(dut, flow):
    """Saturation both ways, the most negative integer, zeros, alternating signs."""
    tb = TB(dut, *flow)
    await tb.reset()
    n = 12
    s_max = sp.csr_array(np.full((n, n), HI))
    s_min = sp.csr_array(np.full((n, n), LO))
    alt = np.where(np.indices((n, CFG.lanes)).sum(axis=0) % 2 == 0, HI, LO)
    jobs = []
    for s in (s_max, s_min):
        for x in (np.full((n, CFG.lanes), HI), np.full((n, CFG.lanes), LO), alt,
                  np.zeros((n, CFG.lanes), np.int64)):
            for shift in (0, CFG.width - 1, CFG.acc_width - 1):
                jobs += spmm(s, x, shift=shift, relu=bool(tb.rng.random() < 0.5),
                             first_bank=len(jobs) % 2)
    await tb.run_jobs(jobs)


@cocotb.test()
@cocotb.parametrize(flow=FLOW)
async def test_reset_mid_operation(dut, flow):
    tb = TB(dut, *flow)
    await tb.reset()
    ds = make_synthetic(nodes=300, seed=SEED)
    s = quantized_adjacency(ds.edge_index, ds.num_nodes)
    for cut in (3, 40, 400):
        for job in spmm(s, random_features(tb.rng, ds.num_nodes, 2 * CFG.lanes)):
            tb.submit(job)
        await ClockCycles(dut.clk, cut)
        await tb.reset()
        await tb.run_jobs(spmm(s[:20], random_features(tb.rng, ds.num_nodes, CFG.lanes),
                               masked=True, rng=tb.rng))


@cocotb.test()
@cocotb.parametrize(flow=FLOW2)
async def test_random_stress(dut, flow):
    """Many random SpMMs back to back: shapes, densities, values, settings."""
    tb = TB(dut, *flow)
    await tb.reset()
    rng = tb.rng
    jobs = []
    for _ in range(int(os.environ.get("MIXGCN_STRESS_JOBS", "40"))):
        n, k = int(rng.integers(1, 30)), int(rng.integers(1, 30))
        dens = float(rng.choice([0.0, 0.05, 0.3, 1.0]))
        mask = rng.random((n, k)) < dens
        s = sp.csr_array(np.where(mask, rng.integers(LO, HI + 1, (n, k)), 0))
        x = random_features(rng, k, int(rng.integers(1, 2 * CFG.lanes + 1)),
                            small=bool(rng.random() < 0.5))
        jobs += spmm(s, x, relu=bool(rng.random() < 0.3), masked=bool(rng.random() < 0.3),
                     rng=rng, first_bank=int(rng.integers(0, 2)))
    await tb.run_jobs(jobs)


@cocotb.test()
async def test_counters(dut):
    """busy + starved + blocked = cycles of the SPMM; a free-flowing long row keeps the
    engine busy; a slow consumer shows up as blocked cycles."""
    tb = TB(dut, 0.0, 1.0)
    await tb.reset()
    names = ("busy_cycles", "starved_cycles", "blocked_cycles")
    before = [int(getattr(dut, n).value) for n in names]
    s = sp.csr_array(np.ones((1, 200 * CFG.edges), np.int64))
    x = random_features(tb.rng, 200 * CFG.edges, CFG.lanes, small=True)
    await tb.run_jobs(spmm(s, x))
    busy, starved, blocked = (int(getattr(dut, n).value) - b for n, b in zip(names, before,
                                                                            strict=True))
    assert busy + starved + blocked == int(dut.op_cycles.value)
    assert busy >= 200 and blocked == 0
    assert int(dut.load_cycles.value) >= 200 * CFG.edges
    tb.ready_p = 0.1
    s = sp.csr_array(sp.identity(60, dtype=np.int64, format="csr"))
    await tb.run_jobs(spmm(s, random_features(tb.rng, 60, CFG.lanes), shift=0))
    assert int(dut.blocked_cycles.value) > before[2] + blocked
