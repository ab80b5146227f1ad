"""The board in simulation: a :class:`~mixgcn.hdl.host_link.LinkedChip` on the memory
model, or on a DRAM behind LiteDRAM's controller (its memory bus through a
:class:`~mixgcn.hdl.dram.DRAMBridge`, as a board top puts it), with the host's side of
the serial line in hardware too, so Python acts once per request, never per bit.

The host's bytes (a request's frame) are put in a send memory (``sender.mem``); a
``send_start`` pulse streams ``send_count`` of them through a UART transmitter into the
board's ``rx``. What the board sends on ``tx`` is taken by a UART receiver into a
receive memory (``receiver.mem``, ``received`` bytes since the last ``send_start``).
``quiet``: every byte is sent and the board has nothing left to do or say — the
simulation's server runs the clock until then. ``line_cut``: the board's ``rx`` line is
held idle (a cable pulled: nothing arrives, the host must time out).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import ChipConfig
from mixgcn.gen.dram import DRAMPart
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.hdl.dram import DRAMBridge, dram_controller
from mixgcn.hdl.frames import MAX_PAYLOAD
from mixgcn.hdl.host_link import LinkedChip
from mixgcn.hdl.uart import UARTReceiver, UARTTransmitter
from mixgcn.sim.chip.harness import (
    MemorySink,
    MemorySource,
    cached_verilog,
    dram_build,
    memory_model,
)

__all__ = ["BYTE_DEPTH", "BoardHarness", "board_verilog"]

# bytes of a request or of the answers to it the harness holds: a frame is at most
# MAX_PAYLOAD + 8 bytes; the rest is room for noise the tests add
BYTE_DEPTH = 2 * MAX_PAYLOAD


def model_ports(addr_width: int) -> dict:
    """The memory model's controls and counters, as harness ports."""
    return {"read_stall": In(8), "write_stall": In(8),
            "mem_bandwidth": In(17), "mem_latency": In(7), "mem_burst_shift": In(5),
            "mem_burst_cycles": In(8), "mem_words_read": Out(48),
            "mem_words_written": Out(48), "mem_forget": In(1), "mem_words_distinct": Out(48),
            "mem_load": In(1), "mem_dump": In(1), "dump_first": In(addr_width),
            "dump_last": In(addr_width)}


class BoardHarness(wiring.Component):
    """See the module docstring. ``divisor``: clock cycles a bit on the serial line;
    ``dram``: the board's memory is that DRAM behind LiteDRAM's controller, not the
    memory model (whose ports the harness then lacks; ``dram_ready``: the controller
    has initialised the DRAM)."""

    def __init__(self, config: ChipConfig, divisor: int, seed: int = 0xACE1,
                 dram: DRAMPart | None = None):
        self.config, self.divisor, self.seed, self.dram = config, divisor, seed, dram
        self.board = LinkedChip(config, divisor)
        super().__init__({
            "send_count": In(32), "send_start": In(1), "sent": Out(32),
            "received": Out(32), "quiet": Out(1), "line_cut": In(1),
            **(model_ports(config.addr_width) if dram is None
               else {"dram_ready": Out(1), "dram_clk": In(1)}),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.board = board = self.board
        m.submodules.sender = sender = MemorySource(8, BYTE_DEPTH)
        m.submodules.host_tx = host_tx = UARTTransmitter(self.divisor)
        m.submodules.host_rx = host_rx = UARTReceiver(self.divisor)
        m.submodules.receiver = receiver = MemorySink(8, BYTE_DEPTH)
        wiring.connect(m, sender.o, host_tx.bytes)
        wiring.connect(m, host_rx.bytes, receiver.i)
        m.d.comb += [sender.count.eq(self.send_count), sender.period.eq(BYTE_DEPTH),
                     sender.start.eq(self.send_start), receiver.period.eq(BYTE_DEPTH),
                     receiver.start.eq(self.send_start), self.received.eq(receiver.received),
                     board.rx.eq(host_tx.tx | self.line_cut), host_rx.rx.eq(board.tx)]
        with m.If(self.send_start):
            m.d.sync += self.sent.eq(0)
        with m.Elif(host_tx.bytes.valid & host_tx.bytes.ready):
            m.d.sync += self.sent.eq(self.sent + 1)
        m.d.comb += self.quiet.eq((self.sent == self.send_count) & ~host_tx.busy
                                  & ~board.busy & ~host_rx.busy)
        if self.dram is None:
            memory_model(m, self.config, board.memory, lambda name: getattr(self, name),
                         self.seed)
        else:
            mem_width = ChipLayouts(self.config).mem_width
            m.submodules.bridge = bridge = DRAMBridge(self.config.addr_width, mem_width,
                                                      self.dram.addr_width(mem_width))
            wiring.connect(m, board.memory, bridge.bus)
            dram_controller(m, bridge.dram, self.dram_clk, init_done=self.dram_ready)
        return m


def board_verilog(config: ChipConfig, divisor: int, seed: int = 0xACE1,
                  on_generate=None, dram: DRAMPart | None = None) -> str:
    """Verilog of the board harness with its clocked top (cached, see
    :func:`~mixgcn.sim.chip.harness.cached_verilog`); with ``dram``, LiteDRAM's
    controller and model of it too."""
    from pathlib import Path

    if dram is None:
        return cached_verilog("board", (config, divisor, seed),
                              lambda: BoardHarness(config, divisor, seed=seed), on_generate,
                              sources=(Path(__file__),))
    key, sources, extra = dram_build(config, dram)
    return cached_verilog(
        "board", (config, divisor, seed, *key),
        lambda: BoardHarness(config, divisor, seed=seed, dram=dram), on_generate,
        sources=(Path(__file__), *sources), extra=extra)
