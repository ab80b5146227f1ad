"""A board's DRAM controller, generated as Verilog by LiteDRAM (the ``dram`` extra:
``litedram``, ``litex`` and ``migen`` from PyPI).

:func:`dram_verilog` writes one Verilog module holding LiteDRAM's controller (bank
machines, refresher, command multiplexer) and a crossbar with one native user port as
wide as the chip's memory word (LiteDRAM converts it to the DRAM's width), on the
simulated PHY of a :class:`DRAMPart`: LiteDRAM's own model of the DRAM
(``SDRAMPHYModel``: banks that open and close rows, refresh, the part's command
timings at the given clock). ``check_timing=True`` adds LiteDRAM's checker, which
prints every command that breaks the part's datasheet timings. (The board's PHY,
``GENSDRPHY`` on the ULX3S, is not generated yet: this is the simulation's DRAM.)

The module's ports: ``sys_clk``, ``sys_rst``, and the native port as
:class:`mixgcn.hdl.dram.NativePort` names them, flattened: ``cmd_valid``,
``cmd_ready``, ``cmd_we``, ``cmd_addr``, ``wdata_valid``, ``wdata_ready``,
``wdata_data``, ``wdata_we``, ``rdata_valid``, ``rdata_ready``, ``rdata_data``.
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
        it has and a row switch and refresh's worth beside, plus a read's latency."""
        return channels * (-(-word_bits // self.data_bits) + 16) + 32

    def to_dict(self) -> dict:
        return {"dram": self.name}


DRAM_PARTS = {p.name: p for p in (
    # ULX3S v3.0: 32 MB of SDR SDRAM, 16 data bits (an MT48LC16M16A2 or a compatible part)
    DRAMPart("ulx3s-litedram", "MT48LC16M16", 16, 32, "ulx3s-85f",
             description="ULX3S: 32 MB of 16-bit SDR SDRAM (MT48LC16M16 timings) behind "
             "LiteDRAM's controller clocked with the chip, the DRAM played by LiteDRAM's "
             "model of it (banks, rows, refresh)"),
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


def dram_verilog(part: str, mem_width: int, *, clk_hz: float = 100e6,
                 check_timing: bool = False, name: str = "mixgcn_dram") -> tuple[str, int]:
    """The Verilog of module ``name`` (module docstring) and its port's address width
    in words."""
    if part not in DRAM_PARTS:
        raise DRAMError(f"unknown DRAM {part!r}: expected one of {', '.join(DRAM_PARTS)}")
    p = DRAM_PARTS[part]
    if mem_width % p.data_bits or mem_width < p.data_bits:
        raise DRAMError(f"a {mem_width}-bit memory word is not a whole number of the "
                        f"{p.name}'s {p.data_bits}-bit beats")
    if not 10e6 <= clk_hz <= 200e6:
        raise DRAMError(f"the DRAM's clock must be 10..200 MHz, got {clk_hz / 1e6:g} MHz")
    _litedram()
    import litedram.modules
    from litedram.core import LiteDRAMCore
    from litedram.phy.model import SDRAMPHYModel
    from migen import Module, Signal
    from migen.fhdl.verilog import convert

    module = getattr(litedram.modules, p.module)(clk_hz, "1:1")

    class Top(Module):
        def __init__(self):
            self.submodules.phy = phy = SDRAMPHYModel(module, data_width=p.data_bits,
                                                      clk_freq=clk_hz,
                                                      verbosity=1 if check_timing else 0)
            self.submodules.core = core = LiteDRAMCore(phy, module.geom_settings,
                                                       module.timing_settings, clk_freq=clk_hz)
            port = core.crossbar.get_port(data_width=mem_width)
            self.addr_width = len(port.cmd.addr)
            self.ios = set()
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
                    self.comb += inner.eq(outer) if into else outer.eq(inner)
                    self.ios.add(outer)

    top = Top()
    if top.addr_width != p.addr_width(mem_width):  # the bridge is sized by the latter
        raise DRAMError(f"LiteDRAM's port takes {top.addr_width}-bit addresses, the "
                        f"{p.name}'s {p.words(mem_width)} words {p.addr_width(mem_width)}")
    return str(convert(top, top.ios, name=name)), top.addr_width

