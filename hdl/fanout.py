"""Copies of a control register, each steering its own part of a wide datapath.

A control signal that steers thousands of flip-flops — the MAC array's clear and
drain, each accumulator's add, an output stage's shift amount — is one net spread
over the whole engine: on an FPGA its routing alone takes a clock cycle. So the
engines give each group of consumers (a MAC cell, a lane) its own registered copy,
and the net from the one register to its copies is the only long one.

yosys merges identical registers (``opt_merge``), which would give one net the
fan-out of all of them again; :func:`copy` marks each copy with :data:`KEEP_APART`,
and the board flow runs :data:`YOSYS_KEEP_APART` after reading the design, which sets
yosys's ``keep`` on the flip-flops that drive marked signals. Simulation and
``make verilog`` see ordinary registers.
"""

from __future__ import annotations

from amaranth import Signal

__all__ = ["KEEP_APART", "YOSYS_KEEP_APART", "copy"]

KEEP_APART = "mixgcn_keep_apart"

# the cells driving a marked signal through their Q port: the flip-flops
YOSYS_KEEP_APART = f"setattr -set keep 1 a:{KEEP_APART} %ci:+[Q]"


def copy(shape, *, name: str) -> Signal:
    """A signal of ``shape`` for a register, marked to be kept apart from its twins."""
    return Signal(shape, name=name, attrs={KEEP_APART: 1})
