"""A board's DRAM controller, generated as Verilog by LiteDRAM (the ``dram`` extra:
``litedram``, ``litex`` and ``migen`` from PyPI).

:func:`dram_verilog` writes one Verilog module holding LiteDRAM's controller (bank
machines, refresher, command multiplexer) and a crossbar with one native user port as
wide as the chip's memory word (LiteDRAM converts it to the DRAM's width), on the
PHY of a :class:`DRAMPart`. Two clocks: the controller and the PHY run on the DRAM's
own (``sys_clk``, the part's :attr:`DRAMPart.clock_mhz`), the port on the chip's
(``port_clk``), through LiteDRAM's clock-domain crossing (asynchronous FIFOs for
commands, written words and read words). Why: LiteDRAM's command multiplexer takes
10.6–11.4 ns on an ECP5 (docs/boards.md), so at the chip's 100 MHz the board top
could not meet timing however the chip was built. For simulation, LiteDRAM's own
model of the DRAM (``SDRAMPHYModel``: banks that open and close rows, refresh, the
part's command timings at the given clock; ``check_timing=True`` adds LiteDRAM's
checker, which prints every command that breaks the part's datasheet timings); for a board
(``pins=True``), the PHY on the DRAM's pins (``GENSDRPHY`` for the ULX3S's SDRAM). An
initialisation sequencer (:func:`init_steps`) drives the DRAM first.

The module's ports: ``sys_clk``, ``sys_rst`` (the DRAM's clock and its reset),
``port_clk``, ``port_rst`` (the chip's), ``init_done`` (in the chip's clock), the
native port as :class:`mixgcn.hdl.dram.NativePort` names them, flattened
(``cmd_valid``, ``cmd_ready``, ``cmd_we``, ``cmd_addr``, ``wdata_valid``, ``wdata_ready``,
``wdata_data``, ``wdata_we``, ``rdata_valid``, ``rdata_ready``, ``rdata_data``), and
with ``pins=True`` the SDRAM's (``sdram_a``, ``sdram_ba``, ``sdram_cs_n``,
``sdram_cke``, ``sdram_ras_n``, ``sdram_cas_n``, ``sdram_we_n``, ``sdram_dq``,
``sdram_dm``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DRAM_PARTS", "DRAMError", "DRAMPart", "dram_verilog", "memory_capacity"]


class DRAMError(ValueError):
    """A DRAM request that cannot be generated, or the ``dram`` extra is missing."""


@dataclass(frozen=True)
class DRAMPart:
    """A board's DRAM behind LiteDRAM's controller, as a memory the simulated chip can
    be put on (``--memory``, beside the profiles of the memory model): LiteDRAM's module
    class for the part (its geometry and datasheet timings), its data pins, its size."""

    name: str
    module: str  # the class in litedram.modules
    data_bits: int
    megabytes: int
    board: str
    # the clock of its controller and PHY, on the board and in simulation (a PLL output
    # beside the chip's): low enough for LiteDRAM's controller to meet timing
    clock_mhz: float
    description: str = ""

    def words(self, mem_width: int) -> int:
        """Memory words of ``mem_width`` bits it holds."""
        return self.megabytes * 2**20 * 8 // mem_width

    def addr_width(self, mem_width: int) -> int:
        """Bits of a word address (the controller's port's)."""
        return self.words(mem_width).bit_length() - 1

    def stretch(self, word_bits: int, channels: int) -> int:
        """How many times longer a batch may take than on the ideal memory (the budget
        a hang is declared past): every channel's word in turn, each as many beats as
        it has and a row switch and refresh's worth beside, plus a read's latency and
        the clock crossing's — twice over, as the DRAM's clock may be half the chip's."""
        return 2 * (channels * (-(-word_bits // self.data_bits) + 16) + 32)

    def check_chip_clock(self, chip_mhz: float) -> None:
        """Refuse a chip clocked slower than the DRAM: LiteDRAM's controller does not
        wait for read data to be taken, so its words cross into the chip's clock through
        a FIFO that only the chip's faster clock keeps from overflowing."""
        if chip_mhz < self.clock_mhz:
            raise DRAMError(
                f"{self.name}: the chip's clock ({chip_mhz:g} MHz) is slower than the "
                f"DRAM's ({self.clock_mhz:g} MHz); LiteDRAM's read data would overrun "
                "the clock crossing")

    def to_dict(self) -> dict:
        return {"dram": self.name}


DRAM_PARTS = {p.name: p for p in (
    # ULX3S v3.0: 32 MB of SDR SDRAM, 16 data bits (an MT48LC16M16A2 or a compatible part)
    DRAMPart("ulx3s-litedram", "MT48LC16M16", 16, 32, "ulx3s-85f", clock_mhz=80.0,
             description="ULX3S: 32 MB of 16-bit SDR SDRAM (MT48LC16M16 timings) behind "
             "LiteDRAM's controller on its own 80 MHz clock (the chip's port crosses "
             "into it), the DRAM played by LiteDRAM's model of it (banks, rows, refresh)"),
)}


def memory_capacity(config, memory) -> int:
    """The memory words a host may use on the chip ``config`` (a
    :class:`~mixgcn.gen.config.ChipConfig`) attached to ``memory``: its address space,
    or a :class:`DRAMPart`'s size where that is smaller."""
    words = 1 << config.addr_width
    if isinstance(memory, DRAMPart):
        from mixgcn.hdl.chip import ChipLayouts

        words = min(words, memory.words(ChipLayouts(config).mem_width))
    return words


def _litedram():
    try:
        import litedram  # noqa: F401
        import migen  # noqa: F401
    except ImportError as e:
        raise DRAMError(f"the DRAM controller needs the dram extra ({e.name} is missing): "
                        "pip install -e '.[dram]'") from None


def init_steps(part: DRAMPart, clk_hz: float, powerup_us: float = 200.0) -> list[dict]:
    """The SDRAM's initialisation as steps of the sequencer (:func:`dram_verilog`):
    LiteDRAM's own sequence for the PHY (CKE high, precharge all, load the mode
    register with the PHY's CAS latency and burst length, two auto-refreshes, the mode
    register again), each step a command (``pins``: cs, ras, cas, we asserted, or
    ``None``: CKE rises) and then a wait in clock cycles: ``powerup_us`` after CKE
    rises (the part's datasheet asks 100 µs before the first command), then the
    command's own time — tRP after a precharge, tRFC after a refresh, and after a mode
    register load the 200 cycles LiteDRAM's sequence waits (the part needs 2)."""
    _litedram()
    import litedram.modules
    from litedram.init import get_sdr_phy_init_sequence

    t = getattr(litedram.modules, part.module)(clk_hz, "1:1").timing_settings
    sequence, _ = get_sdr_phy_init_sequence(_phy_settings(part, clk_hz), t)
    steps = []
    for name, address, bank, command, delay in sequence:
        flags = set(command.split("|"))
        if "DFII_CONTROL_CKE" in flags:
            steps.append(dict(name=name, pins=None, address=0, bank=0,
                              wait=round(powerup_us * 1e-6 * clk_hz)))
            continue
        pins = tuple(int(f"DFII_COMMAND_{x}" in flags) for x in ("CS", "RAS", "CAS", "WE"))
        wait = {(1, 1, 0, 1): t.tRP, (1, 1, 1, 0): t.tRFC, (1, 1, 1, 1): delay}.get(pins)
        if wait is None:
            raise DRAMError(f"LiteDRAM's initialisation has a step this sequencer does not "
                            f"know: {name!r} ({command})")
        steps.append(dict(name=name, pins=pins, address=address, bank=bank,
                          wait=max(int(wait), 2)))
    return steps


def _phy_settings(part: DRAMPart, clk_hz: float):
    """The PHY settings GENSDRPHY has for ``part`` at ``clk_hz`` (the model PHY takes
    the same: CAS latency, read latency)."""
    from litedram.phy.gensdrphy import GENSDRPHY
    from migen import Record

    return GENSDRPHY(Record(_sdram_layout(part)), clk_hz).settings


def _sdram_layout(part: DRAMPart) -> list[tuple[str, int]]:
    """The SDR SDRAM's pins, as GENSDRPHY takes them (a 13-bit address, 4 banks)."""
    return [("a", 13), ("ba", 2), ("cs_n", 1), ("cke", 1), ("ras_n", 1), ("cas_n", 1),
            ("we_n", 1), ("dq", part.data_bits), ("dm", part.data_bits // 8)]


def dram_verilog(part: str, mem_width: int, *, clk_hz: float | None = None,
                 check_timing: bool = False, name: str = "mixgcn_dram",
                 pins: bool = False, powerup_us: float = 200.0) -> tuple[str, int]:
    """The Verilog of module ``name`` (module docstring) and its port's address width
    in words. ``clk_hz``: the DRAM's clock (``sys_clk``), by default the part's
    :attr:`~DRAMPart.clock_mhz`. ``pins``: on the board's PHY (``GENSDRPHY``), the
    SDRAM's pins as ports ``sdram_*``; otherwise on LiteDRAM's model of the part.
    Either way an initialisation sequencer (:func:`init_steps`, ``powerup_us``) drives
    the DFI first and the port takes no command until it is done (``init_done``)."""
    if part not in DRAM_PARTS:
        raise DRAMError(f"unknown DRAM {part!r}: expected one of {', '.join(DRAM_PARTS)}")
    p = DRAM_PARTS[part]
    if clk_hz is None:
        clk_hz = p.clock_mhz * 1e6
    if mem_width % p.data_bits or mem_width < p.data_bits:
        raise DRAMError(f"a {mem_width}-bit memory word is not a whole number of the "
                        f"{p.name}'s {p.data_bits}-bit beats")
    if not 10e6 <= clk_hz <= 200e6:
        raise DRAMError(f"the DRAM's clock must be 10..200 MHz, got {clk_hz / 1e6:g} MHz")
    if not 0 <= powerup_us <= 10_000:
        raise DRAMError(f"the power-up wait must be 0..10000 µs, got {powerup_us!r}")
    _litedram()
    import litedram.modules
    from litedram.core import LiteDRAMCore
    from litedram.phy.gensdrphy import GENSDRPHY
    from litedram.phy.model import SDRAMPHYModel
    from migen import Case, If, Module, Record, Replicate, Signal
    from migen.fhdl.verilog import convert
    from migen.genlib.cdc import MultiReg

    module = getattr(litedram.modules, p.module)(clk_hz, "1:1")
    steps = init_steps(p, clk_hz, powerup_us)

    class InitSequencer(Module):
        """Drives the controller's DFI injector's external DFI through ``steps`` (a
        command for one cycle, then its wait), then hands the DFI to the controller."""

        def __init__(self, dfii):
            self.done = done = Signal()
            step = Signal(max=len(steps) + 1)
            wait = Signal(max=max(s["wait"] for s in steps) + 1)
            cke = Signal()
            phases = dfii.ext_dfi.phases
            self.comb += dfii.ext_dfi_sel.eq(~done)
            for ph in phases:  # no command unless one is issued below
                self.comb += [ph.cke.eq(Replicate(cke, len(ph.cke))),
                              ph.cs_n.eq(~0), ph.ras_n.eq(1), ph.cas_n.eq(1), ph.we_n.eq(1)]
            issue = Signal()
            self.comb += issue.eq(~done & (wait == 0))
            cases = {}
            for i, s in enumerate(steps):
                actions = [wait.eq(s["wait"]), step.eq(i + 1)]
                if s["pins"] is None:
                    actions.append(cke.eq(1))
                cases[i] = actions
            cases["default"] = [done.eq(1)]
            self.sync += If(wait != 0, wait.eq(wait - 1)).Elif(~done, Case(step, cases))
            commands = {}
            ph = phases[0]
            for i, s in enumerate(steps):
                if s["pins"] is None:
                    continue
                cs, ras, cas, we = s["pins"]
                commands[i] = [ph.cs_n.eq(~cs), ph.ras_n.eq(~ras), ph.cas_n.eq(~cas),
                               ph.we_n.eq(~we), ph.address.eq(s["address"]),
                               ph.bank.eq(s["bank"])]
            self.comb += If(issue, Case(step, commands))

    class Top(Module):
        def __init__(self):
            self.ios = set()
            if pins:
                layout = _sdram_layout(p)
                pads = Record(layout, name="sdram")
                self.submodules.phy = phy = GENSDRPHY(pads, clk_hz)
                self.ios |= {getattr(pads, f) for f, _ in layout}
            else:
                self.submodules.phy = phy = SDRAMPHYModel(
                    module, data_width=p.data_bits, clk_freq=clk_hz,
                    verbosity=1 if check_timing else 0)
            self.submodules.core = core = LiteDRAMCore(phy, module.geom_settings,
                                                       module.timing_settings, clk_freq=clk_hz)
            self.submodules.init = init = InitSequencer(core.dfii)
            # the port in the chip's clock ("port"), LiteDRAM's crossing between
            port = core.crossbar.get_port(data_width=mem_width, clock_domain="port")
            self.addr_width = len(port.cmd.addr)
            # the end of the initialisation, into the chip's clock (it rises once)
            done = Signal(name_override="init_done")
            self.specials += MultiReg(init.done, done, odomain="port")
            self.ios.add(done)
            # named ports: migen would otherwise name them after their place inside
            for stream_name, stream in (("cmd", port.cmd), ("wdata", port.wdata),
                                        ("rdata", port.rdata)):
                inward = stream_name != "rdata"
                for field in ("valid", "ready", *{"cmd": ("we", "addr"),
                                                  "wdata": ("data", "we"),
                                                  "rdata": ("data",)}[stream_name]):
                    inner = getattr(stream, field)
                    outer = Signal(len(inner), name_override=f"{stream_name}_{field}")
                    into = inward != (field == "ready")  # driven from outside
                    source = outer if into else inner
                    if stream_name == "cmd" and field in ("valid", "ready"):
                        # no command is taken before the DRAM is initialised
                        source = source & done
                    self.comb += inner.eq(source) if into else outer.eq(source)
                    self.ios.add(outer)

    top = Top()
    if top.addr_width != p.addr_width(mem_width):  # the bridge is sized by the latter
        raise DRAMError(f"LiteDRAM's port takes {top.addr_width}-bit addresses, the "
                        f"{p.name}'s {p.words(mem_width)} words {p.addr_width(mem_width)}")
    return str(convert(top, top.ios, name=name)), top.addr_width
