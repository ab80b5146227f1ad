"""A simulation harness that feeds the DCE from memories, so long runs need no Python
in the per-cycle loop: the testbench loads ``a_mem``/``b_mem`` in bulk (the simulator's
memory handles), sets the word counts, pulses ``start``, issues one command and waits
for ``done``; the output rows land in ``out_mem``.

The sources read their memory circularly (word *i* is ``mem[i % depth]``), so a run
can be longer than the memory: the data simply repeats, and the expected result is
computed from the same repeated data.
"""

from __future__ import annotations

from amaranth import Module, Signal, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import DCEConfig
from mixgcn.hdl.dce import DenseCombinationEngine

__all__ = ["DCEHarness"]


class DCEHarness(wiring.Component):
    def __init__(self, config: DCEConfig, a_depth: int = 4096, b_depth: int = 4096,
                 out_depth: int = 4096):
        for name, d in (("a_depth", a_depth), ("b_depth", b_depth), ("out_depth", out_depth)):
            if d < 1 or d & (d - 1):
                raise ValueError(f"{name} must be a power of two, got {d}")
        self.config = config
        self.a_depth, self.b_depth, self.out_depth = a_depth, b_depth, out_depth
        self.dce = DenseCombinationEngine(config)
        cw = config.counter_width
        super().__init__({
            "cmd": In(self.dce.cmd_layout),
            "cmd_valid": In(1),
            "cmd_ready": Out(1),
            "a_count": In(32),
            "b_count": In(32),
            "rows_expected": In(32),
            "start": In(1),
            "done": Out(1),
            "elapsed": Out(unsigned(cw)),
            "busy_cycles": Out(unsigned(cw)),
            "starved_cycles": Out(unsigned(cw)),
            "blocked_cycles": Out(unsigned(cw)),
            "op_cycles": Out(unsigned(cw)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dce = dce = self.dce
        m.d.comb += [
            dce.cmd.payload.eq(self.cmd), dce.cmd.valid.eq(self.cmd_valid),
            self.cmd_ready.eq(dce.cmd.ready),
            self.busy_cycles.eq(dce.busy_cycles), self.starved_cycles.eq(dce.starved_cycles),
            self.blocked_cycles.eq(dce.blocked_cycles), self.op_cycles.eq(dce.op_cycles),
            dce.mask.valid.eq(1), dce.mask.payload.eq(0), dce.out.ready.eq(1),
        ]

        def source(name, stream, layout, depth, count):
            mem = memory.Memory(shape=layout, depth=depth, init=[])
            m.submodules[f"{name}_mem"] = mem
            rd = mem.read_port(transparent_for=())
            # a word is fetched one cycle ahead; `have` says the fetched word is valid
            have = Signal(name=f"{name}_have")
            fetch = Signal(32, name=f"{name}_fetch")
            take = stream.valid & stream.ready
            advance = ~have | take
            m.d.comb += [
                rd.addr.eq(fetch % depth),
                rd.en.eq(advance),
                stream.payload.eq(rd.data),
                stream.valid.eq(have),
            ]
            with m.If(self.start):
                m.d.sync += [fetch.eq(0), have.eq(0)]
            with m.Elif(advance):
                with m.If(fetch < count):
                    m.d.sync += [fetch.eq(fetch + 1), have.eq(1)]
                with m.Else():
                    m.d.sync += have.eq(0)

        source("a", dce.a, dce.a_layout, self.a_depth, self.a_count)
        source("b", dce.b, dce.b_layout, self.b_depth, self.b_count)

        out_mem = memory.Memory(shape=dce.out_layout, depth=self.out_depth, init=[])
        m.submodules.out_mem = out_mem
        wr = out_mem.write_port()
        rows = Signal(32)
        running = Signal()
        m.d.comb += [wr.addr.eq(rows % self.out_depth), wr.data.eq(dce.out.payload),
                     wr.en.eq(dce.out.valid)]
        m.d.comb += self.done.eq(~running & (rows == self.rows_expected))
        with m.If(self.start):
            m.d.sync += [rows.eq(0), self.elapsed.eq(0), running.eq(0)]
        with m.Else():
            with m.If(dce.out.valid):
                m.d.sync += rows.eq(rows + 1)
            # elapsed: from the command's acceptance to the last row leaving the engine
            with m.If(self.cmd_valid & dce.cmd.ready):
                m.d.sync += [running.eq(1), self.elapsed.eq(1)]
            with m.Elif(running):
                m.d.sync += self.elapsed.eq(self.elapsed + 1)
                with m.If(dce.out.valid & (rows + 1 == self.rows_expected)):
                    m.d.sync += running.eq(0)
        return m
