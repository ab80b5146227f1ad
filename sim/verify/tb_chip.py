"""cocotb tests of the chip (:class:`~mixgcn.sim.chip.harness.ChipHarness`): every kernel
and both pipelined directions bit for bit against the golden backend, without stalls and
with random input stalls (read channels), output backpressure (write channels) and
exchange-wire stalls, crossed; descriptor corner cases; a broken exchange contract
reported as an error; reset in the middle of a batch. The chip is driven by the host's own driver
(:class:`~mixgcn.host.chip_driver.ChipBackend`), which runs in a thread beside the
simulation (``cocotb.task.bridge``) on an :class:`~mixgcn.sim.chip.control.InSimulatorChip`.
The configuration arrives as a name from :data:`SIM_CONFIGS` in ``MIXGCN_CHIP``, the
seed in ``MIXGCN_SEED`` (the harness's stall generators have theirs built in)."""

from __future__ import annotations

import os

import cocotb
import numpy as np
import scipy.sparse as sp
from cocotb.task import bridge
from cocotb.triggers import ClockCycles, RisingEdge

from mixgcn.gen.config import CHIP_PRESETS, ChipConfig, DCEConfig, SAEConfig
from mixgcn.golden import fixed
from mixgcn.golden.backend import GoldenBackend, NumberFormat, Stage
from mixgcn.hdl.chip import Unit
from mixgcn.host.chip_driver import ChipBackend
from mixgcn.host.device import DeviceError
from mixgcn.host.tiling import plan_windows
from mixgcn.sim.chip.control import HarnessControl, InSimulatorChip

# the configurations the tests run: the tiny preset, and one with every buffer at its
# smallest (one-row pipeline FIFO, one queued descriptor, two-word readers, E = 1,
# 16 rows of partial sums: an SpMM in column windows has several blocks)
SIM_CONFIGS = {
    "tiny": CHIP_PRESETS["tiny"],
    "shallow": ChipConfig(sae=SAEConfig(lanes=3, edges=1, max_nodes=256, partial_rows=16,
                                        out_fifo_depth=1),
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


async def setup(dut) -> tuple[HarnessControl, ChipBackend]:
    control = HarnessControl(dut, CONFIG)
    await control.start()
    return control, ChipBackend(InSimulatorChip(control))


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


def same_result(got, want, what):
    """A kernel's rows and output-stage statistics equal golden's."""
    same(got.rows, want.rows, what)
    assert (got.stats.max_abs, got.stats.saturated) == (want.stats.max_abs,
                                                        want.stats.saturated), \
        f"{what}: statistics {got.stats} != golden {want.stats}"


def check_kernels(chip: ChipBackend, rng, tag):
    L, R, C = CONFIG.lanes, CONFIG.dce.rows, CONFIG.dce.cols
    n, k = 37, 29
    s = sparse(rng, n, k)
    x = values(rng, (k, 2 * L + 1))  # three passes, the last one partly filled
    mask = rng.random((n, x.shape[1])) < 0.7
    for stage in (Stage(20), Stage(3, True, mask)):  # 3: saturates
        got, res = chip.run_spmm(s, x, stage)
        same_result(got, GOLDEN.spmm(s, x, stage), f"{tag} spmm shift={stage.shift}")
        assert res.cycles > 0 and res.counters["sae_busy_cycles"] > 0

    xk = values(rng, (n, 2 * R + 1))
    for form, w in (("xw", values(rng, (xk.shape[1], C + 2))),
                    ("xwt", values(rng, (C + 2, xk.shape[1]))),
                    ("xtg", values(rng, (n, C + 3)))):
        for shift, relu in ((22, False), (5, True)):
            msk = None
            if form != "xtg" and relu:
                msk = rng.random((n, w.shape[1] if form == "xw" else w.shape[0])) < 0.5
            stage = Stage(shift, relu, msk)
            got, _ = chip.run_gemm(form, xk, w, stage)
            same_result(got, GOLDEN.gemm(form, xk, w, stage), f"{tag} gemm {form} {shift}")

    # the fine-grain pipeline: SpMM rows cross the exchange port into the DCE
    xf = values(rng, (k, L - 1))
    for form, w, keep in (("xw", values(rng, (L - 1, C)), True),
                          ("xwt", values(rng, (C - 1, L - 1)), False)):
        m = w.shape[1] if form == "xw" else w.shape[0]
        stages = (Stage(12, True), Stage(9, False, rng.random((n, m)) < 0.6))
        pair, res = chip.run_spmm_gemm(s, xf, form, w, stages, keep=keep)
        want = GOLDEN.spmm_gemm(s, xf, form, w, stages)
        if keep:
            same_result(pair.first, want.first, f"{tag} fused spmm")
        else:
            assert pair.first.rows is None
        same_result(pair.second, want.second, f"{tag} fused gemm {form}")
        assert [r.unit for r in res.status].count(Unit.GEMM) == 1

    # ... and the other way: GEMM rows fill the SAE's buffer, the SpMM trails them
    xg = values(rng, (k, 2 * R - 1))
    for form, w, keep in (("xw", values(rng, (2 * R - 1, L)), True),
                          ("xwt", values(rng, (L - 2, 2 * R - 1)), False)):
        m = w.shape[1] if form == "xw" else w.shape[0]
        stages = (Stage(17), Stage(11, True, rng.random((n, m)) < 0.6))
        pair, res = chip.run_gemm_spmm(form, xg, w, s, stages, keep=keep)
        want = GOLDEN.gemm_spmm(form, xg, w, s, stages)
        if keep:
            same_result(pair.first, want.first, f"{tag} fused gemm {form} → spmm")
        same_result(pair.second, want.second, f"{tag} fused spmm after gemm {form}")

    # an SpMM and an unrelated GEMM at once, one on each engine
    g = values(rng, (n, C))
    stages = (Stage(15), Stage(21))
    pair, _ = chip.run_spmm_and_gemm(s, x, "xtg", xk, g, stages)
    want = GOLDEN.spmm_and_gemm(s, x, "xtg", xk, g, stages)
    same_result(pair.first, want.first, f"{tag} spmm beside a gemm")
    same_result(pair.second, want.second, f"{tag} gemm beside an spmm")
    # an SpMM that does not trail its load gives the same rows
    chip.follow = False
    got, _ = chip.run_spmm(s, x, Stage(20))
    chip.follow = True
    same(got.rows, GOLDEN.spmm(s, x, Stage(20)).rows, f"{tag} spmm without follow")

    # S wider than the buffer: column windows, each row's sum kept between them and
    # rounded once — alone (two passes, masked) and feeding a GEMM through the exchange
    kw = CONFIG.sae.max_nodes + 57
    sw = sparse(rng, n, kw, density=0.3)
    assert plan_windows(sw, buffer_rows=CONFIG.sae.max_nodes,
                        partial_rows=CONFIG.sae.partial_rows).tiled
    xw = values(rng, (kw, L + 1))
    stage = Stage(21, True, rng.random((n, L + 1)) < 0.6)
    got, _ = chip.run_spmm(sw, xw, stage)
    same_result(got, GOLDEN.spmm(sw, xw, stage), f"{tag} spmm in column windows")
    xf, w = values(rng, (kw, L - 1)), values(rng, (L - 1, C))
    stages = (Stage(21, True), Stage(9))
    pair, _ = chip.run_spmm_gemm(sw, xf, "xw", w, stages)
    want = GOLDEN.spmm_gemm(sw, xf, "xw", w, stages)
    same_result(pair.first, want.first, f"{tag} fused spmm in column windows")
    same_result(pair.second, want.second, f"{tag} gemm fed by column windows")


@cocotb.test()
async def kernels_match_golden(dut):
    _, chip = await setup(dut)
    await bridge(check_kernels)(chip, np.random.default_rng(SEED), "no stalls")


# (read, write, exchange) stall levels in 256ths: inputs starved, outputs held back, both
STALLS = [(140, 0, 0), (0, 140, 100), (140, 140, 200)]


@cocotb.test()
@cocotb.parametrize(stalls=STALLS)
async def kernels_match_golden_with_stalls(dut, stalls):
    control, chip = await setup(dut)
    control.read_stall, control.write_stall, control.xchg_stall = stalls
    await bridge(check_kernels)(chip, np.random.default_rng(SEED + 1 + sum(stalls)),
                                f"stalls {stalls}")


def corner_cases(control: HarnessControl, chip: ChipBackend, rng):
    empty = sp.csr_array((5, 3), dtype=np.int64)  # every row empty: all zeros out
    got, _ = chip.run_spmm(empty, values(rng, (3, 2)), Stage(0))
    same(got.rows, np.zeros((5, 2), dtype=np.int64), "all-empty S")
    assert got.stats.max_abs == 0
    # zero-length work, fences and a batch longer than the descriptor queue
    descs = []
    for i in range(4 * CONFIG.desc_depth + 1):
        descs += [chip.descriptor(Unit.LOAD, bank=i % 2, rows=0),
                  chip.descriptor(Unit.SPMM, bank=i % 2, rows=0, to_mem=1),
                  chip.descriptor(Unit.FENCE, fence=1)]
    first = control.counters()["issued"]
    res = chip.run_descriptors(descs, "corner cases")
    assert sorted(s.seq for s in res.status) == list(range(first, first + len(descs)))
    counters = control.counters()
    assert counters["issued"] == counters["completed"]
    # a fence completes only after every descriptor before it
    order = [s.seq for s in res.status]
    for f in (s.seq for s in res.status if s.unit == Unit.FENCE):
        assert all(q in order[:order.index(f)] for q in range(first, f)), \
            f"fence {f} reported before an earlier descriptor"
    # sparse operands are kept in the upper half of memory; when it fills up they are
    # forgotten and written again, never overwritten while kept
    for _ in range(12):
        s = sparse(rng, 300, 40, density=0.5)
        x = values(rng, (40, 2))
        got, _ = chip.run_spmm(s, x, Stage(18))
        same(got.rows, GOLDEN.spmm(s, x, Stage(18)).rows, "spmm with memory reuse")
    half = 1 << (CONFIG.addr_width - 1)
    try:
        chip.run_spmm(sparse(rng, 8 * half // 20, 20, density=0.5), values(rng, (20, 1)),
                      Stage(0))
        raise AssertionError("an operand larger than the memory was accepted")
    except ValueError as e:
        assert f"keeps {half} words for sparse operands" in str(e), e
    # a kernel still works after all that
    s = sparse(rng, 9, 7)
    x = values(rng, (7, 3))
    got, _ = chip.run_spmm(s, x, Stage(14))
    same(got.rows, GOLDEN.spmm(s, x, Stage(14)).rows, "spmm after corner cases")


@cocotb.test()
async def descriptor_corner_cases(dut):
    control, chip = await setup(dut)
    control.read_stall, control.write_stall = 60, 30
    await bridge(corner_cases)(control, chip, np.random.default_rng(SEED + 2))


def broken_contract(chip: ChipBackend, rng, producers: bool):
    """Two producers (an SPMM and a GEMM both routing rows into the exchange) or two
    consumers (a LOAD and a GEMM both taking rows from it) in one batch."""
    n, k, L = 12, 9, CONFIG.lanes
    s = sparse(rng, n, k)
    batch, _, _ = chip.layout_spmm(s, values(rng, (k, L)), Stage(10))
    loads = [d for d in batch.descs
             if chip.lay.desc_layout.from_bits(d).unit == Unit.LOAD]
    spmm = [d for d in batch.descs if chip.lay.desc_layout.from_bits(d).unit == Unit.SPMM]
    for addr, words in batch.writes:
        chip.device.write(addr, words)
    gemm = dict(unit=Unit.GEMM, op=0, rows=n, k=1, m=1, shift=0, src_len=n, b_len=1)
    if producers:
        f = chip.lay.desc_layout.from_bits(spmm[0])
        spmm = [chip.descriptor(Unit.SPMM, bank=0, rows=n, src=int(f.src),
                                src_len=int(f.src_len), to_xchg=1)]
        descs = loads + spmm + [chip.descriptor(**gemm, to_xchg=1)]
        want = "both engines routed rows into the exchange at once"
    else:
        descs = [chip.descriptor(Unit.LOAD, bank=1, rows=n, from_xchg=1),
                 chip.descriptor(**gemm, from_xchg=1, to_mem=1)]
        want = "both engine inputs took rows from the exchange at once"
    try:
        chip.run_descriptors(descs, "a broken contract")
        raise AssertionError("a broken exchange contract went unreported")
    except DeviceError as e:
        assert f"the exchange router stopped a broken contract: {want}" in str(e), e


@cocotb.test()
@cocotb.parametrize(producers=[True, False])
async def broken_exchange_contract_is_an_error(dut, producers):
    control, chip = await setup(dut)
    await bridge(broken_contract)(chip, np.random.default_rng(SEED + 5), producers)
    assert int(dut.error.value), "the error flag is sticky"
    await control.reset()
    assert not int(dut.error.value), "a reset clears the error flag"
    s = sparse(np.random.default_rng(SEED + 6), 9, 7)
    x = values(np.random.default_rng(SEED + 7), (7, 3))
    got = (await bridge(chip.run_spmm)(s, x, Stage(14)))[0]
    same(got.rows, GOLDEN.spmm(s, x, Stage(14)).rows, "spmm after a broken contract")


@cocotb.test()
async def reset_between_runs(dut):
    control, chip = await setup(dut)
    rng = np.random.default_rng(SEED + 3)
    s = sparse(rng, 60, 50, density=0.3)
    x = values(rng, (50, 3 * CONFIG.lanes))
    batch, _, _ = chip.layout_spmm(s, x, Stage(16))
    for addr, words in batch.writes:
        control.write(addr, words)
    await control.flush()
    for i, d in enumerate(batch.descs):
        dut.harness.desc_src.mem[i].value = d
    dut.desc_count.value = len(batch.descs)
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    await ClockCycles(dut.clk, 150)  # in the middle of the batch
    assert int(dut.received.value) < len(batch.descs)
    await control.reset()
    assert int(dut.issued.value) == 0 and int(dut.idle.value) == 1

    def twice():
        for _ in range(2):
            got, _ = chip.run_spmm(s, x, Stage(16))
            same_result(got, GOLDEN.spmm(s, x, Stage(16)), "spmm after reset")

    await bridge(twice)()


def stress(control: HarnessControl, chip: ChipBackend, rng):
    """Seeded random kernels of random shapes (degree-0 rows, single rows, widths just
    over a multiple of the lanes), random stall levels, each checked against golden."""
    L = CONFIG.lanes
    for it in range(20):
        control.read_stall, control.write_stall, control.xchg_stall = (
            int(v) for v in rng.choice([0, 40, 120, 200], size=3))
        n, k = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        s = sp.random_array((n, k), density=float(rng.uniform(0, 0.6)), rng=rng,
                            format="csr")
        s.data = values(rng, s.nnz).astype(np.int64)
        kind = str(rng.choice(["spmm", "gemm", "spmm_gemm", "gemm_spmm", "beside"]))
        shift, shift2 = int(rng.integers(0, 34)), int(rng.integers(0, 34))
        relu = bool(rng.random() < 0.5)
        tag = (f"stress {it} ({kind}, n={n}, k={k}, stalls {control.read_stall}/"
               f"{control.write_stall}/{control.xchg_stall})")
        if kind == "spmm":
            x = values(rng, (k, int(rng.integers(1, 3 * L + 2))))
            mask = (rng.random((n, x.shape[1])) < 0.5) if rng.random() < 0.5 else None
            stage = Stage(shift, relu, mask)
            checks = [(chip.run_spmm(s, x, stage)[0], GOLDEN.spmm(s, x, stage))]
        elif kind == "gemm":
            form = str(rng.choice(["xw", "xwt", "xtg"]))
            x = values(rng, (n, int(rng.integers(1, 3 * L + 2))))
            m = int(rng.integers(1, 2 * L + 2))
            w = values(rng, {"xw": (x.shape[1], m), "xwt": (m, x.shape[1]),
                             "xtg": (n, m)}[form])
            stage = Stage(shift, relu and form != "xtg")
            checks = [(chip.run_gemm(form, x, w, stage)[0], GOLDEN.gemm(form, x, w, stage))]
            tag += f" {form} {x.shape}·{w.shape}"
        elif kind == "spmm_gemm":
            form = str(rng.choice(["xw", "xwt"]))
            f, m = int(rng.integers(1, L + 1)), int(rng.integers(1, L + 1))
            x = values(rng, (k, f))
            w = values(rng, (f, m) if form == "xw" else (m, f))
            stages = (Stage(shift), Stage(shift2, relu))
            got = chip.run_spmm_gemm(s, x, form, w, stages)[0]
            want = GOLDEN.spmm_gemm(s, x, form, w, stages)
            checks = [(got.first, want.first), (got.second, want.second)]
        elif kind == "gemm_spmm":
            form = str(rng.choice(["xw", "xwt"]))
            f, m = int(rng.integers(1, 2 * L + 2)), int(rng.integers(1, L + 1))
            x = values(rng, (k, f))
            w = values(rng, (f, m) if form == "xw" else (m, f))
            stages = (Stage(shift), Stage(shift2, relu))
            got = chip.run_gemm_spmm(form, x, w, s, stages)[0]
            want = GOLDEN.gemm_spmm(form, x, w, s, stages)
            checks = [(got.first, want.first), (got.second, want.second)]
        else:
            x = values(rng, (k, int(rng.integers(1, 2 * L + 2))))
            xg = values(rng, (int(rng.integers(1, 30)), int(rng.integers(1, 2 * L))))
            g = values(rng, (xg.shape[0], int(rng.integers(1, 2 * L))))
            stages = (Stage(shift), Stage(shift2))
            got = chip.run_spmm_and_gemm(s, x, "xtg", xg, g, stages)[0]
            want = GOLDEN.spmm_and_gemm(s, x, "xtg", xg, g, stages)
            checks = [(got.first, want.first), (got.second, want.second)]
        for got, want in checks:
            same_result(got, want, tag)


@cocotb.test()
async def random_stress(dut):
    control, chip = await setup(dut)
    await bridge(stress)(control, chip, np.random.default_rng(SEED + 4))

