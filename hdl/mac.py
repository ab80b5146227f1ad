"""The multiply-accumulate cell of the dense engine's array."""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["MACCell"]


class MACCell(wiring.Component):
    """A multiplier with its own accumulator, pipelined: the operands are registered,
    then their product, so the multiplier (an FPGA's DSP block) runs from register to
    register, never from a block RAM's output or a multiplexer.

    - ``product``: ``a·b`` of the operands presented two cycles before, every cycle
      (the array's column trees add these for ``X·W``);
    - ``acc``: with ``en`` high the product of those operands is added to ``acc`` a
      cycle after it appears (three-cycle latency, one operation a cycle) — the
      output-stationary sums of ``Xᵀ·G``;
    - ``clear`` zeroes ``acc`` at once and cancels the additions in flight;
    - ``shift`` loads ``acc`` from ``below`` (the cell under it in its column), so a
      column drains one accumulator a cycle through its neighbours, never through a
      multiplexer over the whole column. An addition landing in the same cycle wins;
      the array never asks for both.

    Products and sums are exact: ``acc_width`` must hold the longest reduction
    (checked by the configuration).
    """

    def __init__(self, width: int, acc_width: int):
        self.width, self.acc_width = width, acc_width
        super().__init__({
            "a": In(signed(width)),
            "b": In(signed(width)),
            "en": In(1),
            "clear": In(1),
            "shift": In(1),
            "below": In(signed(acc_width)),
            "product": Out(signed(2 * width)),
            "acc": Out(signed(acc_width)),
        })

    def elaborate(self, platform):
        m = Module()
        a, b = Signal(signed(self.width)), Signal(signed(self.width))
        o_valid, p_valid = Signal(), Signal()
        m.d.sync += [
            a.eq(self.a), b.eq(self.b),
            o_valid.eq(self.en & ~self.clear),
            self.product.eq(a * b),
            p_valid.eq(o_valid & ~self.clear),
        ]
        with m.If(self.clear):
            m.d.sync += self.acc.eq(0)
        with m.Elif(p_valid):
            m.d.sync += self.acc.eq(self.acc + self.product)
        with m.Elif(self.shift):
            m.d.sync += self.acc.eq(self.below)
        return m
