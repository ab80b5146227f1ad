"""Drive a simulated chip (:class:`~mixgcn.sim.chip.harness.ChipHarness`) from cocotb.

:class:`HarnessControl` carries out the device protocol's operations on a running
simulation (:mod:`mixgcn.host.device`): bulk memory transfers through files (the
memory model reads a hex file into its array in one cycle, ``$readmemh``, and writes a
range out in one cycle, ``$writememh``: no simulator call per word), batches of
descriptors run with no Python in the loop, counters, reset and memory stalls. The
chip server (:mod:`mixgcn.sim.chip.server`) and the chip's testbench
(:mod:`mixgcn.sim.verify.tb_chip`) both use it.

:class:`InSimulatorChip` offers the same operations as a
:class:`~mixgcn.host.device.ChipDevice` to host code running in a thread beside the
simulation (``cocotb.task.bridge``), so a testbench drives the chip through the host's
own driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge, Timer, ValueChange

from mixgcn.gen.config import MEMORY_PROFILES, ChipConfig, MemoryProfile
from mixgcn.gen.dram import DRAMPart, init_steps, memory_capacity
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.hdl.memport import CHANNELS
from mixgcn.host.device import COUNTERS, MEMORY_COUNTERS, BatchResult, StatusRecord
from mixgcn.host.packing import from_ints, to_ints, word_bytes
from mixgcn.sim.build import CLOCK_PERIOD_NS

__all__ = ["ChipHung", "HarnessControl", "InSimulatorChip", "run_together"]

# the harness's ports of the memory model's counters, in MEMORY_COUNTERS' order
_MEMORY_PORTS = ("mem_words_read", "mem_words_written", "mem_words_distinct")


class ChipHung(RuntimeError):
    """A batch did not finish within its cycle budget."""


def hex_lines(words: np.ndarray, bits: int) -> bytes:
    """Words of ``bits`` bits (``uint8 [N, nbytes]``, little-endian) as ``$readmemh``
    lines, all as wide as the widest word of the block needs (never beyond the
    memory's width): a block of 63-bit CSR beats in 256-bit words is written with 16
    digits a line, not 64, and the simulator parses a quarter of the text."""
    n, nb = words.shape
    used = np.flatnonzero(words.any(axis=0))
    width = min(-(-bits // 4), 2 * (int(used[-1]) + 1) if used.size else 1)
    digits = np.frombuffer(np.ascontiguousarray(words[:, ::-1]).tobytes().hex().encode(),
                           dtype=np.uint8).reshape(n, 2 * nb)
    lines = np.empty((n, width + 1), dtype=np.uint8)
    lines[:, :-1] = digits[:, 2 * nb - width:]
    lines[:, -1] = ord("\n")
    return lines.tobytes()


def parse_hex_lines(text: bytes, count: int, nbytes: int) -> np.ndarray:
    """``count`` words of ``nbytes`` from ``$writememh`` output (one fixed-width hex
    word a line; ``//`` comments and ``@`` addresses skipped)."""
    lines = [ln for ln in text.split(b"\n") if ln.strip() and not ln.startswith((b"//", b"@"))]
    if len(lines) != count:
        raise RuntimeError(f"a memory dump of {count} words held {len(lines)}")
    if not lines:
        return np.zeros((0, nbytes), dtype=np.uint8)
    widths = {len(ln) for ln in lines}
    if len(widths) != 1 or max(widths) > 2 * nbytes:
        raise RuntimeError(f"a memory dump's lines are {sorted(widths)} digits wide, "
                           f"not one width of at most {2 * nbytes}")
    pad = b"0" * (2 * nbytes - widths.pop())
    raw = bytes.fromhex((pad + pad.join(lines)).decode())
    return np.frombuffer(raw, dtype=np.uint8).reshape(count, nbytes)[:, ::-1].copy()


class _Ports:
    """A chip's harness ports under a prefix (``c1_start`` for ``start``); the clock and
    reset are shared."""

    def __init__(self, dut, prefix: str):
        self._dut, self._prefix = dut, prefix

    def __getattr__(self, name):
        if name in ("clk", "rst"):
            return getattr(self._dut, name)
        return getattr(self._dut, self._prefix + name)

    def has(self, name: str) -> bool:
        return hasattr(self._dut, self._prefix + name)


class HarnessControl:
    """The simulation top ``dut`` (:data:`~mixgcn.sim.chip.harness.TOP`: the harness of
    ``config`` and its clock) in a running simulation (module docstring).

    ``read_stall``, ``write_stall``, ``xchg_stall`` (each 0..255): the probability, in
    256ths, that a read channel refuses a request, a write channel a write, the exchange
    wire a row in a cycle (:class:`~mixgcn.sim.chip.harness.ChipHarness`); a batch's
    cycle budget stretches by the largest. ``memory``: the memory model's profile
    (:class:`~mixgcn.gen.config.MemoryProfile`), or the DRAM the harness was built on
    (:class:`~mixgcn.gen.dram.DRAMPart`: words then pass through its controller on
    their way in and out, see :mod:`mixgcn.sim.chip.dram`); a batch's budget stretches
    by the most cycles a word can wait in it."""

    def __init__(self, dut, config: ChipConfig, *, chip: int | None = None,
                 memory: MemoryProfile | DRAMPart = MEMORY_PROFILES["ideal"]):
        # chip p of a system harness: its ports carry the prefix c<p>_, its memories
        # live in the harness's c<p>
        self.dut = _Ports(dut, "" if chip is None else f"c{chip}_")
        self.config = config
        self.harness = dut.harness if chip is None else getattr(dut.harness, f"c{chip}")
        self.lay = ChipLayouts(config)
        self.mem_bytes = word_bytes(self.lay.mem_width)
        self.status_bytes = word_bytes(self.lay.status_layout.size)
        self.desc_depth = len(self.harness.desc_src.mem)
        self.read_stall = self.write_stall = self.xchg_stall = 0
        if not isinstance(memory, MemoryProfile | DRAMPart):
            raise TypeError(f"expected a MemoryProfile or a DRAMPart, got {memory!r}")
        self.memory = memory
        self.dram = isinstance(memory, DRAMPart)
        if self.dram != self.dut.has("copy_in"):
            raise ValueError(f"the harness was built {'without' if self.dram else 'with'} "
                             f"a DRAM, and the server was asked for {memory.name!r}")
        self.capacity = memory_capacity(config, memory)
        self._pending: list[tuple[int, np.ndarray]] = []
        args = getattr(cocotb, "plusargs", {}) or {}
        self.load_path = Path(args.get("MIXGCN_MEM_LOAD", "mixgcn_mem_load.hex"))
        self.dump_path = Path(args.get("MIXGCN_MEM_DUMP", "mixgcn_mem_dump.hex"))

    async def start(self) -> None:
        """Reset the chip (the clock runs in the simulator from time 0)."""
        for name in ("read_stall", "write_stall", "xchg_stall", "dump_first", "dump_last",
                     "mem_forget"):
            if self.dut.has(name):
                getattr(self.dut, name).value = 0
        self._set_memory()
        self.dut.desc_count.value = 0
        await self.reset()

    def _set_memory(self) -> None:
        if self.dram:
            return
        dut, m = self.dut, self.memory
        dut.mem_bandwidth.value, dut.mem_latency.value = m.bandwidth, m.latency
        dut.mem_burst_shift.value = m.burst_shift(self.lay.mem_width)
        dut.mem_burst_cycles.value = m.burst_cycles

    def stretch(self) -> int:
        """How many times longer a batch may take than on the ideal memory."""
        return self.memory.stretch(self.lay.mem_width, len(CHANNELS))

    async def reset(self, cycles: int = 3) -> None:
        dut = self.dut
        for name in ("start", "mem_load", "mem_dump", "copy_in", "copy_out"):
            if dut.has(name):
                getattr(dut, name).value = 0
        dut.rst.value = 1
        await ClockCycles(dut.clk, cycles)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 1)
        if self.dram:  # the controller initialises the DRAM first, as on a board
            await wait_for_dram(dut, self.memory)

    # ------------------------------------------------------------------- memory
    def _check(self, addr: int, count: int) -> None:
        if addr < 0 or addr + count > self.capacity:
            raise ValueError(f"memory words {addr}..{addr + count - 1} lie outside the "
                             f"chip's {self.capacity}-word memory")

    def write(self, addr: int, words: np.ndarray) -> None:
        """Stage ``words`` for ``addr``; they reach memory before the next run or read."""
        words = np.asarray(words, dtype=np.uint8)
        if words.ndim != 2 or words.shape[1] != self.mem_bytes:
            raise ValueError(f"memory words are {self.mem_bytes} bytes each, got an array "
                             f"of shape {words.shape}")
        self._check(addr, len(words))
        if len(words):
            self._pending.append((addr, words))

    async def flush(self) -> None:
        if not self._pending:
            return
        with open(self.load_path, "wb") as f:
            for addr, words in self._pending:
                f.write(f"@{addr:x}\n".encode())
                f.write(hex_lines(words, self.lay.mem_width))
        await self._pulse(self.dut.mem_load)
        if self.dram:  # staged: now through the controller into the DRAM
            for addr, words in self._pending:
                await self._copy(self.dut.copy_in, addr, len(words))
        self._pending.clear()

    async def _copy(self, start, addr: int, count: int) -> None:
        """Copy words ``addr``.. between the staging memory and the DRAM (``start``:
        ``copy_in`` or ``copy_out``), and wait until the last is written."""
        dut = self.dut
        dut.dump_first.value, dut.dump_last.value = addr, addr + count - 1
        await self._pulse(start)
        if int(dut.copy_busy.value):  # one wait in the simulator, not a poll
            budget = (count + 64) * self.stretch()
            limit = Timer(CLOCK_PERIOD_NS * budget, unit="ns")
            if await First(FallingEdge(dut.copy_busy), limit) is limit:
                raise ChipHung(f"copying {count} words at {addr} through the DRAM's "
                               f"controller did not finish in {budget:,} cycles")

    async def _pulse(self, signal) -> None:
        signal.value = 1
        await RisingEdge(self.dut.clk)
        signal.value = 0
        await RisingEdge(self.dut.clk)

    async def read(self, addr: int, count: int) -> np.ndarray:
        """``count`` memory words from ``addr`` (``uint8 [count, nbytes]``)."""
        self._check(addr, count)
        if count == 0:
            return np.zeros((0, self.mem_bytes), dtype=np.uint8)
        await self.flush()
        if self.dram:  # out of the DRAM into the staging memory, which dumps them
            await self._copy(self.dut.copy_out, addr, count)
        self.dut.dump_first.value = addr
        self.dut.dump_last.value = addr + count - 1
        await self._pulse(self.dut.mem_dump)
        return parse_hex_lines(self.dump_path.read_bytes(), count, self.mem_bytes)

    # ------------------------------------------------------------------- batches
    def counters(self) -> dict[str, int]:
        """The chip's counters, and the words its memory moved (MEMORY_COUNTERS: those
        its memory counts; a DRAM does not count distinct reads)."""
        dut = self.dut
        return {**{name: int(getattr(dut, name).value) for name in COUNTERS},
                **{name: int(getattr(dut, port).value)
                   for name, port in zip(MEMORY_COUNTERS, _MEMORY_PORTS, strict=True)
                   if dut.has(port)}}

    async def run(self, descriptors: np.ndarray, budget: int,
                  watch: tuple[int, Callable[[], None]] | None = None):
        """Run packed descriptors to their last status record, or until the chip raises
        its error flag. Returns the batch's cycles, the status records (``uint8 [n,
        nbytes]``, completion order), the counters' increase, the wall time and the
        chip's error flags (0: none). Raises :class:`ChipHung` past ``budget`` cycles
        (stretched by the stall levels). ``watch`` = (cycles, check): ``check`` is called
        every that many cycles of the batch (it may raise)."""
        return (await run_together([self], [descriptors], budget, watch))[0]

    async def _arm(self, descriptors: np.ndarray) -> int:
        """Load a batch's descriptors and stall levels; the number of descriptors."""
        dut = self.dut
        descs = to_ints(descriptors)
        n = len(descs)
        if n > self.desc_depth:
            raise ValueError(f"{n} descriptors exceed the harness's descriptor memory of "
                             f"{self.desc_depth}")
        await self.flush()
        src = self.harness.desc_src.mem
        for i, d in enumerate(descs):
            src[i].value = d
        if self.dram:
            if self.read_stall or self.write_stall:
                raise ValueError("random memory stalls are the memory model's; a DRAM "
                                 "stalls as its controller does")
        else:
            await self._pulse(dut.mem_forget)  # a batch's distinct reads count afresh
            dut.read_stall.value, dut.write_stall.value = self.read_stall, self.write_stall
        if dut.has("xchg_stall"):
            dut.xchg_stall.value = self.xchg_stall
        dut.desc_count.value = n
        return n

    def _finish(self, n: int, before: dict, seconds: float):
        dut = self.dut
        sink = self.harness.status_sink.mem
        done = int(dut.received.value)
        status = from_ints([int(sink[i].value) for i in range(done)], self.status_bytes)
        after = self.counters()
        deltas = {k: after[k] - before[k] for k in after if k != "cycles"}
        return int(dut.elapsed.value), status, deltas, seconds, int(dut.error.value)


async def run_together(chips: list[HarnessControl], batches: list[np.ndarray], budget: int,
                       watch: tuple[int, Callable[[], None]] | None = None,
                       stall: int = 0) -> list[tuple]:
    """Start every chip's batch in the same cycle and run until each has its last status
    record or one raises its error flag; each chip's result as
    :meth:`HarnessControl.run` gives it (its cycles count from the common start).
    ``stall``: the largest stall level elsewhere (a fabric's links), for the budget."""
    counts = [await chip._arm(b) for chip, b in zip(chips, batches, strict=True)]
    before = [chip.counters() for chip in chips]
    ports = [chip.dut for chip in chips]
    for p in ports:
        p.start.value = 1
    clk = ports[0].clk
    await RisingEdge(clk)
    for p in ports:
        p.start.value = 0
    await RisingEdge(clk)  # the start pulse has cleared `received`
    t0 = time.perf_counter()
    worst = max([stall, *(max(c.read_stall, c.write_stall, c.xchg_stall) for c in chips)])
    stretched = budget * max(c.stretch() for c in chips) * 256 // max(1, 256 - worst)
    limit = Timer(CLOCK_PERIOD_NS * stretched, unit="ns")

    def finished() -> bool:
        return (all(int(p.received.value) == n for p, n in zip(ports, counts, strict=True))
                or any(int(p.error.value) for p in ports))

    while not finished():
        tick = Timer(CLOCK_PERIOD_NS * watch[0], unit="ns") if watch else None
        fired = await First(*(RisingEdge(p.done) for p in ports),
                            *(ValueChange(p.error) for p in ports), limit,
                            *([tick] if tick else []))
        if fired is tick:
            watch[1]()
        elif fired is limit:
            done = ", ".join(f"{int(p.received.value)} of {n}"
                             for p, n in zip(ports, counts, strict=True))
            raise ChipHung(f"the chip{'s' if len(chips) > 1 else ''} completed {done} "
                           f"descriptors within the batch's budget of {stretched:,} cycles")
    await ClockCycles(clk, 1)
    seconds = time.perf_counter() - t0
    return [chip._finish(n, b, seconds)
            for chip, n, b in zip(chips, counts, before, strict=True)]


class InSimulatorChip:
    """The :class:`~mixgcn.host.device.ChipDevice` protocol on a
    :class:`HarnessControl`, for host code running in a ``cocotb.task.bridge`` thread:
    each call blocks that thread while the simulation carries it out."""

    def __init__(self, control: HarnessControl, name: str = "chip"):
        from cocotb.task import resume

        self.control, self.config, self.name = control, control.config, name
        self._run = resume(control.run)
        self._read = resume(control.read)

    def write(self, addr: int, words: np.ndarray) -> None:
        self.control.write(addr, words)

    def run(self, descriptors: np.ndarray, *, budget: int, label: str) -> BatchResult:
        cycles, status, counters, seconds, error = self._run(descriptors, budget)
        lay = self.control.lay
        return BatchResult(cycles=cycles, counters=counters, device_seconds=seconds,
                           status=[StatusRecord.decode(lay, w) for w in to_ints(status)],
                           error=error)

    def read(self, addr: int, count: int) -> np.ndarray:
        return self._read(addr, count)

    def counters(self) -> dict[str, int]:
        return self.control.counters()

    def close(self) -> None:
        pass


async def wait_for_dram(dut, part: DRAMPart) -> None:
    """Wait (one trigger in the simulator) until the DRAM behind the harness ``dut`` is
    initialised (its ``dram_ready``), within twice its initialisation's cycles."""
    if int(dut.dram_ready.value):
        return
    # the controller is generated for the simulation's clock (harness_verilog)
    steps = init_steps(part, 1e9 / CLOCK_PERIOD_NS)
    budget = 2 * sum(step["wait"] + 1 for step in steps)
    limit = Timer(CLOCK_PERIOD_NS * budget, unit="ns")
    if await First(RisingEdge(dut.dram_ready), limit) is limit:
        raise ChipHung(f"the DRAM's initialisation did not finish in {budget:,} cycles")
