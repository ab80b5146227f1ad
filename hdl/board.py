"""The top of a board's bitstream: a chip (or a system of chips) in the board's clock,
its ports reached through a scan chain on four pins (docs/boards.md).

::

    board clock ─▶ PLL ─▶ sync ──────────────────────────────────────┐
    scan_clk, scan_in, scan_load ─▶ ScanBridge ─▶ design inputs       │
                          scan_out ◀─ ScanBridge ◀─ design outputs    ▼
                                               (a Chip or a System, every port)

Until the board has a host link and board memory (the next issue), the design's ports
go through a :class:`ScanBridge`: every input of the design is a bit of a shift
register loaded through the chain, every output a bit captured into another. Nothing the design
computes is unobservable, so synthesis keeps all of it, and every path nextpnr times
runs from register to register inside the clock domain — the figures are the design's
own. It is how the chip is built and timed on a board, not yet how it is used.
"""

from __future__ import annotations

from amaranth import Cat, ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal, Value
from amaranth.lib import io, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In

__all__ = ["BoardTop", "ScanBridge", "design_bits"]


def design_bits(design: wiring.Component) -> tuple[list[Signal], list[Signal]]:
    """The design's input and output port signals (constants — an ``always_ready``
    stream's ``ready`` — are not ports)."""
    ins, outs = [], []
    for _, member, value in design.signature.flatten(design):
        value = Value.cast(value)  # a payload is a view of a signal
        if isinstance(value, Signal):
            (ins if member.flow == In else outs).append(value)
    return ins, outs


class ScanBridge(Elaboratable):
    """Reach every port of ``design`` through four pins (``scan``: ``clk``, ``di``,
    ``load`` in; ``do`` out), sampled in the design's clock domain.

    On each rising edge of ``clk`` a bit of ``di`` shifts into the input chain — whose
    bits are the design's inputs — and a bit of the output chain shifts out on ``do``;
    on a rising edge of ``load`` the design's outputs are captured into the output
    chain. (The inputs change as bits shift in: enough to build and time the design,
    and it costs the input chain no logic — a shift register with an enable.) The pins
    pass two-flip-flop synchronisers, so they are asynchronous to the chip's clock."""

    def __init__(self, design: wiring.Component, pins):
        self.design, self.pins = design, pins
        self.inputs, self.outputs = design_bits(design)
        self.in_bits = sum(len(s) for s in self.inputs)
        self.out_bits = sum(len(s) for s in self.outputs)

    def elaborate(self, platform):
        m = Module()
        sclk, sdi, sload = Signal(), Signal(), Signal()
        for name, sig in (("clk", sclk), ("di", sdi), ("load", sload)):
            m.submodules[f"pin_{name}"] = pin = io.Buffer("i", getattr(self.pins, name))
            m.submodules[f"sync_{name}"] = FFSynchronizer(pin.i, sig)
        sclk_was, sload_was = Signal(), Signal()
        m.d.sync += [sclk_was.eq(sclk), sload_was.eq(sload)]
        shift, load = sclk & ~sclk_was, sload & ~sload_was

        chain_in, chain_out = Signal(self.in_bits), Signal(self.out_bits)
        m.d.comb += Cat(*self.inputs).eq(chain_in)
        with m.If(shift):
            m.d.sync += chain_in.eq(Cat(chain_in[1:], sdi))
        with m.If(load):
            m.d.sync += chain_out.eq(Cat(*self.outputs))
        with m.Elif(shift):
            m.d.sync += chain_out.eq(chain_out >> 1)
        m.submodules.pin_do = do = io.Buffer("o", self.pins.do)
        m.d.comb += do.o.eq(chain_out[0])
        return m


def ecp5_pll(fin_mhz: float, fout_mhz: float) -> dict:
    """Dividers of an ECP5 ``EHXPLLL`` (feedback from CLKOP) giving ``fout`` from
    ``fin``: the PFD at 3.125–400 MHz, the VCO at 400–800 MHz (the datasheet's ranges);
    the nearest output, which the caller checks."""
    best = None
    for idiv in range(1, 129):
        pfd = fin_mhz / idiv
        if pfd < 3.125:
            break
        if pfd > 400:
            continue
        for fbdiv in range(1, 81):
            fout = pfd * fbdiv
            for odiv in range(1, 129):
                if 400 <= fout * odiv <= 800:
                    err = abs(fout - fout_mhz)
                    if best is None or err < best[0]:
                        best = (err, dict(CLKI_DIV=idiv, CLKFB_DIV=fbdiv, CLKOP_DIV=odiv,
                                          fout_mhz=fout))
                    break
    if best is None:
        raise ValueError(f"no ECP5 PLL setting gives {fout_mhz} MHz from {fin_mhz} MHz")
    return best[1]


class BoardTop(Elaboratable):
    """A design on a board: the board's clock (through a PLL to ``mhz`` on ECP5), a
    reset held until the PLL locks, and the design's ports on the scan pins
    (:class:`ScanBridge`). ``scan_resource``: the name of the scan pins' resource the
    build added to the platform."""

    def __init__(self, design: wiring.Component, *, mhz: float | None,
                 scan_resource: str = "scan"):
        self.design, self.mhz, self.scan_resource = design, mhz, scan_resource
        self.pll = None

    def elaborate(self, platform):
        m = Module()
        if self.mhz is not None:
            self._ecp5_clock(m, platform)
        m.submodules.design = self.design
        m.submodules.scan = self.bridge = ScanBridge(
            self.design, platform.request(self.scan_resource, 0, dir="-"))
        return m

    def _ecp5_clock(self, m, platform):
        """``sync`` at ``mhz`` from the board's clock through an EHXPLLL."""
        m.submodules.clk_in = clk = io.Buffer("i", platform.request(platform.default_clk,
                                                                     dir="-"))
        fin = platform.default_clk_frequency / 1e6
        self.pll = pll = ecp5_pll(fin, self.mhz)
        m.domains.sync = cd = ClockDomain("sync")
        locked = Signal()
        # the output's coarse phase as the lattice tools set it: half the divider, less one
        cphase = max(pll["CLKOP_DIV"] // 2 - 1, 0)
        m.submodules.pll = Instance(
            "EHXPLLL",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=pll["CLKI_DIV"], p_CLKFB_DIV=pll["CLKFB_DIV"],
            p_CLKOP_DIV=pll["CLKOP_DIV"], p_CLKOP_CPHASE=cphase, p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP",
            i_CLKI=clk.i, i_CLKFB=ClockSignal("sync"), i_RST=0, i_STDBY=0,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=0, i_PHASESTEP=0,
            i_PHASELOADREG=0, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=cd.clk, o_LOCK=locked)
        # reset until the PLL locks: two flip-flops on the PLL's clock (held from
        # configuration on), then a global buffer (DCCA), because the reset reaches
        # every register of the chip and on general routing it limits the clock
        m.domains.raw = raw = ClockDomain("raw", reset_less=True)
        held = Signal(2, init=0b11)
        m.d.comb += raw.clk.eq(cd.clk)
        m.d.raw += held.eq(Cat(~locked, held[0]))
        m.submodules.reset_buffer = Instance("DCCA", i_CLKI=held[1], i_CE=1, o_CLKO=cd.rst)
        platform.add_clock_constraint(cd.clk, pll["fout_mhz"] * 1e6)
