"""The multipliers of the engines, and the multiply-accumulate cell of the dense
engine's array."""

from __future__ import annotations

from amaranth import ClockSignal, Instance, Module, ResetSignal, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mixgcn.hdl.timing import copy

__all__ = ["MACCell", "Multiplier"]

TARGETS = ("generic", "ecp5")


class Multiplier(wiring.Component):
    """``product`` = ``a·b`` of the operands presented two cycles before, every cycle:
    the operands are registered, then their product (both reset to zero), so the
    multiplier runs from register to register.

    ``target``: ``"ecp5"`` makes it one MULT18X18D with its own input and output
    registers, so the multiply never leaves the DSP block: unregistered, the block's
    3.9 ns (nextpnr, speed grade 6) plus the routing into and out of it take most of a
    10 ns cycle, and yosys's ECP5 mapping puts no register inside the block.
    ``"generic"``: the registers in fabric, mapped as synthesis can. ``None`` (the
    default): ``"ecp5"`` when the design is built for an ECP5 platform and the operands
    fit the block's 18 bits, else ``"generic"`` — so simulations and ``make verilog``
    run the generic form. The two are proven to be the same machine
    (``dsp_multiplier`` in sim/verify/proofs.py) against a model of the block in the
    register modes used here (sim/verify/models/MULT18X18D.v).
    """

    def __new__(cls, width: int, target: str | None = None):
        # refused before it is an elaboratable (which would warn that it is unused)
        if target not in (None, *TARGETS):
            raise ValueError(f"unknown multiplier target {target!r}: expected one of "
                             f"{', '.join(TARGETS)} or None")
        if target == "ecp5" and width > 18:
            raise ValueError(f"a {width}-bit multiplier does not fit an ECP5 MULT18X18D "
                             "(18 bits at most)")
        return super().__new__(cls)

    def __init__(self, width: int, target: str | None = None):
        self.width, self.target = width, target
        super().__init__({
            "a": In(signed(width)),
            "b": In(signed(width)),
            "product": Out(signed(2 * width)),
        })

    def elaborate(self, platform):
        target = self.target
        if target is None:
            ecp5 = getattr(platform, "family", None) == "ecp5" and self.width <= 18
            target = "ecp5" if ecp5 else "generic"
        m = Module()
        if target == "generic":
            a, b = Signal(signed(self.width)), Signal(signed(self.width))
            m.d.sync += [a.eq(self.a), b.eq(self.b), self.product.eq(a * b)]
            return m
        p = Signal(36)
        a, b = self.a, self.b
        m.submodules.dsp = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_OUTPUT_CLK="CLK0",
            p_REG_INPUTA_CE="CE0", p_REG_INPUTB_CE="CE0", p_REG_OUTPUT_CE="CE0",
            p_REG_INPUTA_RST="RST0", p_REG_INPUTB_RST="RST0", p_REG_OUTPUT_RST="RST0",
            p_RESETMODE="SYNC", p_GSR="DISABLED",
            i_CLK0=ClockSignal(), i_CE0=1, i_RST0=ResetSignal(),
            i_SIGNEDA=1, i_SIGNEDB=1, i_SOURCEA=0, i_SOURCEB=0,
            # operands sign-extended to the block's 18 bits
            **{f"i_A{i}": a[min(i, self.width - 1)] for i in range(18)},
            **{f"i_B{i}": b[min(i, self.width - 1)] for i in range(18)},
            **{f"o_P{i}": p[i] for i in range(36)})
        m.d.comb += self.product.eq(p[:2 * self.width])
        return m


class MACCell(wiring.Component):
    """A :class:`Multiplier` with its own accumulator.

    - ``product``: ``a·b`` of the operands presented two cycles before, every cycle
      (the array's column trees add these for ``X·W``);
    - ``acc``: with ``en`` high the product of those operands is added to ``acc`` a
      cycle after it appears (three-cycle latency, one operation a cycle) — the
      output-stationary sums of ``Xᵀ·G``;
    - ``clear`` zeroes ``acc`` a cycle later and cancels the additions of every operand
      presented up to and including its cycle; operands presented after it add into
      the cleared sum;
    - ``shift`` loads ``acc`` from ``below`` (the cell under it in its column) a cycle
      later, so a column drains one accumulator a cycle through its neighbours, never
      through a multiplexer over the whole column. An addition landing in the same
      cycle wins; the array never asks for both.

    ``clear`` and ``shift`` act a cycle late because the cell registers them, and
    its addition flags, in copies of its own (:mod:`mixgcn.hdl.timing`): the array
    asks every cell at once, and each cell's accumulator bits are then steered from
    next to them rather than by one net across the array.

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
        m.submodules.mul = mul = Multiplier(self.width)
        m.d.comb += [mul.a.eq(self.a), mul.b.eq(self.b), self.product.eq(mul.product)]
        # the addition flags of the products one and two cycles from landing, and the
        # clear and shift requests of the cycle before
        o_valid, p_valid = copy(1, name="o_valid"), copy(1, name="p_valid")
        clear, shift = copy(1, name="clear_q"), copy(1, name="shift_q")
        m.d.sync += [o_valid.eq(self.en & ~self.clear), p_valid.eq(o_valid),
                     clear.eq(self.clear), shift.eq(self.shift)]
        with m.If(clear):  # also drops the product landing now (its operands came first)
            m.d.sync += self.acc.eq(0)
        with m.Elif(p_valid):
            m.d.sync += self.acc.eq(self.acc + self.product)
        with m.Elif(shift):
            m.d.sync += self.acc.eq(self.below)
        return m
