"""The chip in simulation: a :class:`~mixgcn.hdl.chip.Chip` on the memory model
(``mixgcn_memory.v``), its descriptors read from a descriptor memory
(:class:`MemorySource`) and its status records stored in a status memory
(:class:`MemorySink`), so a whole batch of descriptors runs with no Python in the
loop: the driver (:mod:`mixgcn.sim.chip.control`) bulk-loads memory and descriptors,
sets ``desc_count``, pulses ``start`` and waits for ``received`` status records.

Ports: ``mem_load`` / ``mem_dump`` with ``dump_first`` / ``dump_last`` (bulk transfers
between the memory model and files, see ``mixgcn_memory.v``), ``desc_count``,
``start``, ``read_stall`` / ``write_stall`` / ``xchg_stall`` (random stalls, see
:class:`ChipHarness`), ``mem_bandwidth`` / ``mem_latency`` / ``mem_burst_shift`` /
``mem_burst_cycles`` (the memory's profile), ``mem_words_read`` /
``mem_words_written`` / ``mem_words_distinct`` (the words its channels moved, the
distinct words read since ``mem_forget``), ``received``, ``done`` (all status
records in), ``elapsed`` (the batch's cycles); the chip's ``idle``, ``error`` and
counters (:func:`flat_counters`) pass through. The memory model is instance ``mem``
(array ``mem``), the descriptor memory ``desc_src.mem``, the status memory
``status_sink.mem``. With ``loopback=False`` the chip's exchange port is exposed and
the harness closes it through a wire that stalls at random (``xchg_stall``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from amaranth import Cat, ClockSignal, Instance, Module, Mux, ResetSignal, Shape, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import ChipConfig, SystemConfig
from mixgcn.gen.dram import DRAMPart
from mixgcn.hdl.chip import READ_CHANNELS, WRITE_CHANNELS, Chip, ChipLayouts
from mixgcn.hdl.system import System
from mixgcn.sim.chip.dram import DRAM_PORTS, dram_memory

__all__ = ["MEMORY_MODEL", "TOP", "ChipHarness", "MemorySink", "MemorySource", "SystemHarness",
           "attach", "cached_verilog", "clocked_top", "dram_build", "harness_ports",
           "harness_verilog", "memory_model"]

MEMORY_MODEL = Path(__file__).with_name("mixgcn_memory.v")


def _next(addr, period):
    return Mux(addr + 1 >= period, 0, addr + 1)


class MemorySource(wiring.Component):
    """Streams ``count`` words of its memory (addresses 0, 1, ..., wrapping at
    ``period``) as fast as the stream takes them, once per ``start``."""

    def __init__(self, layout, depth: int):
        self.layout, self.depth = layout, depth
        super().__init__({
            "o": Out(stream.Signature(layout)),
            "count": In(32), "period": In(32), "start": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.layout, depth=self.depth, init=[])
        rd = mem.read_port(transparent_for=())
        addr = Signal(range(self.depth))
        fetched = Signal(32)
        armed = Signal()  # started since reset: a reset never replays the memory
        have = Signal()  # the word read last cycle waits on the stream
        advance = ~have | (self.o.valid & self.o.ready)
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(advance),
                     self.o.payload.eq(rd.data), self.o.valid.eq(have)]
        with m.If(self.start):
            m.d.sync += [addr.eq(0), fetched.eq(0), have.eq(0), armed.eq(1)]
        with m.Elif(advance):
            with m.If(armed & (fetched < self.count)):
                m.d.sync += [fetched.eq(fetched + 1), have.eq(1),
                             addr.eq(_next(addr, self.period))]
            with m.Else():
                # the batch is out: disarmed until the next start, so a count raised for
                # the next batch before its start (a system arms its chips one after the
                # other, clock cycles apart) streams nothing early
                m.d.sync += [have.eq(0), armed.eq(0)]
        return m


class MemorySink(wiring.Component):
    """Takes every word (always ready) into its memory at addresses wrapping at
    ``period``, and counts them."""

    def __init__(self, layout, depth: int):
        self.layout, self.depth = layout, depth
        super().__init__({
            "i": In(stream.Signature(layout)),
            "period": In(32), "start": In(1), "received": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.layout, depth=self.depth, init=[])
        wr = mem.write_port()
        addr = Signal(range(self.depth))
        m.d.comb += [self.i.ready.eq(1), wr.addr.eq(addr), wr.data.eq(self.i.payload),
                     wr.en.eq(self.i.valid)]
        with m.If(self.start):
            m.d.sync += [addr.eq(0), self.received.eq(0)]
        with m.Elif(self.i.valid):
            m.d.sync += [self.received.eq(self.received + 1), addr.eq(_next(addr, self.period))]
        return m


def flat_counters(chip: Chip) -> dict:
    """The chip's counters by flat name (``cycles``, ``sae_busy_cycles``, ...): the names
    the harness gives its ports and the device protocol its counters."""
    return {"_".join(path): value
            for path, _, value in chip.counters.signature.flatten(chip.counters)}


class ChipHarness(wiring.Component):
    """The chip, its memory model, a descriptor source and a status sink (module
    docstring). ``desc_depth``: descriptors (and status records) a batch may hold;
    ``seed``: of the memory model's and the exchange wire's stall generators.

    Stalls, each 0..255 of 256 cycles, drawn independently: ``read_stall`` — the read
    channels refuse requests (the chip's inputs starve); ``write_stall`` — the write
    channels refuse writes (backpressure on its outputs); ``xchg_stall`` — the exchange
    wire, with ``loopback=False``, holds rows back (both).

    ``dram``: the chip's memory port on that DRAM behind LiteDRAM's controller
    (:mod:`mixgcn.sim.chip.dram`) instead of the memory model; the memory model's
    profile, stall and distinct-read ports are then absent (the DRAM takes the time
    it takes) and :data:`~mixgcn.sim.chip.dram.DRAM_PORTS` are added."""

    def __init__(self, config: ChipConfig, desc_depth: int = 4096, loopback: bool = True,
                 seed: int = 0xACE1, dram: DRAMPart | None = None):
        self.config, self.desc_depth, self.loopback = config, desc_depth, loopback
        self.seed, self.dram = seed, dram
        self.chip = Chip(config, loopback=loopback)
        super().__init__({**harness_ports(self.chip, config, dram=dram is not None),
                          "xchg_stall": In(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.chip = chip = self.chip
        attach(m, self.config, chip, lambda name: getattr(self, name), self.desc_depth,
               self.seed, self.dram)
        if not self.loopback:
            # the chip's exchange port exposed: the harness closes it through a wire that
            # stalls at random (a one-chip stand-in for the fabric)
            go = _lfsr(m, self.seed, "xchg_lfsr")[:8] >= self.xchg_stall
            m.d.comb += [chip.xchg_i.valid.eq(chip.xchg_o.valid & go),
                         chip.xchg_o.ready.eq(chip.xchg_i.ready & go),
                         chip.xchg_i.payload.eq(chip.xchg_o.payload)]
        return m


def _lfsr(m: Module, seed: int, name: str) -> Signal:
    """A 16-bit Fibonacci LFSR stepping every cycle (a stall generator)."""
    lfsr = Signal(16, init=(seed * 0x9E37 + 0xB5E1) % 0xFFFF + 1, name=name)
    m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))
    return lfsr


def harness_ports(chip_ports, config: ChipConfig, dram: bool = False) -> dict:
    """The harness's ports for one chip (names without a prefix); ``dram``: its memory
    is a DRAM (:class:`ChipHarness`)."""
    aw = config.addr_width
    counters = {n: Out(len(v)) for n, v in flat_counters(chip_ports).items()}
    model = {
        "read_stall": In(8), "write_stall": In(8),
        # the memory's profile (MemoryProfile; set between batches)
        "mem_bandwidth": In(17), "mem_latency": In(7), "mem_burst_shift": In(5),
        "mem_burst_cycles": In(8), "mem_forget": In(1), "mem_words_distinct": Out(48)}
    return {"mem_load": In(1), "mem_dump": In(1), "dump_first": In(aw),
            "dump_last": In(aw), "desc_count": In(32), "start": In(1),
            **(DRAM_PORTS if dram else model),
            "mem_words_read": Out(48), "mem_words_written": Out(48),
            "received": Out(32), "done": Out(1), "idle": Out(1),
            "error": Out(chip_ports.error.shape().size),
            "elapsed": Out(len(chip_ports.counters.cycles)), **counters}


def attach(m: Module, c: ChipConfig, chip, port, desc_depth: int, seed: int,
           dram: DRAMPart | None = None) -> None:
    """Give ``chip`` (a chip's ports) its descriptor source, status sink and memory
    (the memory model, or ``dram``), wired to the harness ports ``port(name)``
    (:func:`harness_ports`)."""
    lay = ChipLayouts(c)
    m.submodules.desc_src = src = MemorySource(lay.desc_layout, desc_depth)
    m.submodules.status_sink = sink = MemorySink(lay.status_layout, desc_depth)
    wiring.connect(m, src.o, chip.desc)
    wiring.connect(m, chip.status, sink.i)
    done, elapsed = port("done"), port("elapsed")
    m.d.comb += [src.count.eq(port("desc_count")), src.period.eq(desc_depth),
                 src.start.eq(port("start")), sink.period.eq(desc_depth),
                 sink.start.eq(port("start")), port("received").eq(sink.received),
                 done.eq(sink.received == port("desc_count")),
                 port("idle").eq(chip.idle), port("error").eq(chip.error.as_value())]
    # the batch's length: cycles from the start pulse to its last status record
    with m.If(port("start")):
        m.d.sync += elapsed.eq(0)
    with m.Elif(~done):
        m.d.sync += elapsed.eq(elapsed + 1)
    for name, value in flat_counters(chip).items():
        m.d.comb += port(name).eq(value)
    if dram is None:
        memory_model(m, c, chip.memory, port, seed)
    else:
        dram_memory(m, c, chip.memory, port, seed, dram.addr_width(ChipLayouts(c).mem_width))


def memory_model(m: Module, c: ChipConfig, bus, port, seed: int) -> None:
    """The memory model (``mixgcn_memory.v``, instance ``mem``) serving ``bus`` (a
    chip's :class:`~mixgcn.hdl.memport.MemoryBus`), its controls and counters on the
    harness ports ``port(name)``."""
    lay = ChipLayouts(c)
    aw, mw, nr, nw = c.addr_width, lay.mem_width, len(READ_CHANNELS), len(WRITE_CHANNELS)
    rd = [getattr(bus, n) for n in READ_CHANNELS]
    wr = [getattr(bus, n).wr for n in WRITE_CHANNELS]
    req_ready, resp_valid = Signal(nr), Signal(nr)
    resp_data, wr_ready = Signal(nr * mw), Signal(nw)
    m.submodules.mem = Instance(
        "mixgcn_memory", p_AW=aw, p_MW=mw, p_NR=nr, p_NW=nw, p_SEED=seed,
        i_clk=ClockSignal(), i_rst=ResetSignal(), i_rd_stall=port("read_stall"),
        i_wr_stall=port("write_stall"), i_bandwidth=port("mem_bandwidth"),
        i_latency=port("mem_latency"), i_burst_shift=port("mem_burst_shift"),
        i_burst_cycles=port("mem_burst_cycles"), o_words_read=port("mem_words_read"),
        o_words_written=port("mem_words_written"), i_forget=port("mem_forget"),
        o_words_distinct=port("mem_words_distinct"),
        i_rd_req_valid=Cat(r.req.valid for r in rd), o_rd_req_ready=req_ready,
        i_rd_req_addr=Cat(r.req.payload for r in rd),
        o_rd_resp_valid=resp_valid, o_rd_resp_data=resp_data,
        i_wr_valid=Cat(w.valid for w in wr), o_wr_ready=wr_ready,
        i_wr_addr=Cat(w.payload.addr for w in wr), i_wr_data=Cat(w.payload.data for w in wr),
        i_load=port("mem_load"), i_dump=port("mem_dump"), i_dump_first=port("dump_first"),
        i_dump_last=port("dump_last"))
    for i, r in enumerate(rd):
        m.d.comb += [r.req.ready.eq(req_ready[i]), r.resp.valid.eq(resp_valid[i]),
                     r.resp.payload.eq(resp_data[i * mw:(i + 1) * mw])]
    for i, w in enumerate(wr):
        m.d.comb += w.ready.eq(wr_ready[i])


class SystemHarness(wiring.Component):
    """P chips and their fabric (:class:`~mixgcn.hdl.system.System`), each chip with
    the harness of :class:`ChipHarness` under the prefix ``c<p>_`` (its memory model
    instance ``c<p>.mem``, descriptor memory ``c<p>.desc_src.mem``, status memory
    ``c<p>.status_sink.mem``); the fabric's ``route`` as a port, its links' flit
    counters (``flits``, link ``p·P + q``) and ``link_stall``: each link holds back a
    flit in a cycle with that probability in 256ths, drawn independently."""

    def __init__(self, config: SystemConfig, desc_depth: int = 4096, seed: int = 0xACE1):
        self.config, self.desc_depth, self.seed = config, desc_depth, seed
        self.system = System(config)
        self.prefixes = [f"c{p}_" for p in range(config.chips)]
        members = {}
        for p, prefix in enumerate(self.prefixes):
            ports = harness_ports(self.system.chip_list[p], config.chip)
            members.update({prefix + name: member for name, member in ports.items()})
        super().__init__({**members, "route": In(self.system.route.shape()),
                          "link_stall": In(8), "flits": Out(self.system.flits.shape())})

    def elaborate(self, platform):
        m = Module()
        P = self.config.chips
        m.submodules.system = system = self.system
        m.d.comb += [system.route.eq(self.route), self.flits.eq(system.flits)]
        for p, prefix in enumerate(self.prefixes):
            m.submodules[f"c{p}"] = sub = Module()
            attach(sub, self.config.chip, system.chips[p],
                   lambda name, prefix=prefix: getattr(self, prefix + name), self.desc_depth,
                   self.seed + p)
        stalls = [_lfsr(m, self.seed * 31 + i, f"link_lfsr_{i}")[:8] < self.link_stall
                  for i in range(P * P)]
        m.d.comb += system.stall.eq(Cat(stalls))
        return m


# The top module a simulation runs: the harness and its clock.
TOP = "chip_sim"


def clocked_top(harness, module: str = "chip_harness") -> str:
    """Verilog of :data:`TOP`: the harness (instance ``harness``) with a clock that
    toggles every half :data:`~mixgcn.sim.build.CLOCK_PERIOD_NS` inside the simulator
    (Verilator ``--timing``), and every other port of the harness as a top-level
    register (inputs) or wire (outputs) of the same name.

    Why: a clock driven from the testbench costs a simulator callback every half cycle,
    which the chip's simulation spent most of its time in; with the clock in Verilog a
    batch of descriptors runs with no call out of the simulator until it ends.

    A harness on a DRAM (its ``dram`` a :class:`~mixgcn.gen.dram.DRAMPart`) has the
    controller's clock as a port, ``dram_clk``: it toggles here too, at the part's
    rate, out of step with the chip's as on a board."""
    from amaranth.lib.wiring import Flow

    from mixgcn.sim.build import CLOCK_PERIOD_NS

    half = CLOCK_PERIOD_NS / 2
    lines = [f"module {TOP};", "  reg clk = 1'b0;", f"  always #{half:g} clk = ~clk;",
             "  reg rst = 1'b1;"]
    ports = ["    .clk(clk)", "    .rst(rst)"]
    clocks = {}
    dram = getattr(harness, "dram", None)
    if dram is not None:
        clocks["dram_clk"] = 500 / dram.clock_mhz  # half its period, in ns
    for name, member in harness.signature.members.items():
        width = Shape.cast(member.shape).width
        vector = f"[{width - 1}:0] " if width > 1 else ""
        kind = "reg" if member.flow == Flow.In else "wire"
        if name in clocks:
            lines += [f"  reg {name} = 1'b0;", f"  always #{clocks.pop(name):g} {name} = ~{name};"]
        else:
            lines.append(f"  {kind} {vector}{name};")
        ports.append(f"    .{name}({name})")
    if clocks:
        raise ValueError(f"the harness has no port for its clock(s) {', '.join(clocks)}")
    lines += [f"  {module} harness (", ",\n".join(ports), "  );", "endmodule", ""]
    return "\n".join(lines)


def harness_verilog(config: ChipConfig | SystemConfig, loopback: bool = True,
                    seed: int = 0xACE1, on_generate: Callable[[], None] | None = None,
                    dram: DRAMPart | None = None) -> str:
    """Verilog of the harness of a chip (module ``chip_harness``) or of a system (a
    :class:`SystemConfig`: ``system_harness``) with the memory model and its clocked
    top (module :data:`TOP`), cached under the build folder by a hash of the
    configuration and every source it is generated from (converting it takes a while).
    ``dram`` (one chip): the chip on that DRAM, its controller generated by LiteDRAM."""
    if isinstance(config, SystemConfig):
        if dram is not None:
            raise ValueError("a system's chips are simulated on the memory model only")
        return cached_verilog("system", (config, seed),
                              lambda: SystemHarness(config, seed=seed), on_generate)
    if dram is None:
        return cached_verilog("chip", (config, loopback, seed),
                              lambda: ChipHarness(config, loopback=loopback, seed=seed),
                              on_generate)
    import mixgcn.sim.chip.dram

    key, sources, extra = dram_build(config, dram)
    return cached_verilog(
        "chip", (config, loopback, seed, *key),
        lambda: ChipHarness(config, loopback=loopback, seed=seed, dram=dram), on_generate,
        sources=(*sources, Path(mixgcn.sim.chip.dram.__file__)), extra=extra)


def dram_build(config: ChipConfig, dram: DRAMPart):
    """What a harness on ``dram`` adds to :func:`cached_verilog`: to the key (the part,
    LiteDRAM's and migen's versions), to the sources (the generator), and the
    controller's Verilog as ``extra``. Refuses a DRAM clocked faster than the simulated
    chip (:meth:`~mixgcn.gen.dram.DRAMPart.check_chip_clock`)."""
    from importlib.metadata import version

    import mixgcn.gen.dram
    from mixgcn.gen.dram import dram_verilog
    from mixgcn.sim.build import CLOCK_PERIOD_NS

    dram.check_chip_clock(1000 / CLOCK_PERIOD_NS)
    mem_width = ChipLayouts(config).mem_width
    return ((dram, version("litedram"), version("migen")), (Path(mixgcn.gen.dram.__file__),),
            lambda: dram_verilog(dram.name, mem_width)[0])


def cached_verilog(kind: str, key, make: Callable[[], wiring.Component],
                   on_generate: Callable[[], None] | None = None,
                   sources: tuple[Path, ...] = (),
                   extra: Callable[[], str] | None = None) -> str:
    """Verilog of the harness ``make()`` (module ``<kind>_harness``), the memory model
    and the clocked top :data:`TOP`, cached under the build folder by a hash of ``key``
    and of every source it is generated from (``sources`` beside hdl/, this module and
    the configuration's); ``extra()``: more Verilog the harness instantiates."""
    import hashlib

    import amaranth
    from amaranth.back import verilog

    import mixgcn.gen.config
    import mixgcn.hdl
    from mixgcn.sim.build import build_root

    h = hashlib.sha256(repr((key, amaranth.__version__)).encode())
    for src in [*sorted(Path(mixgcn.hdl.__file__).parent.glob("*.py")), Path(__file__),
                Path(mixgcn.gen.config.__file__), MEMORY_MODEL, *sources]:
        h.update(src.read_bytes())
    cached = build_root() / "verilog" / f"{kind}-harness-{h.hexdigest()[:16]}.v"
    if cached.is_file():
        return cached.read_text()
    if on_generate is not None:
        on_generate()
    harness = make()
    module = f"{kind}_harness"
    text = verilog.convert(harness, name=module, emit_src=False)
    text += "\n" + MEMORY_MODEL.read_text() + "\n" + clocked_top(harness, module)
    if extra is not None:
        text += "\n" + extra()
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.part")  # never a half-written file
    partial.write_text(text)
    partial.replace(cached)
    return text
