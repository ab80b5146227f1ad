"""cocotb testbench of the chip's memory port on a DRAM: :class:`~mixgcn.hdl.dram.DRAMBridge`
serving the six read and two write channels of a chip's memory bus from LiteDRAM's
controller and its model of the ULX3S's SDRAM (:mod:`mixgcn.gen.dram`, with LiteDRAM's
checker of the part's datasheet timings, which prints every violation).

Random traffic, seeded: both write channels write words at random addresses (some near
the DRAM's end, some in the same rows, some in other banks), then every read channel
reads random addresses of those at once, each asking at random times (at first nearly
every cycle, so that more reads wait than the bridge has tags for); every word must
come back to the channel that asked, in the order it asked, equal to the word written.
The bridge's counters must equal the words moved. Then a read asked once a write was
taken must return the word written, with the other channels busy. Before all that, the DRAM's
initialisation: a write offered from reset reaches the DRAM only once the sequencer
has run (``dram_ready``), no sooner than its power-up wait. Run through
:func:`mixgcn.sim.build.run_cocotb` on :func:`verilog` (pytest: tests/test_dram.py).
"""

from __future__ import annotations

import os
import random

import cocotb
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from mixgcn.hdl.dram import DRAMBridge, dram_controller
from mixgcn.hdl.memport import READ_CHANNELS, WRITE_CHANNELS
from mixgcn.sim.build import CLOCK_PERIOD_NS  # the chip's; the DRAM's is the part's own

TOP = "dram_tb"
PART, MW, AW = "ulx3s-litedram", 64, 24  # the chip addresses more words than the DRAM
OUTSTANDING = 3


class BridgeOnDRAM(wiring.Component):
    """The bridge and the generated controller (instance of ``mixgcn_dram``)."""

    def __init__(self, dram_addr_width: int):
        self.dram_addr_width = dram_addr_width
        ports = {"words_read": Out(48), "words_written": Out(48), "dram_ready": Out(1),
                 "dram_clk": In(1)}
        for n in READ_CHANNELS:  # flat ports: a read's `resp` has no `ready` to expose
            ports.update({f"{n}_req_valid": In(1), f"{n}_req_ready": Out(1),
                          f"{n}_req_addr": In(AW), f"{n}_resp_valid": Out(1),
                          f"{n}_resp_data": Out(MW)})
        for n in WRITE_CHANNELS:
            ports.update({f"{n}_wr_valid": In(1), f"{n}_wr_ready": Out(1),
                          f"{n}_wr_addr": In(AW), f"{n}_wr_data": In(MW)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        # few tags: LiteDRAM keeps fewer than the default 16 reads in flight itself, and
        # the bridge's own bound must hold
        m.submodules.bridge = bridge = DRAMBridge(AW, MW, self.dram_addr_width,
                                                  outstanding=OUTSTANDING)
        for n in READ_CHANNELS:
            ch = getattr(bridge.bus, n)
            m.d.comb += [ch.req.valid.eq(getattr(self, f"{n}_req_valid")),
                         ch.req.payload.eq(getattr(self, f"{n}_req_addr")),
                         getattr(self, f"{n}_req_ready").eq(ch.req.ready),
                         getattr(self, f"{n}_resp_valid").eq(ch.resp.valid),
                         getattr(self, f"{n}_resp_data").eq(ch.resp.payload)]
        for n in WRITE_CHANNELS:
            wr = getattr(bridge.bus, n).wr
            m.d.comb += [wr.valid.eq(getattr(self, f"{n}_wr_valid")),
                         wr.payload.addr.eq(getattr(self, f"{n}_wr_addr")),
                         wr.payload.data.eq(getattr(self, f"{n}_wr_data")),
                         getattr(self, f"{n}_wr_ready").eq(wr.ready)]
        m.d.comb += [self.words_read.eq(bridge.words_read),
                     self.words_written.eq(bridge.words_written)]
        dram_controller(m, bridge.dram, self.dram_clk, init_done=self.dram_ready)
        return m


def verilog() -> str:
    from amaranth.back import verilog as amaranth_verilog

    from mixgcn.gen.dram import DRAM_PARTS, dram_verilog

    part = DRAM_PARTS[PART]
    text = amaranth_verilog.convert(BridgeOnDRAM(part.addr_width(MW)), name=TOP,
                                    emit_src=False)
    return text + "\n" + dram_verilog(PART, MW, check_timing=True)[0]


def _sig(dut, *path):
    return getattr(dut, "_".join(path))


@cocotb.test()
async def random_traffic(dut):
    from mixgcn.gen.dram import DRAM_PARTS, init_steps

    rng = random.Random(int(os.environ.get("MIXGCN_SEED", "7")))
    words = DRAM_PARTS[PART].words(MW)
    part = DRAM_PARTS[PART]
    dram_ns = 1000 / part.clock_mhz
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    cocotb.start_soon(Clock(dut.dram_clk, dram_ns, unit="ns").start())
    for n in READ_CHANNELS:
        _sig(dut, n, "req", "valid").value = 0
    for n in WRITE_CHANNELS:
        _sig(dut, n, "wr", "valid").value = 0
    # addresses: a dense block (same rows), scattered ones (every bank, many rows) and
    # the DRAM's last words
    addrs = list(range(0, 96)) + rng.sample(range(96, words - 64), 160) + \
        list(range(words - 16, words))
    rng.shuffle(addrs)
    memory = {a: rng.getrandbits(MW) for a in addrs}

    # the initialisation: a write offered all through it is taken four times (into
    # its channel's slot, then on into the bridge's three-command FIFO), and no more
    # until the controller takes the first, after it
    steps = init_steps(part, part.clock_mhz * 1e6)  # in the DRAM's cycles
    init_ns = sum(step["wait"] + 1 for step in steps) * dram_ns
    dut.rst.value = 1
    await ClockCycles(dut.clk, 5)
    first = WRITE_CHANNELS[0]
    _sig(dut, first, "wr", "valid").value = 1
    _sig(dut, first, "wr", "addr").value = addrs[0]
    _sig(dut, first, "wr", "data").value = memory[addrs[0]]
    dut.rst.value = 0
    cycles = taken = 0
    while True:
        await ReadOnly()
        if int(dut.dram_ready.value):
            break
        taken += int(_sig(dut, first, "wr", "ready").value)
        await RisingEdge(dut.clk)
        cycles += 1
        assert cycles * CLOCK_PERIOD_NS < 2 * init_ns, "the DRAM's initialisation never ended"
    assert taken == 4, f"{taken} writes taken while the DRAM was being initialised"
    assert cycles * CLOCK_PERIOD_NS >= steps[0]["wait"] * dram_ns, \
        f"initialised in {cycles} cycles, before power-up"
    await RisingEdge(dut.clk)
    _sig(dut, first, "wr", "valid").value = 0
    await ClockCycles(dut.clk, 20)
    dut._log.info(f"DRAM initialised {cycles} cycles after reset ({len(steps)} steps)")

    # writes: each channel its half, offered with random gaps
    halves = [addrs[0::2], addrs[1::2]]
    left = [list(h) for h in halves]
    cycles = 0
    while any(left):
        offered = []
        for n, todo in zip(WRITE_CHANNELS, left, strict=True):
            on = bool(todo) and rng.random() < 0.7
            _sig(dut, n, "wr", "valid").value = int(on)
            if on:
                _sig(dut, n, "wr", "addr").value = todo[0]
                _sig(dut, n, "wr", "data").value = memory[todo[0]]
            offered.append(on)
        await ReadOnly()
        taken = [on and int(_sig(dut, n, "wr", "ready").value)
                 for n, on in zip(WRITE_CHANNELS, offered, strict=True)]
        await RisingEdge(dut.clk)
        for todo, t in zip(left, taken, strict=True):
            if t:
                todo.pop(0)
        cycles += 1
        assert cycles < 100 * len(addrs), "the bridge stopped taking writes"
    for n in WRITE_CHANNELS:
        _sig(dut, n, "wr", "valid").value = 0
    await ClockCycles(dut.clk, 200)  # the write-data FIFO drains
    # and the first again: four times, and maybe once more as the DRAM took the first
    assert len(addrs) + 4 <= int(dut.words_written.value) <= len(addrs) + 5

    # reads: every channel its own random list, asked with random gaps, all at once
    wanted = [[rng.choice(addrs) for _ in range(60)] for _ in READ_CHANNELS]
    asked = [[] for _ in READ_CHANNELS]
    got = [[] for _ in READ_CHANNELS]
    cycles = 0
    while any(len(g) < len(w) for g, w in zip(got, wanted, strict=True)):
        offered = []
        for i, n in enumerate(READ_CHANNELS):
            # eager in the first half (more reads in flight than the bridge takes tags
            # for), sparse in the second
            eager = len(asked[i]) < len(wanted[i]) // 2
            on = len(asked[i]) < len(wanted[i]) and rng.random() < (0.95 if eager else 0.4)
            _sig(dut, n, "req", "valid").value = int(on)
            if on:
                _sig(dut, n, "req", "addr").value = wanted[i][len(asked[i])]
            offered.append(on)
        await ReadOnly()
        for i, n in enumerate(READ_CHANNELS):
            if offered[i] and int(_sig(dut, n, "req", "ready").value):
                asked[i].append(wanted[i][len(asked[i])])
            if int(_sig(dut, n, "resp", "valid").value):
                assert len(got[i]) < len(asked[i]), f"channel {n}: a word nobody asked for"
                got[i].append(int(_sig(dut, n, "resp", "data").value))
        await RisingEdge(dut.clk)
        cycles += 1
        assert cycles < 20_000, f"reads stalled: {[len(g) for g in got]} words back"
    await ClockCycles(dut.clk, 2)  # the counter takes the last word a cycle later
    for i, n in enumerate(READ_CHANNELS):
        expect = [memory[a] for a in wanted[i]]
        bad = [k for k, (g, e) in enumerate(zip(got[i], expect, strict=True)) if g != e]
        assert not bad, (f"channel {n}: word {bad[0]} (address {wanted[i][bad[0]]}) read "
                         f"{got[i][bad[0]]:#x}, written {expect[bad[0]]:#x}")
    assert int(dut.words_read.value) == sum(len(w) for w in wanted)
    dut._log.info(f"{len(addrs)} words written, {sum(map(len, wanted))} read back through "
                  f"the controller in {cycles} cycles")
    await read_after_write(dut, rng, addrs, memory)


async def read_after_write(dut, rng, addrs, memory, checks: int = 40) -> None:
    """A read asked once a write was taken returns the word written (a descriptor
    reading what an earlier one wrote), while the other read channels keep asking for
    random words and the other write channel keeps writing elsewhere — the DRAM takes
    a word's write data slower than the bridge takes writes, so writes wait, and the
    write and the read meet in the arbiter."""
    # the channels' numbers matter to the round robin: the read (the last read channel)
    # comes before the write (the first write channel) when the other write channel
    # (the last channel) was served last
    wch, other = WRITE_CHANNELS
    rch, busy = READ_CHANNELS[-1], READ_CHANNELS[:-1]
    taken = set(addrs)
    spare = [a for a in range(200, 4000) if a not in taken][:500]  # the other's
    for k in range(checks):
        a, word = rng.choice(addrs), rng.getrandbits(MW)
        memory[a] = word
        state, cycles = "write", 0  # then "read" (asking), then "wait" (for the word)
        while True:
            for n in busy:
                on = rng.random() < 0.3
                _sig(dut, n, "req", "valid").value = int(on)
                _sig(dut, n, "req", "addr").value = rng.choice(addrs)
            _sig(dut, other, "wr", "valid").value = int(rng.random() < 0.9)
            _sig(dut, other, "wr", "addr").value = rng.choice(spare)
            _sig(dut, other, "wr", "data").value = rng.getrandbits(MW)
            _sig(dut, wch, "wr", "valid").value = int(state == "write")
            _sig(dut, wch, "wr", "addr").value, _sig(dut, wch, "wr", "data").value = a, word
            _sig(dut, rch, "req", "valid").value = int(state == "read")
            _sig(dut, rch, "req", "addr").value = a
            await ReadOnly()
            if state == "wait" and int(_sig(dut, rch, "resp", "valid").value):
                got = int(_sig(dut, rch, "resp", "data").value)
                assert got == word, (f"check {k}: address {a} read {got:#x} after "
                                     f"{word:#x} was written")
                await RisingEdge(dut.clk)
                break
            if state == "read" and int(_sig(dut, rch, "req", "ready").value):
                state = "wait"
            if state == "write" and int(_sig(dut, wch, "wr", "ready").value):
                state = "read"
            await RisingEdge(dut.clk)
            cycles += 1
            assert cycles < 5_000, f"check {k}: stuck ({state})"
    for n in READ_CHANNELS:
        _sig(dut, n, "req", "valid").value = 0
    for n in WRITE_CHANNELS:
        _sig(dut, n, "wr", "valid").value = 0
    await ClockCycles(dut.clk, 100)  # the other channels' last words come back
    dut._log.info(f"{checks} reads after writes returned the words written")
