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

from amaranth import (
    Cat,
    ClockDomain,
    ClockSignal,
    Elaboratable,
    Instance,
    Module,
    ResetSignal,
    Signal,
    Value,
    unsigned,
)
from amaranth.lib import data, io, wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from mixgcn.hdl.fabric import LinkWire

__all__ = ["BoardTop", "LinkedBoardTop", "ScanBridge", "SerialBridge", "design_bits",
           "ecp5_clock", "pin_layout"]


def design_bits(design: wiring.Component, skip=()) -> tuple[list[Signal], list[Signal]]:
    """The design's input and output port signals (constants — an ``always_ready``
    stream's ``ready`` — are not ports), but those of the members named in ``skip``."""
    ins, outs = [], []
    for path, member, value in design.signature.flatten(design):
        if path[0] in skip:
            continue
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
    pass two-flip-flop synchronisers, so they are asynchronous to the chip's clock.

    The shift and load enables reach every bit of the chains through a tree of
    registers (a leaf per :attr:`GROUP` bits, all leaves in step): one enable net to
    a thousand flip-flops across the device was a build's slowest path, which is the
    board top's and not the chip's. ``di`` is delayed to match.
    ``skip``: members of the design that are not on the chain (a chip's links to other
    boards); ``extra_outputs``: signals of the board top captured with the design's."""

    GROUP = 32

    def __init__(self, design: wiring.Component, pins, skip=(), extra_outputs=()):
        self.design, self.pins = design, pins
        self.inputs, self.outputs = design_bits(design, skip)
        self.outputs += list(extra_outputs)
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
        shift_root, load_root, di_root, di_leaf = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [shift_root.eq(shift), load_root.eq(load), di_root.eq(sdi),
                     di_leaf.eq(di_root)]

        def leaves(root, name, bits):
            """Enables a cycle after ``root``, one per GROUP bits of a ``bits`` chain."""
            out = [Signal(name=f"{name}_{g}") for g in range(-(-bits // self.GROUP))]
            m.d.sync += [leaf.eq(root) for leaf in out]
            return out

        G = self.GROUP
        chain_in, chain_out = Signal(self.in_bits), Signal(self.out_bits)
        m.d.comb += Cat(*self.inputs).eq(chain_in)
        shifted_in = Cat(chain_in[1:], di_leaf)
        for g, en in enumerate(leaves(shift_root, "shift_in", self.in_bits)):
            with m.If(en):
                m.d.sync += chain_in[g * G:(g + 1) * G].eq(shifted_in[g * G:(g + 1) * G])
        captured, shifted_out = Cat(*self.outputs), chain_out >> 1
        for g, (ld, en) in enumerate(zip(leaves(load_root, "load", self.out_bits),
                                         leaves(shift_root, "shift_out", self.out_bits),
                                         strict=True)):
            part = slice(g * G, (g + 1) * G)
            with m.If(ld):
                m.d.sync += chain_out[part].eq(captured[part])
            with m.Elif(en):
                m.d.sync += chain_out[part].eq(shifted_out[part])
        m.submodules.pin_do = do = io.Buffer("o", self.pins.do)
        m.d.comb += do.o.eq(chain_out[0])
        return m


def pin_layout(width: int) -> data.StructLayout:
    """What a board sends another in a cycle: a flit of its link (``valid``, ``last``,
    ``data``) and a credit of the other's (``credit``)."""
    return data.StructLayout({"valid": 1, "last": 1, "data": unsigned(width), "credit": 1})


class SerialBridge(wiring.Component):
    """A chip's link to another board and that board's link back, on pins
    (docs/boards.md). ``to_peer``: the wire of this chip's link sender; ``from_peer``:
    that of its receiver for the peer's link. ``tx`` goes out on pins, registered in
    ``sync`` (the board forwards ``sync``'s clock beside it); ``rx`` comes in on pins,
    sampled on the peer's forwarded clock (domain ``rx_domain``).

    The boards' clocks are independent, so what comes in crosses into ``sync`` through
    an asynchronous FIFO of ``credits + peer_credits`` words: a word holds a flit of
    the peer's link, a credit of this chip's, or both, and each flit in flight holds
    one of the peer's credits and each credit in flight one of this chip's — the FIFO
    cannot fill. ``overrun`` (sticky) would say it did."""

    def __init__(self, *, width: int, credits: int, peer_credits: int, rx_domain: str):
        self.width, self.rx_domain = width, rx_domain
        self.depth = credits + peer_credits
        super().__init__({
            "to_peer": In(LinkWire(width)), "from_peer": Out(LinkWire(width)),
            "tx": Out(pin_layout(width)), "rx": In(pin_layout(width)),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rx = self.rx_domain
        m.d.sync += [self.tx.valid.eq(self.to_peer.valid),
                     self.tx.last.eq(self.to_peer.flit.last),
                     self.tx.data.eq(self.to_peer.flit.data),
                     self.tx.credit.eq(self.from_peer.credit)]

        lay = pin_layout(self.width)
        captured = Signal(lay)
        m.d[rx] += captured.eq(self.rx)
        m.submodules.fifo = fifo = AsyncFIFO(width=lay.size, depth=self.depth,
                                             w_domain=rx, r_domain="sync")
        m.d.comb += [fifo.w_data.eq(captured),
                     fifo.w_en.eq(captured.valid | captured.credit),
                     fifo.r_en.eq(1)]  # a word a cycle out: its takers never wait
        overrun = Signal()
        m.d[rx] += overrun.eq(overrun | (fifo.w_en & ~fifo.w_rdy))
        m.submodules.overrun_sync = FFSynchronizer(overrun, self.overrun)
        word = data.View(lay, fifo.r_data)
        m.d.sync += [self.from_peer.valid.eq(fifo.r_rdy & word.valid),
                     self.from_peer.flit.data.eq(word.data),
                     self.from_peer.flit.last.eq(word.last),
                     self.to_peer.credit.eq(fifo.r_rdy & word.credit)]
        return m


def ecp5_pll(fin_mhz: float, fout_mhz: float, fsec_mhz: float | None = None) -> dict:
    """Dividers of an ECP5 ``EHXPLLL`` (feedback from CLKOP) giving ``fout`` on CLKOP
    from ``fin``, and ``fsec`` on CLKOS if asked: the PFD at 3.125–400 MHz, the VCO at
    400–800 MHz (the datasheet's ranges); the nearest outputs (CLKOP's first), which
    the caller checks (``fout_mhz``, ``fsec_mhz``)."""
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
                vco = fout * odiv
                if not 400 <= vco <= 800:
                    continue
                err = (abs(fout - fout_mhz), 0.0)
                found = dict(CLKI_DIV=idiv, CLKFB_DIV=fbdiv, CLKOP_DIV=odiv, fout_mhz=fout)
                if fsec_mhz is not None:
                    sdiv = min(range(1, 129), key=lambda d: abs(vco / d - fsec_mhz))
                    err = (err[0], abs(vco / sdiv - fsec_mhz))
                    found.update(CLKOS_DIV=sdiv, fsec_mhz=vco / sdiv)
                if best is None or err < best[0]:
                    best = (err, found)
    if best is None:
        raise ValueError(f"no ECP5 PLL setting gives {fout_mhz} MHz from {fin_mhz} MHz")
    return best[1]


class BoardTop(Elaboratable):
    """A design on a board: the board's clock (through a PLL to ``mhz`` on ECP5), a
    reset held until the PLL locks, and the design's ports on the scan pins
    (:class:`ScanBridge`). ``scan_resource``: the name of the scan pins' resource the
    build added to the platform.

    A :class:`~mixgcn.hdl.system.SystemNode` (a chip of a system, a chip per board)
    also has its links to the other boards: to chip q through a :class:`SerialBridge`
    on the resources ``link_tx`` and ``link_rx`` number q (``clk``, ``valid``, ``last``,
    ``credit``, ``data``), the chip's clock forwarded on ``link_tx.clk`` and chip q's
    taken from ``link_rx.clk`` (its resource carries its frequency, for nextpnr). The
    bridges' ``overrun`` flags end the scan chain."""

    def __init__(self, design: wiring.Component, *, mhz: float | None,
                 scan_resource: str = "scan"):
        self.design, self.mhz, self.scan_resource = design, mhz, scan_resource
        self.peers = list(getattr(design, "peers", ()))
        if self.peers and mhz is None:
            raise ValueError("links between boards need the chip's clock from a PLL (ECP5)")
        self.pll = None

    def elaborate(self, platform):
        m = Module()
        if self.mhz is not None:
            self.pll = ecp5_clock(m, platform, self.mhz)
        m.submodules.design = self.design
        overruns = [self._link(m, platform, q) for q in self.peers]
        skip = [f"{way}_{q}" for q in self.peers for way in ("to", "from")]
        m.submodules.scan = self.bridge = ScanBridge(
            self.design, platform.request(self.scan_resource, 0, dir="-"), skip=skip,
            extra_outputs=overruns)
        return m

    def _link(self, m, platform, q: int) -> Signal:
        """The links to and from chip q's board; returns the bridge's ``overrun``."""
        config, p = self.design.config, self.design.position
        domain = f"link{q}"  # chip q's clock, as it comes in
        tx = platform.request("link_tx", q, dir="-")
        rx = platform.request("link_rx", q, dir="-")
        cd = ClockDomain(domain, local=True)
        m.domains += cd
        m.submodules[f"{domain}_clk"] = rx_clk = io.Buffer("i", rx.clk)
        m.d.comb += cd.clk.eq(rx_clk.i)
        m.submodules[f"{domain}_reset"] = ResetSynchronizer(ResetSignal("sync"), domain=domain)
        m.submodules[f"{domain}_bridge"] = bridge = SerialBridge(
            width=config.link_width(p, q), credits=config.link_credits(p, q),
            peer_credits=config.link_credits(q, p), rx_domain=domain)
        wiring.connect(m, getattr(self.design, f"to_{q}"), bridge.to_peer)
        wiring.connect(m, bridge.from_peer, getattr(self.design, f"from_{q}"))
        # the clock goes out inverted (low, then high half a cycle later): it rises in
        # the middle of each bit, where the other board samples
        m.submodules[f"{domain}_fwd"] = fwd = io.DDRBuffer("o", tx.clk, o_domain="sync")
        m.d.comb += [fwd.o[0].eq(0), fwd.o[1].eq(1)]
        for name in ("valid", "last", "credit", "data"):
            m.submodules[f"{domain}_tx_{name}"] = out = io.Buffer("o", getattr(tx, name))
            m.submodules[f"{domain}_rx_{name}"] = inp = io.Buffer("i", getattr(rx, name))
            m.d.comb += [out.o.eq(getattr(bridge.tx, name)),
                         getattr(bridge.rx, name).eq(inp.i)]
        return bridge.overrun


class LinkedBoardTop(Elaboratable):
    """The chip as a board uses it (docs/link.md, docs/memory.md): a
    :class:`~mixgcn.hdl.host_link.LinkedChip` on the board's serial port (``uart``:
    ``rx``, ``tx``), its memory bus through a :class:`~mixgcn.hdl.dram.DRAMBridge` on
    the board's SDRAM (``sdram``) behind LiteDRAM's controller and PHY
    (:func:`~mixgcn.hdl.dram.dram_controller` with the pins; the module ``mixgcn_dram``
    comes from :func:`mixgcn.gen.dram.dram_verilog` with ``pins=True``, added to the
    build by the board flow). The chip is in ``sync`` at ``mhz``, the controller and
    its PHY in ``dram`` at ``dram_mhz``, both from the PLL (ECP5). The SDRAM's clock is
    the controller's, forwarded inverted (through a DDR output), so the part samples
    commands and data half a cycle after they leave their registers."""

    def __init__(self, design: wiring.Component, *, mhz: float, dram_mhz: float,
                 dram_addr_width: int):
        self.design, self.mhz, self.dram_mhz = design, mhz, dram_mhz
        self.dram_addr_width = dram_addr_width
        self.peers, self.pll = [], None

    def elaborate(self, platform):
        from mixgcn.hdl.chip import ChipLayouts
        from mixgcn.hdl.dram import DRAMBridge, dram_controller

        m = Module()
        dram_clk = Signal()
        self.pll = ecp5_clock(m, platform, self.mhz, secondary=(self.dram_mhz, dram_clk))
        m.submodules.design = chip = self.design
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        # the line idles high: two flip-flops take the pin into the clock
        m.submodules.rx_sync = FFSynchronizer(rx.i, chip.rx, init=1)
        m.d.comb += tx.o.eq(chip.tx)
        c = self.design.config
        m.submodules.bridge = bridge = DRAMBridge(c.addr_width, ChipLayouts(c).mem_width,
                                                  self.dram_addr_width)
        wiring.connect(m, chip.memory, bridge.bus)
        sdram = platform.request("sdram", 0, dir="-")
        dram_controller(m, bridge.dram, dram_clk, pads=sdram)
        m.submodules.sdram_clk = clk = io.DDRBuffer("o", sdram.clk, o_domain="dram")
        m.d.comb += [clk.o[0].eq(0), clk.o[1].eq(1)]
        return m


def ecp5_clock(m, platform, mhz: float, secondary: tuple[float, Signal] | None = None) -> dict:
    """``sync`` at ``mhz`` from the board's clock through an EHXPLLL, held in reset
    until the PLL locks; ``secondary`` (MHz, a signal): that signal driven by the
    PLL's second output at that rate (within 0.5 %, else a ``ValueError``), for a
    domain of the caller's. The PLL's dividers."""
    fin = platform.default_clk_frequency / 1e6
    pll = ecp5_pll(fin, mhz, None if secondary is None else secondary[0])
    second = {}
    if secondary is not None:  # refused before anything is built
        want, out = secondary
        if abs(pll["fsec_mhz"] - want) > 0.005 * want:
            raise ValueError(f"no ECP5 PLL setting gives {want} MHz beside {mhz} MHz from "
                             f"{fin} MHz (nearest {pll['fsec_mhz']:.2f} MHz)")
        second = dict(p_CLKOS_ENABLE="ENABLED", p_CLKOS_DIV=pll["CLKOS_DIV"],
                      p_CLKOS_CPHASE=max(pll["CLKOS_DIV"] // 2 - 1, 0), p_CLKOS_FPHASE=0,
                      i_ENCLKOS=0, o_CLKOS=out)
    m.submodules.clk_in = clk = io.Buffer("i", platform.request(platform.default_clk,
                                                                 dir="-"))
    m.domains.sync = cd = ClockDomain("sync")
    locked = Signal()
    # an output's coarse phase as the lattice tools set it: half the divider, less one
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
        o_CLKOP=cd.clk, o_LOCK=locked, **second)
    # reset until the PLL locks: two flip-flops on the PLL's clock (held from
    # configuration on), then a global buffer (DCCA), because the reset reaches
    # every register of the chip and on general routing it limits the clock
    m.domains.raw = raw = ClockDomain("raw", reset_less=True)
    held = Signal(2, init=0b11)
    m.d.comb += raw.clk.eq(cd.clk)
    m.d.raw += held.eq(Cat(~locked, held[0]))
    m.submodules.reset_buffer = Instance("DCCA", i_CLKI=held[1], i_CE=1, o_CLKO=cd.rst)
    # no constraint on cd.clk: nextpnr derives the PLL output's from the board
    # clock's (a constraint on the net amaranth names would not find it after
    # synthesis, and nextpnr would ignore it)
    return pll
