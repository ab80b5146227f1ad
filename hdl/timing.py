"""Registers that exist for the clock: copies of control registers kept apart, and
FIFOs that put a register between two handshakes.

**Copies.** A control signal that steers thousands of flip-flops — the MAC array's
clear and drain, each accumulator's add, an output stage's shift amount — is one net
spread over the whole engine: on an FPGA its routing alone takes a clock cycle. So the
engines give each group of consumers (a MAC cell, a lane) its own registered copy,
and the net from the one register to its copies is the only long one. yosys merges
identical registers (``opt_merge``), which would give one net the fan-out of all of
them again; :func:`copy` marks each copy with :data:`KEEP_APART`, and the board flow
runs :data:`YOSYS_KEEP_APART` after reading the design, which sets yosys's ``keep``
on the flip-flops that drive marked signals. Simulation and ``make verilog`` see
ordinary registers.

**Input buffers.** An engine that decides in one cycle whether to take words from
several streams at once makes each stream's ``ready`` a function of all their
``valid``s; through the router, that reaches back into the memory readers, one
combinational path across the chip. :func:`input_buffer` puts a FIFO in front, so
the producer sees a ``ready`` that comes from a register.

**Output registers.** A FIFO held in block RAM hands its word straight from the RAM's
output, which on an ECP5 comes 5.8 ns after the clock (yosys does not use the block's
own output register): whatever the word then crosses must fit in what is left of
the cycle. :func:`output_register` puts a register after such a stream.
"""

from __future__ import annotations

from amaranth import Shape, Signal
from amaranth.lib import stream
from amaranth.lib.fifo import SyncFIFOBuffered

__all__ = ["KEEP_APART", "YOSYS_KEEP_APART", "copy", "input_buffer", "output_register"]

KEEP_APART = "mixgcn_keep_apart"

# the cells driving a marked signal through their Q port: the flip-flops
YOSYS_KEEP_APART = f"setattr -set keep 1 a:{KEEP_APART} %ci:+[Q]"


def copy(shape, *, name: str) -> Signal:
    """A signal of ``shape`` for a register, marked to be kept apart from its twins."""
    return Signal(shape, name=name, attrs={KEEP_APART: 1})


def input_buffer(m, name: str, port):
    """``port`` (an input stream of the module being elaborated in ``m``) through a
    FIFO: the stream it becomes. Three words, not two: amaranth's buffered FIFO of
    depth 2 would keep one word in a memory of depth 1, whose Verilog has zero-width
    addresses. A word a cycle passes at full rate."""
    shape = port.payload.shape()
    m.submodules[f"{name}_buffer"] = fifo = SyncFIFOBuffered(
        width=Shape.cast(shape).width, depth=3)
    out = stream.Signature(shape).create(path=(f"{name}_buffered",))
    m.d.comb += [fifo.w_stream.valid.eq(port.valid), fifo.w_stream.payload.eq(port.payload),
                 port.ready.eq(fifo.w_stream.ready),
                 out.valid.eq(fifo.r_stream.valid), out.payload.eq(fifo.r_stream.payload),
                 fifo.r_stream.ready.eq(out.ready)]
    return out


def output_register(m, name: str, source):
    """``source`` (a stream driven inside ``m``) through a register: the stream it
    becomes, one cycle later, at full rate (``ready`` passes straight through: the
    register takes a word when it is empty or its word leaves)."""
    shape = source.payload.shape()
    out = stream.Signature(shape).create(path=(f"{name}_registered",))
    m.d.comb += source.ready.eq(~out.valid | out.ready)
    with m.If(source.valid & source.ready):
        m.d.sync += [out.valid.eq(1), out.payload.eq(source.payload)]
    with m.Elif(out.ready):
        m.d.sync += out.valid.eq(0)
    return out
