"""Simulation harnesses that feed an engine from memories, so long runs need no Python
in the per-cycle loop: the testbench loads the memories in bulk (the simulator's
memory handles), sets word counts, pulses ``start`` and waits for ``done``; commands
come from a memory too, and output rows land in a sink memory. One harness may hold
several engines. The engine benchmarks use these harnesses; the chip has its own
(:mod:`mixgcn.sim.chip_harness`), which reuses :class:`MemorySource` and :class:`MemorySink`.

A source reads ``count`` words, wrapping to address 0 every ``period`` words, so a
stream may replay its memory (the CSR of every pass, the same X slice each pass). It
streams only after a ``start``: a reset never replays it.
``elapsed`` counts the cycles from the first command's acceptance to the last row.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import DCEConfig, SAEConfig
from mixgcn.hdl.dce import DenseCombinationEngine
from mixgcn.hdl.sae import SparseAggregationEngine

__all__ = ["Harness", "MemorySink", "MemorySource", "dce_feed", "sae_feed"]


def _next(addr, period):
    return Mux(addr + 1 >= period, 0, addr + 1)


class MemorySource(wiring.Component):
    """Streams ``count`` words of its memory (addresses 0, 1, ..., wrapping at
    ``period``) as fast as the stream takes them."""

    def __init__(self, layout, depth: int):
        self.layout, self.depth = layout, depth
        super().__init__({
            "o": Out(stream.Signature(layout)),
            "count": In(32), "period": In(32), "start": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.layout, depth=self.depth, init=[])
        rd = mem.read_port(transparent_for=())
        addr = Signal(range(self.depth))
        fetched = Signal(32)
        armed = Signal()  # started since reset: a reset never replays the memory
        have = Signal()  # the word read last cycle waits on the stream
        advance = ~have | (self.o.valid & self.o.ready)
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(advance),
                     self.o.payload.eq(rd.data), self.o.valid.eq(have)]
        with m.If(self.start):
            m.d.sync += [addr.eq(0), fetched.eq(0), have.eq(0), armed.eq(1)]
        with m.Elif(advance):
            with m.If(armed & (fetched < self.count)):
                m.d.sync += [fetched.eq(fetched + 1), have.eq(1),
                             addr.eq(_next(addr, self.period))]
            with m.Else():
                m.d.sync += have.eq(0)
        return m


class MemorySink(wiring.Component):
    """Takes every word (always ready) into its memory at addresses wrapping at
    ``period``, and counts them."""

    def __init__(self, layout, depth: int):
        self.layout, self.depth = layout, depth
        super().__init__({
            "i": In(stream.Signature(layout)),
            "period": In(32), "start": In(1), "received": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.layout, depth=self.depth, init=[])
        wr = mem.write_port()
        addr = Signal(range(self.depth))
        m.d.comb += [self.i.ready.eq(1), wr.addr.eq(addr), wr.data.eq(self.i.payload),
                     wr.en.eq(self.i.valid)]
        with m.If(self.start):
            m.d.sync += [addr.eq(0), self.received.eq(0)]
        with m.Elif(self.i.valid):
            m.d.sync += [self.received.eq(self.received + 1), addr.eq(_next(addr, self.period))]
        return m


class _Feed:
    """One engine with :class:`MemorySource` s on its inputs (``cmd``, its data streams and
    ``mask``) and a :class:`MemorySink` on ``out``; its harness ports are named
    ``<prefix>_<port>``."""

    STATUS = ("busy_cycles", "starved_cycles", "blocked_cycles", "op_cycles",
              "max_abs", "saturated")

    def __init__(self, prefix: str, engine, sources: dict, out_depth: int, cmd_depth: int):
        self.prefix, self.engine = prefix, engine
        self.sources = {"cmd": MemorySource(engine.cmd_layout, cmd_depth)}
        self.sources.update({name: MemorySource(layout, depth)
                             for name, (layout, depth) in sources.items()})
        self.sink = MemorySink(engine.out_layout, out_depth)

    def members(self) -> dict:
        p, c = self.prefix, self.engine.config
        members = {f"{p}_{n}_{q}": In(32) for n in self.sources for q in ("count", "period")}
        members.update({f"{p}_out_period": In(32), f"{p}_rows_expected": In(32),
                        f"{p}_start": In(1), f"{p}_done": Out(1),
                        f"{p}_elapsed": Out(unsigned(c.counter_width))})
        for name in self.STATUS:
            members[f"{p}_{name}"] = Out(len(getattr(self.engine, name)))
        return members

    def elaborate(self, m: Module, ports):
        p, engine = self.prefix, self.engine

        def port(name):
            return getattr(ports, f"{p}_{name}")

        m.submodules[f"{p}_engine"] = engine
        for name, src in self.sources.items():
            m.submodules[f"{p}_{name}_src"] = src
            wiring.connect(m, src.o, getattr(engine, name))
            m.d.comb += [src.count.eq(port(f"{name}_count")),
                         src.period.eq(port(f"{name}_period")), src.start.eq(port("start"))]
        m.submodules[f"{p}_out_sink"] = sink = self.sink
        wiring.connect(m, engine.out, sink.i)
        m.d.comb += [sink.period.eq(port("out_period")), sink.start.eq(port("start"))]
        for name in self.STATUS:
            m.d.comb += port(name).eq(getattr(engine, name))

        running, elapsed, expected = Signal(name=f"{p}_running"), port("elapsed"), \
            port("rows_expected")
        m.d.comb += port("done").eq(~running & (sink.received == expected))
        with m.If(port("start")):
            m.d.sync += [running.eq(0), elapsed.eq(0)]
        with m.Elif(engine.cmd.valid & engine.cmd.ready & ~running
                    & (sink.received != expected)):
            m.d.sync += [running.eq(1), elapsed.eq(1)]
        with m.Elif(running):
            m.d.sync += elapsed.eq(elapsed + 1)
            with m.If(engine.out.valid & (sink.received + 1 == expected)):
                m.d.sync += running.eq(0)


class Harness(wiring.Component):
    """Engines fed from memories, side by side (see :class:`_Feed` for the ports)."""

    def __init__(self, feeds: list[_Feed]):
        self.feeds = feeds
        members = {}
        for f in feeds:
            members.update(f.members())
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for f in self.feeds:
            f.elaborate(m, self)
        return m


def dce_feed(config: DCEConfig, depth: int = 4096, prefix: str = "dce") -> _Feed:
    """The DCE fed by ``cmd``, ``a``, ``b`` and ``mask`` sources, each ``depth`` words."""
    e = DenseCombinationEngine(config)
    return _Feed(prefix, e, {"a": (e.a_layout, depth), "b": (e.b_layout, depth),
                             "mask": (unsigned(config.cols), depth)}, depth, 64)


def sae_feed(config: SAEConfig, csr_depth: int = 1 << 16, prefix: str = "sae") -> _Feed:
    """The SAE fed by ``cmd``, ``x``, ``csr`` and ``mask`` sources (rows: the buffer's
    ``max_nodes``; beats: ``csr_depth``)."""
    e = SparseAggregationEngine(config)
    n = config.max_nodes
    return _Feed(prefix, e, {"x": (e.x_layout, n), "csr": (e.csr_layout, csr_depth),
                             "mask": (unsigned(config.lanes), n)}, n, 64)
