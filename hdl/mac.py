"""The multiply-accumulate cell of the dense engine's array."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["MACCell"]


class MACCell(wiring.Component):
    """``acc ← (first ? 0 : acc) + a·b``, pipelined: the operands are registered, then
    their product, then it is added — so the multiplier (an FPGA's DSP block) runs from
    register to register, never from a block RAM's output or a multiplexer.

    Inputs presented in cycle *t* with ``en`` high reach ``acc`` at the end of cycle
    *t + 2* (three-cycle latency, one operation per cycle). ``first`` starts a new sum
    (the output-row boundary of ``X·W``); ``clear`` zeroes ``acc`` at once (the start of an
    ``Xᵀ·G`` reduction) and cancels the operations in flight. Products and sums are exact:
    ``acc_width`` must hold the longest reduction (checked by the configuration).
    """

    def __init__(self, width: int, acc_width: int):
        self.width, self.acc_width = width, acc_width
        super().__init__({
            "a": In(signed(width)),
            "b": In(signed(width)),
            "en": In(1),
            "first": In(1),
            "clear": In(1),
            "acc": Out(signed(acc_width)),
        })

    def elaborate(self, platform):
        m = Module()
        a, b = Signal(signed(self.width)), Signal(signed(self.width))
        o_valid, o_first = Signal(), Signal()
        product = Signal(signed(2 * self.width))
        p_valid = Signal()
        p_first = Signal()
        m.d.sync += [
            a.eq(self.a), b.eq(self.b),
            o_valid.eq(self.en & ~self.clear),
            o_first.eq(self.first),
            product.eq(a * b),
            p_valid.eq(o_valid & ~self.clear),
            p_first.eq(o_first),
        ]
        with m.If(self.clear):
            m.d.sync += self.acc.eq(0)
        with m.Elif(p_valid):
            m.d.sync += self.acc.eq(Mux(p_first, 0, self.acc) + product)
        return m
