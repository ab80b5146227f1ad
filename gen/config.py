"""Validated, frozen engine configurations and their named presets.

Every artefact of a configuration (the Verilog, the JSON of parameters the driver
reads, the test builds) derives from one of these objects, so a bad configuration is
refused here, at generation time, with the offending value in the message.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mixgcn.golden.fixed import required_acc_width

if TYPE_CHECKING:
    from mixgcn.gen.dram import DRAMPart

__all__ = ["CHIP_PRESETS", "DCE_PRESETS", "FABRIC_KINDS", "FABRIC_PRESETS", "MEMORY_PROFILES",
           "SAE_PRESETS", "ChipConfig", "ConfigError", "DCEConfig", "FabricConfig",
           "MemoryProfile", "SAEConfig", "SystemConfig", "load_chip", "load_memory",
           "memory_from_dict", "memory_names"]


class ConfigError(ValueError):
    """A configuration the generator refuses."""


def _from_dict(cls, d, where: str, **nested):
    """``cls`` from what its ``to_dict`` wrote: parameters (missing ones take their
    defaults), derived keys checked against the parameters, anything else refused.
    ``nested``: parameter name -> class of a nested configuration."""
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(d).__name__}")
    kind = cls.__name__.removesuffix("Config").lower()
    if d.get("kind", kind) != kind:
        raise ConfigError(f"{where}: kind is {d['kind']!r}, expected {kind!r}")
    params = {f.name for f in dataclasses.fields(cls)}
    derived = set(cls().to_dict()) - params
    unknown = sorted(set(d) - params - derived)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    args = {k: v for k, v in d.items() if k in params}
    for name, sub in nested.items():
        if name in args:
            args[name] = _from_dict(sub, args[name], f"{where}.{name}")
    config = cls(**args)
    given = config.to_dict()
    for k in sorted(derived & set(d)):
        if k != "kind" and d[k] != given[k] and not isinstance(given[k], dict):
            raise ConfigError(f"{where}: {k} is {d[k]!r}, but the parameters give {given[k]!r}")
    return config


def _from_fields(cls, d, where: str):
    """``cls`` from a JSON object holding exactly its fields (missing ones take their
    defaults, anything else is refused)."""
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(d).__name__}")
    unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    return cls(**d)


def _int(obj, name: str, lo: int, hi: int | None = None) -> None:
    v = getattr(obj, name)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ConfigError(f"{type(obj).__name__}.{name} must be an integer, got {v!r}")
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ConfigError(f"{type(obj).__name__}.{name} must be {rng}, got {v}")


@dataclass(frozen=True)
class DCEConfig:
    """Dense combination engine: an ``rows × cols`` array of MACs.

    - ``rows`` (R): the reduction lanes — an input row arrives R values per cycle;
    - ``cols`` (C): output columns — one output row carries C values;
    - ``width``: data bits; ``acc_width``: accumulator bits, checked against the longest
      reduction: ``max_k`` for ``X·W`` / ``X·Wᵀ`` (also the weight store's reach) and
      ``max_rows`` for ``Xᵀ·G`` (reduction over rows);
    - ``out_fifo_depth``: output rows the engine may hold; with fewer than its pipeline
      latency (~6) the engine throttles itself, never loses a row;
    - ``counter_width``: bits of the performance counters.
    """

    rows: int = 16
    cols: int = 16
    width: int = 16
    acc_width: int = 48
    max_k: int = 2048
    max_rows: int = 65536
    out_fifo_depth: int = 16
    counter_width: int = 40

    def __post_init__(self):
        _int(self, "rows", 1, 256)
        _int(self, "cols", 1, 256)
        _int(self, "width", 2, 32)
        _int(self, "acc_width", 2 * self.width, 128)
        _int(self, "max_k", 1)
        _int(self, "max_rows", 1)
        _int(self, "out_fifo_depth", 1, 4096)
        _int(self, "counter_width", 16, 64)
        if self.max_k < self.rows:  # Xᵀ·G tiles hold up to R rows of the k dimension
            raise ConfigError(f"DCEConfig.max_k={self.max_k} is below rows={self.rows}")
        need = required_acc_width(self.width, max(self.max_k, self.max_rows))
        if self.acc_width < need:
            raise ConfigError(
                f"DCEConfig.acc_width={self.acc_width} can overflow: a reduction of "
                f"{max(self.max_k, self.max_rows)} products of {self.width}-bit values needs "
                f"{need} bits (raise acc_width or lower max_k/max_rows)"
            )

    @property
    def weight_depth(self) -> int:
        """Words per weight-store row: ⌈max_k / R⌉."""
        return -(-self.max_k // self.rows)

    @property
    def b_lanes(self) -> int:
        """Values per word of the B stream (weights, or gradient rows for Xᵀ·G)."""
        return max(self.rows, self.cols)

    @property
    def max_shift(self) -> int:
        return self.acc_width - 1

    @classmethod
    def from_dict(cls, d: dict, where: str = "DCEConfig") -> DCEConfig:
        """The configuration :meth:`to_dict` wrote (see :func:`load_chip`)."""
        return _from_dict(cls, d, where)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(kind="dce", weight_depth=self.weight_depth, b_lanes=self.b_lanes,
                 macs=self.rows * self.cols)
        return d


DCE_PRESETS: dict[str, DCEConfig] = {
    # fast tests: a non-square array so rows and columns cannot be confused
    "tiny": DCEConfig(rows=2, cols=3, max_k=64, max_rows=512, out_fifo_depth=4),
    "default": DCEConfig(),
    # ECP5-85F: 156 MULT18X18D; 8×16 = 128 MACs, one per multiplier, 16-bit data
    "ecp5": DCEConfig(rows=8, cols=16, max_k=2048, max_rows=65536, out_fifo_depth=16),
}


@dataclass(frozen=True)
class SAEConfig:
    """Sparse aggregation engine: row-wise SpMM ``Y = S · X`` over a CSR stream.

    - ``lanes`` (L): feature columns computed at once (F > L runs in passes);
    - ``edges`` (E): parallel edge pipelines, each taking one non-zero a cycle;
    - ``width``, ``acc_width``: data and accumulator bits; ``acc_width`` is checked
      against ``max_degree``, the most non-zeros a row may have;
    - ``max_nodes``: rows of X the feature buffer holds per bank (two banks: one is
      loaded while the other is read). The buffer has a read port per pipeline, which
      block RAM provides by replication: ``2 · max_nodes · L · width · E`` bits;
    - ``partial_rows``: rows of partial sums (L accumulators each) the engine keeps
      between SPMM commands, so an SpMM whose rows gather from more than ``max_nodes``
      rows of X runs in column windows, its row sums carried at accumulator width from
      one window to the next and rounded once (docs/tiling.md): ``partial_rows · L ·
      acc_width`` bits. 0: no such memory, and such an SpMM is refused;
    - ``out_fifo_depth``, ``counter_width``: as for the DCE.
    """

    lanes: int = 16
    edges: int = 4
    width: int = 16
    acc_width: int = 48
    max_nodes: int = 8192
    max_degree: int = 65536
    partial_rows: int = 1024
    out_fifo_depth: int = 16
    counter_width: int = 40

    def __post_init__(self):
        _int(self, "lanes", 1, 256)
        _int(self, "edges", 1, 32)
        _int(self, "width", 2, 32)
        _int(self, "acc_width", 2 * self.width, 128)
        _int(self, "max_nodes", 2, 1 << 24)
        _int(self, "max_degree", 1)
        _int(self, "partial_rows", 0, 1 << 24)
        _int(self, "out_fifo_depth", 1, 4096)
        _int(self, "counter_width", 16, 64)
        need = required_acc_width(self.width, self.max_degree)
        if self.acc_width < need:
            raise ConfigError(
                f"SAEConfig.acc_width={self.acc_width} can overflow: a row of "
                f"{self.max_degree} non-zeros of {self.width}-bit values needs {need} bits "
                "(raise acc_width or lower max_degree)"
            )

    @property
    def buffer_bits(self) -> int:
        return 2 * self.max_nodes * self.lanes * self.width * self.edges

    @classmethod
    def from_dict(cls, d: dict, where: str = "SAEConfig") -> SAEConfig:
        """The configuration :meth:`to_dict` wrote (see :func:`load_chip`)."""
        return _from_dict(cls, d, where)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(kind="sae", buffer_bits=self.buffer_bits, macs=self.lanes * self.edges)
        return d


SAE_PRESETS: dict[str, SAEConfig] = {
    # fast tests; still holds Cora (2708 nodes) and a 10 000-leaf star
    "tiny": SAEConfig(lanes=3, edges=2, max_nodes=10240, out_fifo_depth=4),
    "default": SAEConfig(),
    # ECP5-85F: 8 lanes × 2 pipelines = 16 multipliers beside the DCE's 128;
    # 2 banks × 4096 rows × 8 × 16 bit × 2 replicas = 2 Mbit of its 3.7 Mbit block RAM
    "ecp5": SAEConfig(lanes=8, edges=2, max_nodes=4096, out_fifo_depth=16),
}


@dataclass(frozen=True)
class ChipConfig:
    """One accelerator chip: an SAE and a DCE joined by the pipeline FIFO and the
    exchange port, a descriptor queue, and a memory port (docs/architecture.md).

    - ``sae``, ``dce``: the engines. A row crosses from the SAE to the DCE as one word,
      so the SAE's lanes, the DCE's rows (reduction lanes) and columns must be equal
      ("the chip's lanes"), and both engines must share a number format;
    - ``pipeline_depth``: rows the SAE → DCE FIFO holds in its block RAM (two more
      wait in its registers);
    - ``desc_depth``: descriptors queued on chip;
    - ``addr_width``: memory words the memory port reaches (2**addr_width);
    - ``reader_depth``: words each read channel buffers (≥ the memory latency + 2 for
      a word a cycle).
    """

    sae: SAEConfig = SAEConfig(lanes=16, edges=2, partial_rows=8192)
    dce: DCEConfig = DCEConfig(rows=16, cols=16)
    pipeline_depth: int = 64
    desc_depth: int = 16
    addr_width: int = 22
    reader_depth: int = 4

    def __post_init__(self):
        if not isinstance(self.sae, SAEConfig):
            raise ConfigError(f"ChipConfig.sae must be an SAEConfig, got {self.sae!r}")
        if not isinstance(self.dce, DCEConfig):
            raise ConfigError(f"ChipConfig.dce must be a DCEConfig, got {self.dce!r}")
        _int(self, "pipeline_depth", 1, 1 << 16)
        _int(self, "desc_depth", 1, 4096)
        _int(self, "addr_width", 8, 32)
        _int(self, "reader_depth", 2, 1024)
        L, R, C = self.sae.lanes, self.dce.rows, self.dce.cols
        if not L == R == C:
            raise ConfigError(
                f"ChipConfig: SAE lanes ({L}), DCE rows ({R}) and DCE cols ({C}) must be "
                "equal: a row crosses the exchange port as one word")
        for f in ("width", "acc_width"):
            if getattr(self.sae, f) != getattr(self.dce, f):
                raise ConfigError(f"ChipConfig: SAE {f}={getattr(self.sae, f)} differs from "
                                  f"DCE {f}={getattr(self.dce, f)}")

    @property
    def lanes(self) -> int:
        return self.sae.lanes

    @classmethod
    def from_dict(cls, d: dict, where: str = "ChipConfig") -> ChipConfig:
        """The configuration :meth:`to_dict` wrote — what ``make verilog`` puts in
        ``chip.json`` — validated as if built here (see :func:`load_chip`)."""
        return _from_dict(cls, d, where, sae=SAEConfig, dce=DCEConfig)

    def to_dict(self) -> dict:
        d = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("sae", "dce")}
        d.update(kind="chip", lanes=self.lanes, sae=self.sae.to_dict(), dce=self.dce.to_dict())
        return d


CHIP_PRESETS: dict[str, ChipConfig] = {
    # fast tests: 4 lanes, small buffers
    "tiny": ChipConfig(sae=SAEConfig(lanes=4, edges=2, max_nodes=2048, out_fifo_depth=4),
                       dce=DCEConfig(rows=4, cols=4, max_k=256, max_rows=8192,
                                     out_fifo_depth=4),
                       pipeline_depth=8, desc_depth=4, addr_width=18),
    # the RTL training backend: 16 lanes hold a Cora hidden row (16) in one word
    "default": ChipConfig(),
    # iCE40 UP5K (iCEBreaker): 2 lanes, 2x2 DCE + 2 SAE multipliers = 6 of its 8 DSPs;
    # a 1024-row feature buffer (64 kbit of its 120 kbit of block RAM); small graphs only
    "micro": ChipConfig(sae=SAEConfig(lanes=2, edges=1, acc_width=42, max_nodes=1024,
                                      max_degree=1024, partial_rows=0, out_fifo_depth=4,
                                      counter_width=24),
                        dce=DCEConfig(rows=2, cols=2, acc_width=42, max_k=256, max_rows=1024,
                                      out_fifo_depth=4, counter_width=24),
                        pipeline_depth=4, desc_depth=2, addr_width=16, reader_depth=2),
    # ECP5-85F: 8x8 DCE (64 MULT18X18D) + 8 lanes x 2 SAE pipelines (16)
    "ecp5": ChipConfig(sae=SAE_PRESETS["ecp5"],
                       dce=DCEConfig(rows=8, cols=8, max_k=2048, max_rows=65536,
                                     out_fifo_depth=16),
                       pipeline_depth=64, desc_depth=16, addr_width=22),
}


def load_chip(spec: str) -> tuple[str, ChipConfig]:
    """A chip by preset name (``tiny``, ``default``, ``ecp5``) or from a JSON file the
    generator wrote (``build/verilog/<preset>/chip.json``), as (name, configuration).
    A bad name, file or content raises :class:`ConfigError` naming it."""
    if spec in CHIP_PRESETS:
        return spec, CHIP_PRESETS[spec]
    if not str(spec).endswith(".json"):
        raise ConfigError(f"unknown chip {spec!r}: expected one of {', '.join(CHIP_PRESETS)} "
                          "or a .json file written by 'make verilog'")
    path = Path(spec)
    try:
        d = json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"chip file {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"chip file {path} is not JSON: {e}") from None
    try:
        return str(path), ChipConfig.from_dict(d, where=str(path))
    except TypeError as e:  # a value of the wrong kind where a nested object belongs
        raise ConfigError(f"chip file {path}: {e}") from None


FABRIC_KINDS = ("crossbar", "serial")


@dataclass(frozen=True)
class FabricConfig:
    """The exchange fabric between P chips (docs/fabric.md): a link from every chip to
    every chip (to itself too), each carrying ``link_width`` bits a cycle with
    ``latency`` cycles from sender to receiver and credit-based flow control over a
    receive buffer of ``credits`` flits.

    - ``kind``: ``crossbar`` — chips on one die: every link is a whole row wide
      (``link_width=0`` means exactly that), one cycle; ``serial`` — chips on separate
      boards: the links between chips are ``link_width`` bits (a few GPIO/PMOD pins),
      a chip's link to itself stays a crossbar link;
    - ``latency``: cycles a flit (and a returned credit) takes on a serial link;
    - ``credits``: flits a receiver buffers; with fewer than the round trip
      (2 · latency + 2) a link cannot send a flit every cycle;
    - ``depth``: rows the reassembly buffer holds per source (crossbar links' credits).
    """

    kind: str = "crossbar"
    link_width: int = 0
    latency: int = 1
    credits: int = 4
    depth: int = 4

    def __post_init__(self):
        if self.kind not in FABRIC_KINDS:
            raise ConfigError(f"FabricConfig.kind must be one of {', '.join(FABRIC_KINDS)}, "
                              f"got {self.kind!r}")
        _int(self, "link_width", 0, 4096)
        _int(self, "latency", 1, 1024)
        _int(self, "credits", 1, 4096)
        _int(self, "depth", 1, 4096)
        if self.kind == "serial" and self.link_width == 0:
            raise ConfigError("FabricConfig.link_width must be >= 1 for serial links, got 0")

    @classmethod
    def from_dict(cls, d: dict, where: str = "FabricConfig") -> FabricConfig:
        # not _from_dict: here ``kind`` is a parameter, not the object's type
        return _from_fields(cls, d, where)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


FABRIC_PRESETS: dict[str, FabricConfig] = {
    "crossbar": FabricConfig(),
    # 8 data pins a direction (one PMOD), 8 cycles each way, 32 flits of credit: a
    # flit every cycle when nothing else stalls it (round trip 18 < 32)
    "serial": FabricConfig(kind="serial", link_width=8, latency=8, credits=32),
}


@dataclass(frozen=True)
class SystemConfig:
    """``chips`` chips of one configuration joined by an exchange fabric."""

    chip: ChipConfig = ChipConfig()
    chips: int = 2
    fabric: FabricConfig = FabricConfig()

    def __post_init__(self):
        if not isinstance(self.chip, ChipConfig):
            raise ConfigError(f"SystemConfig.chip must be a ChipConfig, got {self.chip!r}")
        if not isinstance(self.fabric, FabricConfig):
            raise ConfigError(f"SystemConfig.fabric must be a FabricConfig, "
                              f"got {self.fabric!r}")
        _int(self, "chips", 2, 64)

    @property
    def row_bits(self) -> int:
        """Bits of the values of a row on the exchange port."""
        return self.chip.lanes * self.chip.sae.width

    def link_width(self, src: int, dst: int) -> int:
        """Bits a cycle of the link from chip ``src`` to chip ``dst``."""
        f = self.fabric
        if f.kind == "crossbar" or src == dst or f.link_width == 0:
            return self.row_bits
        return min(f.link_width, self.row_bits)

    def link_latency(self, src: int, dst: int) -> int:
        return 1 if self.fabric.kind == "crossbar" or src == dst else self.fabric.latency

    def link_credits(self, src: int, dst: int) -> int:
        if self.fabric.kind == "crossbar" or src == dst:
            return self.fabric.depth
        return self.fabric.credits

    @classmethod
    def from_dict(cls, d: dict, where: str = "SystemConfig") -> SystemConfig:
        """What :meth:`to_dict` wrote (``system.json`` beside a system's Verilog)."""
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(d).__name__}")
        if d.get("kind", "system") != "system":
            raise ConfigError(f"{where}: kind is {d['kind']!r}, expected 'system'")
        unknown = sorted(set(d) - {"kind", "chips", "chip", "fabric"})
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
        return cls(chip=ChipConfig.from_dict(d.get("chip", {}), f"{where}.chip"),
                   chips=d.get("chips", 2),
                   fabric=FabricConfig.from_dict(d.get("fabric", {}), f"{where}.fabric"))

    def to_dict(self) -> dict:
        return dict(kind="system", chips=self.chips, chip=self.chip.to_dict(),
                    fabric=self.fabric.to_dict())


@dataclass(frozen=True)
class MemoryProfile:
    """The memory a chip is attached to, as the simulation's memory model plays it
    (docs/memory.md). Every figure is in the chip's clock cycles.

    - ``bandwidth``: bits a cycle, shared by every read and write channel of the chip;
      0: no limit — each channel moves a word every cycle (the ``ideal`` memory);
    - ``latency``: cycles from a read request being taken to its word arriving (1..64);
    - ``burst``: bytes in the memory's burst, aligned (a DRAM page: the row a bank holds
      open); 0: none. A word outside the burst last opened opens its burst, at
      ``burst_cycles`` cycles of the memory's time beside the word's own (precharge
      and activate);
    - ``description``: where the figures come from.
    """

    name: str = "ideal"
    bandwidth: int = 0
    latency: int = 1
    burst: int = 0
    burst_cycles: int = 0
    description: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"MemoryProfile.name must be a non-empty string, got {self.name!r}")
        _int(self, "bandwidth", 0, 1 << 16)
        _int(self, "latency", 1, MEMORY_MAX_LATENCY)
        _int(self, "burst", 0, 1 << 20)
        _int(self, "burst_cycles", 0, 255)
        if self.burst & (self.burst - 1):
            raise ConfigError(f"MemoryProfile.burst must be a power of two (bytes) or 0, "
                              f"got {self.burst}")
        if self.bandwidth == 0 and (self.burst or self.burst_cycles):
            raise ConfigError("MemoryProfile: an unlimited memory (bandwidth 0) has no bursts; "
                              f"got burst {self.burst}, burst_cycles {self.burst_cycles}")
        if bool(self.burst) != bool(self.burst_cycles):
            raise ConfigError("MemoryProfile: burst and burst_cycles are both 0 or both set, "
                              f"got burst {self.burst}, burst_cycles {self.burst_cycles}")

    def burst_shift(self, word_bits: int) -> int:
        """log2 of the words of ``word_bits`` bits in a burst (0: each word its own)."""
        words = self.burst * 8 // word_bits
        return words.bit_length() - 1 if words > 1 else 0

    def cycles_per_word(self, word_bits: int) -> int:
        """The most cycles one word can take of the memory's time."""
        if self.bandwidth == 0:
            return 1
        return -(-word_bits // self.bandwidth) + self.burst_cycles

    def stretch(self, word_bits: int, channels: int) -> int:
        """How many times longer a batch may take than on the ideal memory (its cycle
        budget stretches by this much): a word may wait out the latency — with a
        reader's buffer, at worst one word at a time — and, with limited bandwidth, a
        word of each of the ``channels`` (round robin), each as slow as a word can be."""
        wait = 1 if self.latency == 1 else self.latency + 2
        if self.bandwidth == 0:
            return wait
        return channels * self.cycles_per_word(word_bits) + wait

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "MemoryProfile") -> MemoryProfile:
        return _from_fields(cls, d, where)


MEMORY_MAX_LATENCY = 64  # the simulation model's delay line

# Model parameters for a chip clocked at 100 MHz (the boards' target), read from the
# parts' data sheets and the usual controller overheads; not measured on a board.
MEMORY_PROFILES: dict[str, MemoryProfile] = {p.name: p for p in (
    MemoryProfile("ideal", description="every channel a word a cycle, one cycle of latency "
                  "(the model the chip was designed against)"),
    MemoryProfile("ulx3s-sdram", bandwidth=16, latency=10, burst=2048, burst_cycles=4,
                  description="ULX3S: 16-bit SDR SDRAM (AS4C32M16SB) clocked with the chip; "
                  "2 KB pages (1,024 columns x 16 bits); a page switch costs tRP + tRCD, "
                  "2 + 2 cycles; CAS latency and controller pipeline about 10 cycles"),
    MemoryProfile("ecpix5-ddr3", bandwidth=128, latency=20, burst=2048, burst_cycles=4,
                  description="ECPIX-5: 16-bit DDR3-800 (MT41K256M16) behind a 4:1 PHY, "
                  "16 bits x 2 edges x 4 = 128 bits a chip cycle at peak; 2 KB pages, a "
                  "page switch about 4 cycles; about 20 cycles of read latency"),
    MemoryProfile("hbm", bandwidth=16384, latency=20,
                  description="an HBM2-class stack: about 205 GB/s (16,384 bits a cycle "
                  "at 100 MHz), many banks and pseudo-channels (no page cost modelled), "
                  "about 200 ns of latency"),
)}


def memory_names() -> tuple[str, ...]:
    """What ``--memory`` takes: the memory model's profiles, then the DRAMs behind a
    generated controller (:data:`~mixgcn.gen.dram.DRAM_PARTS`)."""
    from mixgcn.gen.dram import DRAM_PARTS

    return (*MEMORY_PROFILES, *DRAM_PARTS)


def load_memory(name: str) -> MemoryProfile | DRAMPart:
    """A memory by name (``--memory``): a profile the memory model plays, or a DRAM
    behind LiteDRAM's controller."""
    from mixgcn.gen.dram import DRAM_PARTS

    if name in DRAM_PARTS:
        return DRAM_PARTS[name]
    if name not in MEMORY_PROFILES:
        raise ConfigError(f"unknown memory {name!r}: expected one of "
                          f"{', '.join(memory_names())}")
    return MEMORY_PROFILES[name]


def memory_from_dict(d: dict) -> MemoryProfile | DRAMPart:
    """The memory a ``to_dict()`` describes (a profile's fields, or ``{"dram": name}``)."""
    if "dram" in d:
        return load_memory(d["dram"])
    return MemoryProfile.from_dict(d)
