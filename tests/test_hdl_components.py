"""The chip's components one by one in amaranth.sim, so a change to one block is caught
in seconds: the controller (in-order issue, fences, a full and an empty queue, status
records under backpressure), the exchange router (both directions, the fork to memory,
a broken contract) and the sparse engine (a small CSR against golden, crossed with idle
inputs and backpressure, ``follow``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from amaranth import Module, Signal
from amaranth.lib import data
from amaranth.sim import Simulator

from mixgcn.gen.config import CHIP_PRESETS, SAEConfig
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.hdl.controller import Controller, Unit
from mixgcn.hdl.dce import DCEOp
from mixgcn.hdl.router import ExchangeRouter
from mixgcn.hdl.sae import SAELayouts, SAEOp, SparseAggregationEngine
from mixgcn.hdl.timing import BlockRamFifo
from mixgcn.sim.build import CLOCK_PERIOD_NS
from mixgcn.sim.verify.sae_model import make_spmm_jobs

PERIOD = CLOCK_PERIOD_NS * 1e-9


def _bits(value) -> int:
    return value.as_bits() if isinstance(value, data.Const) else int(value)


def _raw(port):
    """A port as a plain value, so that ints (packed words) can be set on it."""
    return port.as_value() if isinstance(port, data.View) else port


async def send(ctx, strm, items, rng, idle=0.0, domain="sync"):
    """Drive ``items`` on ``strm``, idling at random between them; valid stays up until a
    clock edge sees ready (the stream rules)."""
    for item in items:
        while rng.random() < idle:
            await ctx.tick(domain)
        ctx.set(_raw(strm.payload), item)
        ctx.set(strm.valid, 1)
        await ctx.tick(domain).until(strm.ready)
        ctx.set(strm.valid, 0)


async def receive(ctx, strm, count, rng, ready=1.0, got=None, clock=None, stamps=None,
                  limit=20_000, domain="sync"):
    """Take ``count`` transfers from ``strm`` (as ints), ready at random, within
    ``limit`` cycles; with ``clock``, note its value at each transfer in ``stamps``."""
    got = [] if got is None else got
    for _ in range(limit):
        if len(got) == count:
            break
        r = rng.random() < ready
        ctx.set(strm.ready, int(r))
        *_, valid, payload = await ctx.tick(domain).sample(strm.valid, strm.payload)
        if r and valid:
            got.append(_bits(payload))
            if clock is not None:
                stamps.append(ctx.get(clock))
    else:
        raise AssertionError(f"{len(got)} of {count} transfers within {limit} cycles")
    ctx.set(strm.ready, 0)
    return got


def run(dut, *testbenches, background=(), clocks=None):
    """Simulate until the ``testbenches`` end (they time out themselves); ``clocks``:
    ``{domain: period}`` (default: ``sync`` only)."""
    sim = Simulator(dut)
    for domain, period in (clocks or {"sync": PERIOD}).items():
        sim.add_clock(period, domain=domain)
    for tb in background:
        sim.add_testbench(tb, background=True)
    for tb in testbenches:
        sim.add_testbench(tb)
    sim.run()


# ------------------------------------------------------------------------ controller

TINY = CHIP_PRESETS["tiny"]
LAY = ChipLayouts(TINY)


def desc(unit: Unit, **fields) -> int:
    return LAY.desc_layout.const({"unit": unit, **fields}).as_bits()


class EngineModel:
    """Stands in for an engine: takes commands at random and reports one row a cycle
    (with gaps), ``delay`` cycles after the command was taken."""

    def __init__(self, rng, delay=0):
        self.rng, self.delay, self.taken = rng, delay, []

    async def serve(self, ctx, cmd, layout, reports, clock):
        while True:
            ready = self.rng.random() < 0.6
            ctx.set(cmd.ready, int(ready))
            *_, valid, payload = await ctx.tick().sample(cmd.valid, cmd.payload)
            if not (ready and valid):
                continue
            ctx.set(cmd.ready, 0)
            c = layout.from_bits(_bits(payload))
            self.taken.append((ctx.get(clock), c))
            report, rows = reports(c)
            for _ in range(self.delay):
                await ctx.tick()
            for _ in range(rows):
                while self.rng.random() < 0.3:
                    await ctx.tick()
                ctx.set(report.row, 1)
                await ctx.tick()
                ctx.set(report.row, 0)


def controller_bench(descs, *, rng, dce_delay=0, status_ready=0.5):
    dut = Controller(LAY, desc_depth=TINY.desc_depth, counter_width=40, acc_width=48)
    sae, dce = EngineModel(rng), EngineModel(rng, delay=dce_delay)
    status, accepted = [], []
    s_lay, d_lay = LAY.sae_layouts.cmd_layout, LAY.dce_layouts.cmd_layout

    def sae_reports(c):
        return (dut.load, int(c.rows)) if c.op == SAEOp.LOAD else (dut.sae, int(c.rows))

    def dce_reports(c):
        return dut.dce, int(c.k) if c.op == DCEOp.XTG else int(c.rows)

    async def feeder(ctx):
        for d in descs:
            ctx.set(_raw(dut.desc.payload), d)
            ctx.set(dut.desc.valid, 1)
            await ctx.tick().until(dut.desc.ready)
            accepted.append(ctx.get(dut.cycles))
        ctx.set(dut.desc.valid, 0)

    status_times = []

    async def collect(ctx):
        for w in await receive(ctx, dut.status, len(descs), rng, status_ready,
                               clock=dut.cycles, stamps=status_times):
            status.append(LAY.status_layout.from_bits(w))
        for _ in range(20):
            await ctx.tick()
        assert ctx.get(dut.idle), "the controller is not idle after its last record"

    async def sae_engine(ctx):
        await sae.serve(ctx, dut.sae_cmd, s_lay, sae_reports, dut.cycles)

    async def dce_engine(ctx):
        await dce.serve(ctx, dut.dce_cmd, d_lay, dce_reports, dut.cycles)

    run(dut, collect, background=[feeder, sae_engine, dce_engine])
    return status, status_times, sae.taken, dce.taken, accepted


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_controller_issues_in_order_and_reports_every_descriptor(seed):
    rng = np.random.default_rng(seed)
    units = [Unit(int(u)) for u in rng.integers(0, 4, 40)]
    descs = []
    for u in units:
        fields = dict(rows=int(rng.integers(0, 6)))
        if u == Unit.GEMM:
            fields.update(op=[DCEOp.XW, DCEOp.XTG][int(rng.integers(0, 2))],
                          k=int(rng.integers(1, 5)))
        descs.append(desc(u, **fields))
    status, _, sae_taken, dce_taken, _ = controller_bench(descs, rng=rng)
    # every descriptor reported once; sequence numbers are the descriptors' order
    assert sorted(int(s.seq) for s in status) == list(range(len(descs)))
    by_seq = {int(s.seq): Unit(s.unit) for s in status}
    assert [by_seq[i] for i in range(len(descs))] == units
    # each engine took its commands in descriptor order
    sae_ops = [SAEOp.LOAD if u == Unit.LOAD else SAEOp.SPMM for u in units
               if u in (Unit.LOAD, Unit.SPMM)]
    assert [SAEOp(c.op) for _, c in sae_taken] == sae_ops
    assert len(dce_taken) == units.count(Unit.GEMM)


def test_a_fence_waits_for_everything_before_it():
    rng = np.random.default_rng(7)
    # a GEMM that finishes late, a fence, then a LOAD: the LOAD must not start (its
    # command not be taken) before the GEMM has completed, and the fence reports after it
    descs = [desc(Unit.GEMM, op=DCEOp.XW, rows=3, k=2), desc(Unit.FENCE, fence=1),
             desc(Unit.LOAD, rows=2)]
    status, times, sae_taken, _, _ = controller_bench(descs, rng=rng, dce_delay=300)
    done = {Unit(s.unit): t for s, t in zip(status, times, strict=True)}
    assert [Unit(s.unit) for s in status] == [Unit.GEMM, Unit.FENCE, Unit.LOAD]
    (load_taken, _), = sae_taken
    assert load_taken > done[Unit.GEMM], "the LOAD issued before the fence's GEMM completed"
    # without the fence bit the LOAD goes ahead of the slow GEMM
    descs[1] = desc(Unit.FENCE)
    status, times, sae_taken, _, _ = controller_bench(descs, rng=rng, dce_delay=300)
    done = {Unit(s.unit): t for s, t in zip(status, times, strict=True)}
    assert sae_taken[0][0] < done[Unit.GEMM]


def test_a_full_queue_holds_descriptors_back_and_none_is_lost():
    rng = np.random.default_rng(9)
    # GEMMs are slow and the DCE takes one command at a time: the queue fills up
    descs = [desc(Unit.GEMM, op=DCEOp.XW, rows=2, k=1) for _ in range(3 * TINY.desc_depth)]
    status, _, _, dce_taken, accepted = controller_bench(descs, rng=rng, dce_delay=60,
                                                         status_ready=0.2)
    assert len(status) == len(descs) == len(dce_taken)
    # the queue holds desc_depth descriptors, the GEMM unit one, its command register one,
    # the controller's head register one (+1 for the FIFO's output register): the rest
    # wait at the queue's input
    stalled = sum(1 for t in accepted if t > 60)
    assert stalled >= len(descs) - (TINY.desc_depth + 4)


# ---------------------------------------------------------------------------- router

ROW, X, A = LAY.row_layout, LAY.stream_layouts["x"], LAY.stream_layouts["a"]


def rows(rng, n):
    return [ROW.const({"data": list(rng.integers(-999, 999, TINY.lanes)),
                       "last": int(i == n - 1)}).as_bits() for i in range(n)]


def data_of(words):
    return [X.const(list(ROW.from_bits(w).data)).as_bits() for w in words]


def router_bench(route: dict, producers: dict, consumers: dict, *, rng, cycles=4000,
                 held=None):
    """Drive ``producers`` (port name -> row words) into a router with ``route`` set,
    and collect every port in ``consumers`` (port name -> expected count). ``held``:
    a producer port that offers a row all along, none of which may ever be routed
    (they wait in the router's input FIFO)."""
    dut = ExchangeRouter(row_layout=ROW, x_layout=X, a_layout=A,
                         pipeline_depth=TINY.pipeline_depth)
    got = {name: [] for name in consumers}

    async def setup(ctx):
        for name, value in route.items():
            ctx.set(getattr(dut.route, name), value)

    def producer(name, words):
        async def tb(ctx):
            await ctx.tick()
            await send(ctx, getattr(dut, name), words, rng, idle=0.3)
        return tb

    def consumer(name, count):
        async def tb(ctx):
            await ctx.tick()
            await receive(ctx, getattr(dut, name), count, rng, 0.5, got[name])
        return tb

    errors, taken = [], []

    async def watch(ctx):
        if held is not None:
            ctx.set(getattr(dut, held).valid, 1)
        while True:
            *_, err, routed = await ctx.tick().sample(
                dut.error, getattr(dut, held.replace("_out", "_routed")) if held else 0)
            errors.append((int(err.producers), int(err.consumers)))
            taken.append(int(routed))

    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    sim.add_testbench(setup)
    for name, words in producers.items():
        sim.add_testbench(producer(name, words), background=True)
    for name, count in consumers.items():
        sim.add_testbench(consumer(name, count), background=True)
    sim.add_testbench(watch, background=True)
    sim.run_until(PERIOD * cycles)
    assert not any(taken), f"a row of {held} was routed"
    return got, errors


@pytest.mark.parametrize("seed", [1, 2])
def test_router_forks_sae_rows_to_memory_and_the_dce(seed):
    rng = np.random.default_rng(seed)
    words = rows(rng, 30)
    got, errors = router_bench(dict(sae_to_mem=1, sae_to_xchg=1, a_from_xchg=1),
                               {"sae_out": words}, {"sae_mem": 30, "dce_a": 30}, rng=rng)
    assert got["sae_mem"] == words  # every row, once, in order
    assert got["dce_a"] == data_of(words)
    assert set(errors) == {(0, 0)}


def test_router_feeds_dce_rows_to_the_sae_buffer():
    rng = np.random.default_rng(4)
    words = rows(rng, 25)
    got, errors = router_bench(dict(dce_to_xchg=1, x_from_xchg=1), {"dce_out": words},
                               {"sae_x": 25}, rng=rng)
    assert got["sae_x"] == data_of(words)
    assert set(errors) == {(0, 0)}


def test_router_passes_memory_operands_through():
    rng = np.random.default_rng(5)
    xs = [X.const(list(rng.integers(-99, 99, TINY.lanes))).as_bits() for _ in range(20)]
    got, _ = router_bench(dict(sae_to_mem=1), {"x_mem": xs, "a_mem": xs},
                          {"sae_x": 20, "dce_a": 20}, rng=rng)
    assert got["sae_x"] == xs and got["dce_a"] == xs


def test_two_producers_raise_the_error_and_lose_no_row():
    rng = np.random.default_rng(6)
    sae_rows = rows(rng, 12)
    got, errors = router_bench(
        dict(sae_to_xchg=1, dce_to_xchg=1, dce_to_mem=1, a_from_xchg=1),
        {"sae_out": sae_rows}, {"dce_a": 12}, rng=rng, held="dce_out")
    assert got["dce_a"] == data_of(sae_rows)  # the SAE has the exchange
    assert errors[-1] == (1, 0)  # and the DCE's row waits whole: not half-routed


def test_two_consumers_raise_the_error_and_duplicate_no_row():
    rng = np.random.default_rng(8)
    words = rows(rng, 12)
    got, errors = router_bench(dict(sae_to_xchg=1, x_from_xchg=1, a_from_xchg=1),
                               {"sae_out": words}, {"sae_x": 12, "dce_a": 0}, rng=rng)
    assert got["sae_x"] == data_of(words) and got["dce_a"] == []
    assert errors[-1] == (0, 1)


# ------------------------------------------------------------------ pipeline FIFO


@pytest.mark.parametrize(("depth", "idle", "ready", "fills"),
                         [(1, 0.0, 1.0, False), (5, 0.3, 0.5, True), (5, 0.0, 0.2, True),
                          (16, 0.6, 0.9, False)])
def test_block_ram_fifo_hands_on_every_word_in_order(depth, idle, ready, fills):
    rng = np.random.default_rng(depth)
    dut = BlockRamFifo(12, depth)
    words = [int(w) for w in rng.integers(0, 1 << 12, 300)]
    got, levels = [], []

    async def producer(ctx):
        await send(ctx, dut.w_stream, words, rng, idle=idle)

    async def consumer(ctx):
        await receive(ctx, dut.r_stream, len(words), rng, ready, got)

    async def watch(ctx):
        while True:
            *_, level = await ctx.tick().sample(dut.level)
            levels.append(int(level))

    run(dut, consumer, background=(producer, watch))
    assert got == words
    # it holds its RAM's words and two more, and a slow consumer fills it
    assert max(levels) <= depth + 2 and (max(levels) == depth + 2) == fills


def test_block_ram_fifo_runs_at_full_rate():
    # producer and consumer always ready: the words leave a cycle apart
    dut = BlockRamFifo(8, 4)
    stamps, clock = [], Signal(16)
    m = Module()
    m.submodules.fifo = dut
    m.d.sync += clock.eq(clock + 1)
    words = list(range(1, 41))

    async def producer(ctx):
        await send(ctx, dut.w_stream, words, np.random.default_rng(0))

    async def consumer(ctx):
        await receive(ctx, dut.r_stream, len(words), np.random.default_rng(0), 1.0,
                      got := [], clock, stamps)
        assert got == words

    run(m, consumer, background=(producer,))
    assert np.all(np.diff(stamps) == 1), stamps


# ------------------------------------------------------------------------------- SAE

SAE = SAEConfig(lanes=2, edges=2, max_nodes=40, out_fifo_depth=3)


@pytest.mark.parametrize(("idle", "ready"), [(0.0, 1.0), (0.4, 1.0), (0.0, 0.4), (0.4, 0.4)])
@pytest.mark.parametrize("follow", [False, True])
def test_sae_against_golden(idle, ready, follow):
    sae_bench(idle, ready, follow)


def test_sae_follows_slow_loads_across_commands():
    """Loads far slower than the SpMMs that follow them: each SpMM's beats wait for
    their rows, and the next command's first beat is checked against its own bank's
    fill, not the previous command's (the beats of all commands come in one stream)."""
    sae_bench(0.0, 1.0, True, x_idle=0.9)


# a buffer of 8 rows and 16 rows of partial sums: the 26 columns below run in windows
WINDOWED = dataclasses.replace(SAE, max_nodes=8, partial_rows=16)


@pytest.mark.parametrize(("idle", "ready"), [(0.0, 1.0), (0.4, 0.4)])
def test_sae_in_column_windows(idle, ready):
    """S gathers from more rows than the buffer holds: blocks of rows in column windows,
    their sums kept at accumulator width between windows and rounded once — the same
    rows, bit for bit."""
    sae_bench(idle, ready, True, config=WINDOWED)


def sae_bench(idle, ready, follow, x_idle=None, config=SAE):
    rng = np.random.default_rng(int(idle * 10 + ready * 100 + follow))
    n, k = 30, 26
    dense = np.where(rng.random((n, k)) < 0.2, rng.integers(-3000, 3000, (n, k)), 0)
    dense[[3, 4]] = 0  # empty rows
    dense[7] = rng.integers(1, 3000, k)  # a full row
    s = sp.csr_array(dense)
    x = rng.integers(-3000, 3000, (k, 2 * SAE.lanes + 1))  # three passes
    mask = rng.random((n, x.shape[1])) < 0.7
    jobs = make_spmm_jobs(config, s, x, shift=9, relu=True, mask=mask, junk=rng)
    if config is not SAE:  # really in windows, partial sums kept and added
        assert any(j.keep for j in jobs) and any(j.accumulate for j in jobs)
    lay = SAELayouts(config)
    cmds, xs, beats, masks, want = [], [], [], [], []
    for job in jobs:
        load, spmm = job.commands()
        spmm["follow"] = int(follow)
        cmds += [lay.cmd_layout.const(load).as_bits(), lay.cmd_layout.const(spmm).as_bits()]
        xs += [lay.x_layout.const(w).as_bits() for w in job.x_words]
        beats += [lay.csr_layout.const(b).as_bits() for b in job.beats]
        masks += job.mask_words
        want += [r + [int(i == len(job.expected) - 1)] for i, r in
                 enumerate(job.expected.tolist())]
    dut = SparseAggregationEngine(config)
    got = []

    async def sink(ctx):
        for w in await receive(ctx, dut.out, len(want), rng, ready):
            row = lay.out_layout.from_bits(w)
            got.append([int(v) for v in row.data] + [int(row.last)])

    def source(strm, words, idle=idle):
        async def tb(ctx):
            await send(ctx, strm, words, rng, idle)
        return tb

    run(dut, sink, background=[source(dut.cmd, cmds),
                               source(dut.x, xs, idle if x_idle is None else x_idle),
                               source(dut.csr, beats), source(dut.mask, masks)])
    assert got == want  # the rows golden's output stage gives (sae_model.make_spmm_jobs)
