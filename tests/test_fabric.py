"""The exchange fabric in amaranth.sim against a model of the all-to-all: scatter (each
row to its owner, the P slices merged) and gather (every row to every chip, each its
lanes, in row order), on crossbar and serial links (flits narrower than a value and
not dividing a row, latency, few credits), with random idle sources, random ready
destinations and random link stalls, over several transfers in a row; and the same
all-to-all with a chip per board, each in its own clock, joined through the board
tops' serial bridges pin to pin."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import ClockDomain, ClockSignal, DomainRenamer, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import CHIP_PRESETS, FabricConfig, SystemConfig
from mixgcn.hdl.board import SerialBridge
from mixgcn.hdl.fabric import ExchangeFabric, FabricEnd, FabricMode, Link, route_layout
from mixgcn.hdl.output_stage import output_layout
from mixgcn.host.sharding import column_slices
from tests.test_hdl_components import receive, run, send

TINY = CHIP_PRESETS["tiny"]  # 4 lanes of 16 bits
FABRICS = {
    "crossbar": FabricConfig(),
    "serial": FabricConfig(kind="serial", link_width=8, latency=3, credits=4),
    "serial-odd": FabricConfig(kind="serial", link_width=5, latency=2, credits=2),
}


def _row(layout, values, last) -> int:
    return layout.const({"data": [int(v) for v in values], "last": int(last)}).as_bits()


def expected(mode: FabricMode, rows: list[np.ndarray], slices, P: int):
    """What each chip receives: ``rows[p]`` is chip p's outgoing rows (values)."""
    L = rows[0].shape[1]
    keep = [np.isin(np.arange(L), np.arange(lo, lo + n)) for lo, n in slices]
    out = [[] for _ in range(P)]
    if mode == FabricMode.SCATTER:
        N = len(rows[0])
        for r in range(N):
            merged = sum(np.where(keep[p], rows[p][r], 0) for p in range(P))
            out[r % P].append((merged, r == N - 1))
    else:
        N = sum(len(r) for r in rows)
        for r in range(N):
            src = rows[r % P][r // P]
            for p in range(P):
                out[p].append((np.where(keep[p], src, 0), r >= N - P))
    return out


def fabric_bench(config: SystemConfig, transfers, *, seed: int, idle: float, ready: float,
                 stall: float, dut=None, clocks=None):
    """Run ``transfers`` ([(mode, N, F)]) one after the other and check every row.
    ``dut``: a fabric with :class:`ExchangeFabric`'s ports (default: one), chip p's
    ports in domain ``dut.domains[p]``; ``clocks``: ``{domain: period}``."""
    P, L = config.chips, config.chip.lanes
    dut = ExchangeFabric(config) if dut is None else dut
    domains = getattr(dut, "domains", ["sync"] * P)
    lay = dut.row_layout
    rng = np.random.default_rng(seed)
    plan = []
    for mode, N, F in transfers:
        slices = [(int(c[0]), len(c)) for c in column_slices(F, P)]
        if mode == FabricMode.SCATTER:
            rows = [rng.integers(-2**15, 2**15, size=(N, L)) for _ in range(P)]
        else:
            rows = [rng.integers(-2**15, 2**15, size=(len(range(p, N, P)), L))
                    for p in range(P)]
        plan.append((mode, slices, rows, expected(mode, rows, slices, P)))
    phase = [0] * (len(transfers) + 1)  # chips done with each transfer, each side

    def source(p):
        async def tb(ctx):
            for t, (_mode, _slices, rows, _) in enumerate(plan):
                while phase[t] < 2 * P:  # a route holds until every chip has it all
                    await ctx.tick(domains[p])
                items = [_row(lay, v, i == len(rows[p]) - 1) for i, v in enumerate(rows[p])]
                await send(ctx, dut.src[p], items, np.random.default_rng(seed + p), idle,
                           domain=domains[p])
                phase[t + 1] += 1
        return tb

    def sink(q):
        async def tb(ctx):
            for t, (_, _, _, want) in enumerate(plan):
                while phase[t] < 2 * P:
                    await ctx.tick(domains[q])
                got = await receive(ctx, dut.dst[q], len(want[q]),
                                    np.random.default_rng(seed + 100 + q), ready,
                                    limit=40_000, domain=domains[q])
                for i, (word, (values, last)) in enumerate(zip(got, want[q], strict=True)):
                    assert word == _row(lay, values, last), (
                        f"transfer {t}, chip {q}, row {i}: got "
                        f"{data.Const(lay, word)}, expected {values} last={last}")
                phase[t + 1] += 1
        return tb

    async def control(ctx):
        for t, (mode, slices, _, _) in enumerate(plan):
            ctx.set(dut.route, {"mode": mode, "lo": [lo for lo, _ in slices],
                                "count": [n for _, n in slices]})
            phase[t] = 2 * P
            while phase[t + 1] < 2 * P:
                await ctx.tick(domains[0])
        if hasattr(dut, "overrun"):  # sticky, through a synchroniser: a few cycles on
            await ctx.tick(domains[0]).repeat(8)
            assert ctx.get(dut.overrun) == 0, f"a bridge overran: {ctx.get(dut.overrun):b}"

    async def stalls(ctx):
        r = np.random.default_rng(seed + 7)
        while True:
            ctx.set(dut.stall, int(sum(1 << i for i in range(P * P) if r.random() < stall)))
            await ctx.tick(domains[0])

    run(dut, control, *(source(p) for p in range(P)), *(sink(q) for q in range(P)),
        background=[stalls], clocks=clocks)
    return dut


@pytest.mark.parametrize("kind", FABRICS)
@pytest.mark.parametrize("P", [2, 3])
def test_fabric_moves_every_row_of_both_modes_under_stalls(kind, P):
    config = SystemConfig(chip=TINY, chips=P, fabric=FABRICS[kind])
    transfers = [(FabricMode.SCATTER, 11, 4), (FabricMode.GATHER, 10, 3),
                 (FabricMode.SCATTER, 7, P), (FabricMode.GATHER, P, 4)]
    fabric_bench(config, transfers, seed=P * 10 + len(kind), idle=0.3, ready=0.6, stall=0.2)


@pytest.mark.parametrize("kind", FABRICS)
def test_fabric_at_full_speed(kind):
    """No idle, always ready, no stalls: the flow control alone (credits, latency)."""
    config = SystemConfig(chip=TINY, chips=4, fabric=FABRICS[kind])
    fabric_bench(config, [(FabricMode.SCATTER, 23, 4), (FabricMode.GATHER, 21, 4)],
                 seed=4, idle=0.0, ready=1.0, stall=0.0)


def test_a_serial_link_sends_only_the_chunks_its_lanes_touch():
    """Lanes 1..2 of 16-bit values over 8-bit flits: bits 16..47, chunks 2..5 — four
    flits a row, counted by the link."""
    link = Link(lanes=4, value_width=16, width=8, latency=2, credits=3)
    lay = link.row_layout
    rows = [[1, 2, 3, 4], [-5, -6, -7, -8], [9, 10, 11, 12]]

    async def tb(ctx):
        ctx.set(link.lo, 1)
        ctx.set(link.count, 2)
        await send(ctx, link.i, [_row(lay, r, i == 2) for i, r in enumerate(rows)],
                   np.random.default_rng(0))

    async def check(ctx):
        got = await receive(ctx, link.o, 3, np.random.default_rng(1), 0.5)
        for word, r, last in zip(got, rows, (0, 0, 1), strict=True):
            assert word == _row(lay, [0, r[1], r[2], 0], last)
        assert ctx.get(link.flits) == 12

    run(link, tb, check)


# ------------------------------------------------------------- a chip per board


class BoardsOnPins(wiring.Component):
    """P chips' fabric ends as the board tops join them: each on its own board with its
    own clock (domain ``c<p>``), a :class:`SerialBridge` per other board, each board's
    link pins wired to the other's, the clock forwarded inverted (domain ``rx<p>_<q>``:
    chip q's clock as board p sees it). The ports are :class:`ExchangeFabric`'s;
    ``overrun[p·P + q]``: board p's bridge to q overran (it must not)."""

    def __init__(self, config: SystemConfig):
        P, L, W = config.chips, config.chip.lanes, config.chip.sae.width
        self.config, self.row_layout = config, output_layout(W, L)
        self.domains = [f"c{p}" for p in range(P)]
        super().__init__({
            "route": In(route_layout(P, L)),
            "src": In(stream.Signature(self.row_layout)).array(P),
            "dst": Out(stream.Signature(self.row_layout)).array(P),
            "stall": In(P * P), "overrun": Out(P * P),
        })
        self.ends = [FabricEnd(config, p) for p in range(P)]
        self.bridges = {(p, q): SerialBridge(width=config.link_width(p, q),
                                             credits=config.link_credits(p, q),
                                             peer_credits=config.link_credits(q, p),
                                             rx_domain=f"rx{p}_{q}")
                        for p in range(P) for q in range(P) if p != q}

    def elaborate(self, platform):
        m = Module()
        P = self.config.chips
        for p, end in enumerate(self.ends):
            m.domains += ClockDomain(f"c{p}")
            m.submodules[f"end_{p}"] = DomainRenamer({"sync": f"c{p}"})(end)
            m.d.comb += [end.route.eq(self.route),
                         end.stall.eq(self.stall[p * P:(p + 1) * P])]
            wiring.connect(m, wiring.flipped(self.src[p]), end.src)
            wiring.connect(m, end.dst, wiring.flipped(self.dst[p]))
        for (p, q), bridge in self.bridges.items():
            m.domains += ClockDomain(f"rx{p}_{q}")
            m.d.comb += ClockSignal(f"rx{p}_{q}").eq(~ClockSignal(f"c{q}"))
            m.submodules[f"bridge_{p}_{q}"] = DomainRenamer({"sync": f"c{p}"})(bridge)
            wiring.connect(m, getattr(self.ends[p], f"to_{q}"), bridge.to_peer)
            wiring.connect(m, bridge.from_peer, getattr(self.ends[p], f"from_{q}"))
            m.d.comb += [bridge.rx.eq(self.bridges[q, p].tx),
                         self.overrun[p * P + q].eq(bridge.overrun)]
        return m


# periods far apart (real boards differ by parts per million): every crossing's
# phase comes up, and a faster sender meets a slower receiver both ways
BOARD_PERIODS = (10e-9, 13.1e-9, 7.3e-9)


@pytest.mark.parametrize("kind", ["serial", "serial-odd"])
@pytest.mark.parametrize("P", [2, 3])
def test_boards_joined_on_pins_move_every_row_in_their_own_clocks(kind, P):
    config = SystemConfig(chip=TINY, chips=P, fabric=FABRICS[kind])
    dut = BoardsOnPins(config)
    transfers = [(FabricMode.SCATTER, 11, 4), (FabricMode.GATHER, 10, 3),
                 (FabricMode.SCATTER, 7, P), (FabricMode.GATHER, P, 4)]
    fabric_bench(config, transfers, seed=P * 20 + len(kind), idle=0.3, ready=0.6,
                 stall=0.2, dut=dut, clocks=dict(zip(dut.domains, BOARD_PERIODS[:P], strict=True)))


def test_boards_on_pins_at_full_speed_never_overrun():
    """No idle, always ready, no stalls: every link as busy as its credits let it, and
    no bridge's FIFO overruns (its depth is the words that can be in flight)."""
    config = SystemConfig(chip=TINY, chips=3, fabric=FABRICS["serial"])
    dut = BoardsOnPins(config)
    fabric_bench(config, [(FabricMode.SCATTER, 23, 4), (FabricMode.GATHER, 21, 4)],
                 seed=5, idle=0.0, ready=1.0, stall=0.0, dut=dut,
                 clocks=dict(zip(dut.domains, BOARD_PERIODS, strict=True)))
