"""cocotb tests of the chip (:class:`~mixgcn.sim.chip_harness.ChipHarness`): every kernel
and the fused SpMM→GEMM pipeline bit for bit against the golden backend, with and
without random stalls on every memory channel; descriptor corner cases; reset in the
middle of a batch. The configuration arrives as a name from :data:`SIM_CONFIGS` in
``MIXGCN_CHIP``."""

from __future__ import annotations

import os

import cocotb
import numpy as np
import scipy.sparse as sp
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from mixgcn.gen.config import CHIP_PRESETS, ChipConfig, DCEConfig, SAEConfig
from mixgcn.golden import fixed
from mixgcn.hdl.chip import Unit
from mixgcn.host.backends import GoldenBackend, NumberFormat
from mixgcn.sim.chip_driver import ChipKernels

# the configurations the tests run: the tiny preset, and one with every buffer at its
# smallest (one-row pipeline FIFO, one queued descriptor, two-word readers, E = 1)
SIM_CONFIGS = {
    "tiny": CHIP_PRESETS["tiny"],
    "shallow": ChipConfig(sae=SAEConfig(lanes=3, edges=1, max_nodes=256, out_fifo_depth=1),
                          dce=DCEConfig(rows=3, cols=3, max_k=64, max_rows=1024,
                                        out_fifo_depth=2),
                          pipeline_depth=1, desc_depth=1, addr_width=14, reader_depth=2),
}
# and "ported": the tiny chip with its exchange port exposed, closed by the harness
SIM_CONFIGS["ported"] = CHIP_PRESETS["tiny"]
LOOPBACK = {"tiny": True, "shallow": True, "ported": False}
CONFIG = SIM_CONFIGS[os.environ.get("MIXGCN_CHIP", "tiny")]
SEED = int(os.environ.get("MIXGCN_SEED", "1"))
GOLDEN = GoldenBackend(NumberFormat(CONFIG.sae.width, CONFIG.sae.acc_width))


async def reset(dut, cycles=3):
    dut.start.value = 0
    dut.mem_load.value = 0
    dut.mem_dump.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 1)


async def setup(dut) -> ChipKernels:
    Clock(dut.clk, 10, unit="ns").start()
    dut.stall.value = 0
    dut.desc_count.value = 0
    await reset(dut)
    return ChipKernels(dut, CONFIG)


def values(rng, shape, width=CONFIG.sae.width):
    lo, hi = fixed.mant_range(width)
    return rng.integers(lo, hi + 1, size=shape)


def sparse(rng, n, k, density=0.15):
    """S with empty rows, one row of degree k, and every value of the data range."""
    s = sp.random_array((n, k), density=density, rng=rng, format="lil")
    s[n // 2, :] = 1.0  # one huge row
    s[1, :] = 0  # empty rows (row 0 may be too)
    s = sp.csr_array(s)
    s.data = values(rng, s.nnz).astype(np.int64)
    s.data[s.data == 0] = 1
    return s


def same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    bad = np.argwhere(got != want)
    assert not len(bad), f"{what}: {len(bad)} values differ, first at {tuple(bad[0])}: " \
                         f"{got[tuple(bad[0])]} != {want[tuple(bad[0])]}"


def same_stats(got, want, what):
    assert (got.max_abs, got.saturated) == (want.max_abs, want.saturated), \
        f"{what}: statistics {got} != golden {want}"


async def check_kernels(kern, rng, tag):
    L, R, C = CONFIG.lanes, CONFIG.dce.rows, CONFIG.dce.cols
    n, k = 37, 29
    s = sparse(rng, n, k)
    x = values(rng, (k, 2 * L + 1))  # three passes, the last one partly filled
    mask = rng.random((n, x.shape[1])) < 0.7
    for shift, relu, msk in ((20, False, None), (3, True, mask)):  # 3: saturates
        got, stats, res = await kern.spmm(s, x, shift, relu, msk)
        want, wstats = GOLDEN.spmm(s, x, shift, relu, msk)
        same(got, want, f"{tag} spmm shift={shift}")
        same_stats(stats, wstats, f"{tag} spmm shift={shift}")
        assert res.cycles > 0 and res.counters["sae_busy_cycles"] > 0

    xk = values(rng, (n, 2 * R + 1))
    for form, w in (("xw", values(rng, (xk.shape[1], C + 2))),
                    ("xwt", values(rng, (C + 2, xk.shape[1]))),
                    ("xtg", values(rng, (n, C + 3)))):
        for shift, relu, msk in ((22, False, None), (5, True, None)):
            if form != "xtg" and relu:
                msk = rng.random((n, w.shape[1] if form == "xw" else w.shape[0])) < 0.5
            got, stats, _ = await kern.gemm(form, xk, w, shift, relu, msk)
            want, wstats = GOLDEN.gemm(form, xk, w, shift, relu, msk)
            same(got, want, f"{tag} gemm {form} shift={shift}")
            same_stats(stats, wstats, f"{tag} gemm {form} shift={shift}")

    # the fine-grain pipeline: SpMM rows cross the exchange port into the DCE
    xf = values(rng, (k, L - 1))
    for form, w, keep in (("xw", values(rng, (L - 1, C)), True),
                          ("xwt", values(rng, (C - 1, L - 1)), False)):
        m = w.shape[1] if form == "xw" else w.shape[0]
        mask2 = rng.random((n, m)) < 0.6
        a, st1, z, st2, res = await kern.spmm_gemm(s, xf, 12, form, w, 9, relu=True,
                                                   mask2=mask2, keep=keep)
        wa, ws1 = GOLDEN.spmm(s, xf, 12, relu=True)
        wz, ws2 = GOLDEN.gemm(form, wa, w, 9, mask=mask2)
        if keep:
            same(a, wa, f"{tag} fused spmm")
        same_stats(st1, ws1, f"{tag} fused spmm")
        same(z, wz, f"{tag} fused gemm {form}")
        same_stats(st2, ws2, f"{tag} fused gemm {form}")
        assert [r["unit"] for r in res.status].count(Unit.GEMM) == 1

    # ... and the other way: GEMM rows fill the SAE's buffer, the SpMM trails them
    xg = values(rng, (k, 2 * R - 1))
    for form, w, keep in (("xw", values(rng, (2 * R - 1, L)), True),
                          ("xwt", values(rng, (L - 2, 2 * R - 1)), False)):
        m = w.shape[1] if form == "xw" else w.shape[0]
        mask2 = rng.random((n, m)) < 0.6
        t, st1, z, st2, res = await kern.gemm_spmm(form, xg, w, 17, s, 11, relu2=True,
                                                   mask2=mask2, keep=keep)
        wt, ws1 = GOLDEN.gemm(form, xg, w, 17)
        wz, ws2 = GOLDEN.spmm(s, wt, 11, relu=True, mask=mask2)
        if keep:
            same(t, wt, f"{tag} fused gemm {form} → spmm")
        same_stats(st1, ws1, f"{tag} fused gemm {form} → spmm")
        same(z, wz, f"{tag} fused spmm after gemm {form}")
        same_stats(st2, ws2, f"{tag} fused spmm after gemm {form}")

    # an SpMM and an unrelated GEMM at once, one on each engine
    g = values(rng, (n, C))
    y1, st1, y2, st2, res = await kern.spmm_and_gemm(s, x, 15, "xtg", xk, g, 21)
    w1, ws1 = GOLDEN.spmm(s, x, 15)
    w2, ws2 = GOLDEN.gemm("xtg", xk, g, 21)
    same(y1, w1, f"{tag} spmm beside a gemm")
    same_stats(st1, ws1, f"{tag} spmm beside a gemm")
    same(y2, w2, f"{tag} gemm beside an spmm")
    same_stats(st2, ws2, f"{tag} gemm beside an spmm")
    # an SpMM that does not trail its load gives the same rows
    got, stats, _ = await kern.spmm(s, x, 20, follow=False)
    same(got, GOLDEN.spmm(s, x, 20)[0], f"{tag} spmm without follow")


@cocotb.test()
async def kernels_match_golden(dut):
    kern = await setup(dut)
    await check_kernels(kern, np.random.default_rng(SEED), "no stalls")


@cocotb.test()
async def kernels_match_golden_with_memory_stalls(dut):
    kern = await setup(dut)
    kern.stall = 140  # each channel refuses ~55 % of cycles
    await check_kernels(kern, np.random.default_rng(SEED + 1), "stalls")


@cocotb.test()
async def descriptor_corner_cases(dut):
    kern = await setup(dut)
    rng = np.random.default_rng(SEED + 2)
    kern.stall = 60
    empty = sp.csr_array((5, 3), dtype=np.int64)  # every row empty: all zeros out
    got, stats, _ = await kern.spmm(empty, values(rng, (3, 2)), 0)
    same(got, np.zeros((5, 2), dtype=np.int64), "all-empty S")
    assert stats.max_abs == 0
    # zero-length work, fences and a batch longer than the descriptor queue
    descs = []
    for i in range(4 * CONFIG.desc_depth + 1):
        descs += [kern.desc(Unit.LOAD, bank=i % 2, rows=0),
                  kern.desc(Unit.SPMM, bank=i % 2, rows=0, to_mem=1),
                  kern.desc(Unit.FENCE, fence=1)]
    first = int(dut.issued.value)
    res = await kern.run(descs)
    assert sorted(s["seq"] for s in res.status) == list(range(first, first + len(descs)))
    assert int(dut.issued.value) == int(dut.completed.value)
    # a fence completes only after every descriptor before it
    order = [s["seq"] for s in res.status]
    fences = [s["seq"] for s in res.status if s["unit"] == Unit.FENCE]
    for f in fences:
        assert all(q in order[:order.index(f)] for q in range(first, f)), \
            f"fence {f} reported before an earlier descriptor"
    # sparse operands are kept in the upper half of memory; when it fills up they are
    # forgotten and written again, never overwritten while kept
    for _ in range(12):
        s = sparse(rng, 300, 40, density=0.5)
        x = values(rng, (40, 2))
        got, _, _ = await kern.spmm(s, x, 18)
        same(got, GOLDEN.spmm(s, x, 18)[0], "spmm with memory reuse")
    half = 1 << (CONFIG.addr_width - 1)
    try:
        await kern.spmm(sparse(rng, 8 * half // 20, 20, density=0.5), values(rng, (20, 1)), 0)
        raise AssertionError("an operand larger than the memory was accepted")
    except ValueError as e:
        assert f"keeps {half} for sparse operands" in str(e), e
    # a kernel still works after all that
    s = sparse(rng, 9, 7)
    x = values(rng, (7, 3))
    got, _, _ = await kern.spmm(s, x, 14)
    same(got, GOLDEN.spmm(s, x, 14)[0], "spmm after corner cases")


@cocotb.test()
async def reset_between_runs(dut):
    kern = await setup(dut)
    rng = np.random.default_rng(SEED + 3)
    s = sparse(rng, 60, 50, density=0.3)
    x = values(rng, (50, 3 * CONFIG.lanes))
    scratch = kern._Scratch(kern)
    descs, _, _ = kern._spmm_descs(scratch, s, x, 16, False, None)
    await kern.flush()
    for i, d in enumerate(descs):
        dut.desc_src.mem[i].value = d
    dut.desc_count.value = len(descs)
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    await ClockCycles(dut.clk, 150)  # in the middle of the batch
    assert int(dut.received.value) < len(descs)
    await reset(dut)
    assert int(dut.issued.value) == 0 and int(dut.idle.value) == 1
    for _ in range(2):
        got, stats, _ = await kern.spmm(s, x, 16)
        want, wstats = GOLDEN.spmm(s, x, 16)
        same(got, want, "spmm after reset")
        same_stats(stats, wstats, "spmm after reset")


@cocotb.test()
async def random_stress(dut):
    """Seeded random kernels of random shapes (degree-0 rows, single rows, widths just
    over a multiple of the lanes), random stall levels, each checked against golden."""
    kern = await setup(dut)
    rng = np.random.default_rng(SEED + 4)
    L = CONFIG.lanes
    for it in range(20):
        kern.stall = int(rng.choice([0, 40, 120, 200]))
        n, k = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        s = sp.random_array((n, k), density=float(rng.uniform(0, 0.6)), rng=rng,
                            format="csr")
        s.data = values(rng, s.nnz).astype(np.int64)
        kind = str(rng.choice(["spmm", "gemm", "spmm_gemm", "gemm_spmm", "beside"]))
        shift, shift2 = int(rng.integers(0, 34)), int(rng.integers(0, 34))
        relu = bool(rng.random() < 0.5)
        tag = f"stress {it} ({kind}, n={n}, k={k}, stall={kern.stall})"
        if kind == "spmm":
            x = values(rng, (k, int(rng.integers(1, 3 * L + 2))))
            mask = (rng.random((n, x.shape[1])) < 0.5) if rng.random() < 0.5 else None
            got, st, _ = await kern.spmm(s, x, shift, relu, mask)
            checks = [(got, st, GOLDEN.spmm(s, x, shift, relu, mask))]
        elif kind == "gemm":
            form = str(rng.choice(["xw", "xwt", "xtg"]))
            x = values(rng, (n, int(rng.integers(1, 3 * L + 2))))
            m = int(rng.integers(1, 2 * L + 2))
            w = values(rng, {"xw": (x.shape[1], m), "xwt": (m, x.shape[1]),
                             "xtg": (n, m)}[form])
            relu = relu and form != "xtg"
            got, st, _ = await kern.gemm(form, x, w, shift, relu)
            checks = [(got, st, GOLDEN.gemm(form, x, w, shift, relu))]
            tag += f" {form} {x.shape}·{w.shape}"
        elif kind == "spmm_gemm":
            form = str(rng.choice(["xw", "xwt"]))
            f, m = int(rng.integers(1, L + 1)), int(rng.integers(1, L + 1))
            x = values(rng, (k, f))
            w = values(rng, (f, m) if form == "xw" else (m, f))
            a, st1, z, st2, _ = await kern.spmm_gemm(s, x, shift, form, w, shift2,
                                                     relu2=relu)
            wa = GOLDEN.spmm(s, x, shift)
            checks = [(a, st1, wa), (z, st2, GOLDEN.gemm(form, wa[0], w, shift2, relu))]
        elif kind == "gemm_spmm":
            form = str(rng.choice(["xw", "xwt"]))
            f, m = int(rng.integers(1, 2 * L + 2)), int(rng.integers(1, L + 1))
            x = values(rng, (k, f))
            w = values(rng, (f, m) if form == "xw" else (m, f))
            t, st1, z, st2, _ = await kern.gemm_spmm(form, x, w, shift, s, shift2,
                                                     relu2=relu)
            wt = GOLDEN.gemm(form, x, w, shift)
            checks = [(t, st1, wt), (z, st2, GOLDEN.spmm(s, wt[0], shift2, relu))]
        else:
            x = values(rng, (k, int(rng.integers(1, 2 * L + 2))))
            xg = values(rng, (int(rng.integers(1, 30)), int(rng.integers(1, 2 * L))))
            g = values(rng, (xg.shape[0], int(rng.integers(1, 2 * L))))
            y1, st1, y2, st2, _ = await kern.spmm_and_gemm(s, x, shift, "xtg", xg, g, shift2)
            checks = [(y1, st1, GOLDEN.spmm(s, x, shift)),
                      (y2, st2, GOLDEN.gemm("xtg", xg, g, shift2))]
        for got, st, (want, wst) in checks:
            same(got, want, tag)
            same_stats(st, wst, tag)
