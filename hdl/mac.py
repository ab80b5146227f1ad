"""The multiply-accumulate cell of the dense engine's array."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["MACCell"]


class MACCell(wiring.Component):
    """``acc ← (first ? 0 : acc) + a·b``, pipelined: the product is registered, then added.

    Inputs presented in cycle *t* with ``en`` high reach ``acc`` at the end of cycle
    *t + 1* (two-cycle latency, one operation per cycle). ``first`` starts a new sum
    (the output-row boundary of ``X·W``); ``clear`` zeroes ``acc`` at once (the start of an
    ``Xᵀ·G`` reduction) and cancels the product in flight. Products and sums are exact:
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
        product = Signal(signed(2 * self.width))
        p_valid = Signal()
        p_first = Signal()
        m.d.sync += [
            product.eq(self.a * self.b),
            p_valid.eq(self.en & ~self.clear),
            p_first.eq(self.first),
        ]
        with m.If(self.clear):
            m.d.sync += self.acc.eq(0)
        with m.Elif(p_valid):
            m.d.sync += self.acc.eq(Mux(p_first, 0, self.acc) + product)
        return m
