"""Simulation harnesses that feed an engine from memories, so long runs need no Python
in the per-cycle loop: the testbench loads the memories in bulk (the simulator's
memory handles), sets word counts, pulses ``start`` and waits for ``done``; commands
come from a memory too, and output rows land in ``out_mem``.

A source reads ``count`` words, wrapping to address 0 every ``period`` words, so a
stream may replay its memory (the CSR of every pass, the same X slice each pass).
``elapsed`` counts the cycles from the first command's acceptance to the last row.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import DCEConfig, SAEConfig
from mixgcn.hdl.dce import DenseCombinationEngine
from mixgcn.hdl.sae import SparseAggregationEngine

__all__ = ["DCEHarness", "MemorySink", "MemorySource", "SAEHarness"]


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
        have = Signal()  # the word read last cycle waits on the stream
        advance = ~have | (self.o.valid & self.o.ready)
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(advance),
                     self.o.payload.eq(rd.data), self.o.valid.eq(have)]
        with m.If(self.start):
            m.d.sync += [addr.eq(0), fetched.eq(0), have.eq(0)]
        with m.Elif(advance):
            with m.If(fetched < self.count):
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


class _Harness(wiring.Component):
    """An engine whose input streams come from :class:`MemorySource` s (named
    ``<stream>_src``), whose output goes to a :class:`MemorySink` (``out_sink``)."""

    def __init__(self, engine, sources: dict, out_depth: int, cmd_depth: int = 64):
        self.engine = engine
        self.sources = {"cmd": MemorySource(engine.cmd_layout, cmd_depth)}
        self.sources.update({name: MemorySource(layout, depth)
                             for name, (layout, depth) in sources.items()})
        self.sink = MemorySink(engine.out_layout, out_depth)
        cw = engine.config.counter_width
        members = {f"{n}_{p}": In(32) for n in self.sources for p in ("count", "period")}
        members.update({
            "out_period": In(32), "rows_expected": In(32), "start": In(1),
            "done": Out(1), "elapsed": Out(unsigned(cw)),
            "busy_cycles": Out(unsigned(cw)), "starved_cycles": Out(unsigned(cw)),
            "blocked_cycles": Out(unsigned(cw)),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = engine = self.engine
        for name, src in self.sources.items():
            m.submodules[f"{name}_src"] = src
            wiring.connect(m, src.o, getattr(engine, name))
            m.d.comb += [src.count.eq(getattr(self, f"{name}_count")),
                         src.period.eq(getattr(self, f"{name}_period")),
                         src.start.eq(self.start)]
        m.submodules.out_sink = sink = self.sink
        wiring.connect(m, engine.out, sink.i)
        m.d.comb += [sink.period.eq(self.out_period), sink.start.eq(self.start)]
        for c in ("busy_cycles", "starved_cycles", "blocked_cycles"):
            m.d.comb += getattr(self, c).eq(getattr(engine, c))
        if hasattr(engine, "mask"):  # no ReLU' masks in the benchmarks
            m.d.comb += [engine.mask.valid.eq(1), engine.mask.payload.eq(0)]

        running = Signal()
        m.d.comb += self.done.eq(~running & (sink.received == self.rows_expected))
        with m.If(self.start):
            m.d.sync += [running.eq(0), self.elapsed.eq(0)]
        with m.Elif(engine.cmd.valid & engine.cmd.ready & ~running
                    & (sink.received != self.rows_expected)):
            m.d.sync += [running.eq(1), self.elapsed.eq(1)]
        with m.Elif(running):
            m.d.sync += self.elapsed.eq(self.elapsed + 1)
            with m.If(engine.out.valid & (sink.received + 1 == self.rows_expected)):
                m.d.sync += running.eq(0)
        return m


class DCEHarness(_Harness):
    """The DCE fed by ``cmd_src``, ``a_src`` and ``b_src``."""

    def __init__(self, config: DCEConfig, depth: int = 4096):
        engine = DenseCombinationEngine(config)
        super().__init__(engine, {"a": (engine.a_layout, depth), "b": (engine.b_layout, depth)},
                         out_depth=depth)


class SAEHarness(_Harness):
    """The SAE fed by ``cmd_src``, ``x_src`` and ``csr_src``."""

    def __init__(self, config: SAEConfig, x_depth: int | None = None, csr_depth: int = 1 << 16):
        engine = SparseAggregationEngine(config)
        x_depth = x_depth or config.max_nodes
        super().__init__(engine, {"x": (engine.x_layout, x_depth),
                                  "csr": (engine.csr_layout, csr_depth)},
                         out_depth=x_depth)
