"""The chip on a board's DRAM in simulation: the chip's memory port through
:class:`~mixgcn.hdl.dram.DRAMBridge` into LiteDRAM's controller and its model of the
DRAM (:mod:`mixgcn.gen.dram`, module ``mixgcn_dram``), in place of the memory model.

Python still moves words in bulk through files, as with the memory model: a *staging*
memory (``mixgcn_memory.v`` with one read and one write channel, instance ``mem``)
takes the load files and writes the dump files, and two :class:`WordCopier`\\ s move
words between it and the DRAM through the controller — the way a board's host link
writes and reads its memory, with the chip's ``x`` and ``sae`` channels lent to them
by a :class:`~mixgcn.hdl.host_link.MemoryArbiter` while no batch runs. So every word
the chip reads was written into the DRAM model by its controller.

Ports beside :func:`~mixgcn.sim.chip.harness.harness_ports`: ``copy_in`` /
``copy_out`` (a cycle each: copy words ``dump_first``..``dump_last`` from staging to
DRAM, or back), ``copy_busy``, ``dram_ready`` (the DRAM is initialised: after a
reset, the controller takes no command before), ``dram_clk`` (the controller's
clock, which the simulation's top toggles at the part's rate:
:func:`~mixgcn.sim.chip.harness.clocked_top`).
"""

from __future__ import annotations

from amaranth import ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import ChipConfig
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.hdl.dram import DRAMBridge, dram_controller
from mixgcn.hdl.host_link import MemoryArbiter
from mixgcn.hdl.memport import ReadChannel, WriteChannel

__all__ = ["DRAM_PORTS", "WordCopier", "dram_memory"]

DRAM_PORTS = {"copy_in": In(1), "copy_out": In(1), "copy_busy": Out(1), "dram_ready": Out(1),
              "dram_clk": In(1)}


class WordCopier(wiring.Component):
    """Copies words ``first``..``last`` (sampled with the one-cycle ``start``) from
    ``src`` to the same addresses of ``dst``; ``busy`` until the last is written.
    A read's word cannot be refused, so a read is asked for only with room for it in
    the FIFO between the two sides."""

    def __init__(self, addr_width: int, mem_width: int, depth: int = 8):
        self.depth = depth
        super().__init__({
            "start": In(1), "first": In(addr_width), "last": In(addr_width),
            "busy": Out(1),
            "src": Out(ReadChannel(addr_width, mem_width)),
            "dst": Out(WriteChannel(addr_width, mem_width)),
        })

    def elaborate(self, platform):
        m = Module()
        aw = len(self.first)
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=len(self.dst.wr.payload.data),
                                                    depth=self.depth)
        ask, put, last = Signal(aw + 1), Signal(aw + 1), Signal(aw + 1)
        asking = Signal()
        flight = Signal(range(self.depth + 1))  # asked for, not yet in the FIFO
        with m.If(self.start):
            m.d.sync += [ask.eq(self.first), put.eq(self.first), last.eq(self.last),
                         asking.eq(1), self.busy.eq(1)]
        room = Signal()
        m.d.comb += [room.eq(flight + fifo.r_level < self.depth - 1),
                     self.src.req.valid.eq(asking & room),
                     self.src.req.payload.eq(ask)]
        asked = self.src.req.valid & self.src.req.ready
        with m.If(asked):
            m.d.sync += [ask.eq(ask + 1), asking.eq(ask != last)]
        m.d.sync += flight.eq(flight + asked - self.src.resp.valid)
        m.d.comb += [fifo.w_en.eq(self.src.resp.valid), fifo.w_data.eq(self.src.resp.payload),
                     self.dst.wr.valid.eq(fifo.r_rdy), self.dst.wr.payload.addr.eq(put),
                     self.dst.wr.payload.data.eq(fifo.r_data),
                     fifo.r_en.eq(self.dst.wr.ready)]
        with m.If(self.dst.wr.valid & self.dst.wr.ready):
            m.d.sync += put.eq(put + 1)
            with m.If(put == last):
                m.d.sync += self.busy.eq(0)
        return m


def dram_memory(m: Module, c: ChipConfig, bus, port, seed: int, dram_addr_width: int) -> None:
    """The DRAM (module docstring) serving ``bus`` (a chip's memory bus), with its
    staging memory and copiers on the harness ports ``port(name)``."""
    lay = ChipLayouts(c)
    aw, mw = c.addr_width, lay.mem_width
    m.submodules.arbiter = arb = MemoryArbiter(aw, mw)
    m.submodules.bridge = bridge = DRAMBridge(aw, mw, dram_addr_width)
    m.submodules.copy_in = into = WordCopier(aw, mw)
    m.submodules.copy_out = back = WordCopier(aw, mw)
    wiring.connect(m, bus, arb.chip)
    wiring.connect(m, arb.memory, bridge.bus)
    wiring.connect(m, into.dst, arb.host_write)
    wiring.connect(m, back.src, arb.host_read)
    m.d.comb += [arb.owner.eq(into.busy | back.busy),
                 port("copy_busy").eq(into.busy | back.busy)]
    for copier, name in ((into, "copy_in"), (back, "copy_out")):
        m.d.comb += [copier.start.eq(port(name)), copier.first.eq(port("dump_first")),
                     copier.last.eq(port("dump_last"))]
    dram_controller(m, bridge.dram, port("dram_clk"), init_done=port("dram_ready"))
    # the staging memory: one read channel (copy_in's source), one write channel
    # (copy_out's destination), no stalls, no bandwidth limit
    src, dst = into.src, back.dst.wr
    resp_data = Signal(mw)
    m.submodules.mem = Instance(
        "mixgcn_memory", p_AW=aw, p_MW=mw, p_NR=1, p_NW=1, p_SEED=seed,
        i_clk=ClockSignal(), i_rst=ResetSignal(), i_rd_stall=0, i_wr_stall=0,
        i_bandwidth=0, i_latency=1, i_burst_shift=0, i_burst_cycles=0,
        o_words_read=Signal(48), o_words_written=Signal(48), i_forget=0,
        o_words_distinct=Signal(48),
        i_rd_req_valid=src.req.valid, o_rd_req_ready=src.req.ready,
        i_rd_req_addr=src.req.payload, o_rd_resp_valid=src.resp.valid,
        o_rd_resp_data=resp_data,
        i_wr_valid=dst.valid, o_wr_ready=dst.ready, i_wr_addr=dst.payload.addr,
        i_wr_data=dst.payload.data,
        i_load=port("mem_load"), i_dump=port("mem_dump"), i_dump_first=port("dump_first"),
        i_dump_last=port("dump_last"))
    m.d.comb += src.resp.payload.eq(resp_data)
    # the words moved, counted at the bridge (the copies run between batches, outside a
    # batch's counts); which of them were distinct is the memory model's count alone
    m.d.comb += [port("mem_words_read").eq(bridge.words_read),
                 port("mem_words_written").eq(bridge.words_written)]
