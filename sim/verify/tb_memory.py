"""cocotb testbench of the simulation's memory model (``sim/chip/mixgcn_memory.v``)
under each kind of profile: its words, its latency, its bandwidth, its bursts and its
arbitration, counted cycle by cycle against what docs/memory.md says it does.

Run through :func:`mixgcn.sim.build.run_cocotb` on :data:`VERILOG` (``make sim`` /
pytest): the model with two read channels and one write channel of 64-bit words.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from mixgcn.sim.chip.harness import MEMORY_MODEL

NR, NW, MW, AW = 2, 1, 64, 10
TOP = "memory_tb"
VERILOG = MEMORY_MODEL.read_text() + f"""
module {TOP} (
    input clk, input rst, input [7:0] rd_stall, input [7:0] wr_stall,
    input [16:0] bandwidth, input [6:0] latency, input [4:0] burst_shift,
    input [7:0] burst_cycles,
    input [{NR - 1}:0] rd_req_valid, output [{NR - 1}:0] rd_req_ready,
    input [{NR * AW - 1}:0] rd_req_addr, output [{NR - 1}:0] rd_resp_valid,
    output [{NR * MW - 1}:0] rd_resp_data,
    input [{NW - 1}:0] wr_valid, output [{NW - 1}:0] wr_ready,
    input [{NW * AW - 1}:0] wr_addr, input [{NW * MW - 1}:0] wr_data,
    input forget, output [47:0] words_read, output [47:0] words_written,
    output [47:0] words_distinct);
    mixgcn_memory #(.AW({AW}), .MW({MW}), .NR({NR}), .NW({NW})) mem (
        .clk(clk), .rst(rst), .rd_stall(rd_stall), .wr_stall(wr_stall),
        .bandwidth(bandwidth), .latency(latency), .burst_shift(burst_shift),
        .burst_cycles(burst_cycles), .rd_req_valid(rd_req_valid),
        .rd_req_ready(rd_req_ready), .rd_req_addr(rd_req_addr),
        .rd_resp_valid(rd_resp_valid), .rd_resp_data(rd_resp_data),
        .wr_valid(wr_valid), .wr_ready(wr_ready), .wr_addr(wr_addr), .wr_data(wr_data),
        .load(1'b0), .dump(1'b0), .dump_first({AW}'d0), .dump_last({AW}'d0),
        .forget(forget), .words_read(words_read), .words_written(words_written),
        .words_distinct(words_distinct));
endmodule
"""


def word(addr: int) -> int:
    """The word the testbench stores at ``addr``."""
    return (addr * 0x9E3779B97F4A7C15 + 0x0123456789ABCDEF) % (1 << MW)


class Memory:
    """Drives the model a cycle at a time and records every grant and response."""

    def __init__(self, dut):
        self.dut = dut
        self.cycle = 0
        self.grants: list[tuple[int, int, int]] = []  # (cycle, channel, addr)
        self.responses: list[tuple[int, int, int]] = []  # (cycle, read channel, word)

    async def start(self, bandwidth=0, latency=1, burst_shift=0, burst_cycles=0,
                    rd_stall=0, wr_stall=0):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.bandwidth.value, dut.latency.value = bandwidth, latency
        dut.burst_shift.value, dut.burst_cycles.value = burst_shift, burst_cycles
        dut.rd_stall.value, dut.wr_stall.value = rd_stall, wr_stall
        dut.rd_req_valid.value = dut.wr_valid.value = dut.forget.value = 0
        dut.rd_req_addr.value = dut.wr_addr.value = dut.wr_data.value = 0
        dut.rst.value = 1
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await RisingEdge(dut.clk)

    async def step(self, reads: list[int | None], write: tuple[int, int] | None = None):
        """One cycle: ``reads`` (an address or None per read channel), ``write`` (an
        address and word, or None). Returns which were taken (reads..., write)."""
        dut = self.dut
        dut.rd_req_valid.value = sum(1 << i for i, a in enumerate(reads) if a is not None)
        dut.rd_req_addr.value = sum((a or 0) << (AW * i) for i, a in enumerate(reads))
        dut.wr_valid.value = int(write is not None)
        dut.wr_addr.value, dut.wr_data.value = write if write is not None else (0, 0)
        await ReadOnly()
        ready = int(dut.rd_req_ready.value) | (int(dut.wr_ready.value) << NR)
        valid, data = int(dut.rd_resp_valid.value), int(dut.rd_resp_data.value)
        for i in range(NR):
            if valid >> i & 1:
                self.responses.append((self.cycle, i, (data >> (MW * i)) % (1 << MW)))
        taken = [bool(ready >> i & 1) and a is not None for i, a in enumerate(reads)]
        taken.append(bool(ready >> NR & 1) and write is not None)
        for i, a in enumerate(reads):
            if taken[i]:
                self.grants.append((self.cycle, i, a))
        if taken[NR]:
            self.grants.append((self.cycle, NR, write[0]))
        await RisingEdge(dut.clk)
        self.cycle += 1
        return taken

    async def fill(self, words: int):
        """Store :func:`word` at addresses 0..words-1 through the write channel."""
        addr = 0
        while addr < words:
            if (await self.step([None] * NR, (addr, word(addr))))[NR]:
                addr += 1

    async def stream(self, cycles: int, channels, starts, write_from=None):
        """Each channel of ``channels`` asks for consecutive words from its start every
        cycle (``write_from``: the write channel stores consecutive words too)."""
        nxt = dict(zip(channels, starts, strict=True))
        waddr = write_from
        for _ in range(cycles):
            reads = [nxt.get(i) for i in range(NR)]
            write = (waddr, word(waddr)) if waddr is not None else None
            taken = await self.step(reads, write)
            for i in channels:
                nxt[i] += taken[i]
            if waddr is not None and taken[NR]:
                waddr += 1
        return nxt


def check_words(mem: Memory, latency: int):
    """Every read answered with its word exactly ``latency`` cycles after it was taken,
    each channel in order, nothing else answered."""
    expected = sorted((c + latency, ch, word(a)) for c, ch, a in mem.grants if ch < NR)
    assert sorted(mem.responses) == expected, (
        f"{len(mem.responses)} responses, {len(expected)} expected; first difference: "
        f"{next((x, y) for x, y in zip(sorted(mem.responses), expected, strict=False) if x != y)}"
        if mem.responses and expected else f"{mem.responses[:4]} vs {expected[:4]}")


@cocotb.test()
async def ideal_answers_every_channel_every_cycle(dut):
    mem = Memory(dut)
    await mem.start()
    await mem.fill(300)
    mem.grants.clear()
    await mem.stream(200, [0, 1], [0, 100])
    assert sum(1 for _, ch, _ in mem.grants if ch < NR) == 2 * 200
    for _ in range(2):
        await mem.step([None, None])
    check_words(mem, 1)


@cocotb.test()
async def latency_delays_each_word_exactly(dut):
    for latency in (2, 7, 64):
        mem = Memory(dut)
        await mem.start(latency=latency, rd_stall=64)
        await mem.fill(256)
        mem.grants.clear()
        rng = random.Random(latency)
        for _ in range(300):  # random addresses, random idle cycles
            await mem.step([rng.randrange(256) if rng.random() < 0.7 else None
                            for _ in range(NR)])
        for _ in range(latency + 1):
            await mem.step([None, None])
        assert len(mem.grants) > 300  # the stalls let most through
        check_words(mem, latency)


@cocotb.test()
async def bandwidth_limits_the_words_of_all_channels(dut):
    """bandwidth 16 bits a cycle, 64-bit words: a word every 4 cycles, shared; strict
    round robin gives each of three streaming channels a third."""
    cycles = 1200
    mem = Memory(dut)
    await mem.start()
    await mem.fill(600)
    mem.grants.clear()
    dut.bandwidth.value, dut.latency.value = 16, 3  # between transfers, as the harness does
    await mem.stream(cycles, [0, 1], [0, 300], write_from=600)
    moved = len(mem.grants)
    assert cycles * 16 // MW - 2 <= moved <= cycles * 16 // MW + 2, moved
    per_channel = [sum(1 for _, ch, _ in mem.grants if ch == i) for i in range(NR + NW)]
    assert max(per_channel) - min(per_channel) <= 1, per_channel
    for _ in range(4):
        await mem.step([None, None])
    # its counters: every word moved since reset (the fill's writes too)
    assert int(dut.words_read.value) == sum(per_channel[:NR])
    assert int(dut.words_written.value) == 600 + per_channel[NR]
    # the reads return what the memory held when they were taken: the write channel
    # writes above every address read
    check_words(mem, 3)


@cocotb.test()
async def bursts_cost_their_opening_and_keep_their_turn(dut):
    """8-word bursts costing 4 cycles to open, 16 bits a cycle: a streaming channel
    moves 8 words in 8·4 + 4 = 36 cycles. Two channels stream together: each keeps
    the turn through its burst, so they pay one opening per 8 words (not one a word,
    which would halve the rate)."""
    cycles = 1800
    mem = Memory(dut)
    await mem.start(bandwidth=16, latency=1, burst_shift=3, burst_cycles=4)
    await mem.stream(cycles, [0], [0])
    alone = len(mem.grants)
    assert cycles * 8 // 36 - 8 <= alone <= cycles * 8 // 36 + 8, alone
    mem = Memory(dut)
    await mem.start(bandwidth=16, latency=1, burst_shift=3, burst_cycles=4)
    await mem.stream(cycles, [0, 1], [0, 512])
    both = list(mem.grants)
    assert abs(len(both) - alone) <= 8, (len(both), alone)
    # the grants come in runs of a whole burst per channel
    runs, last = 0, None
    for _, ch, _ in both:
        runs += ch != last
        last = ch
    assert runs <= len(both) // 8 + 2, (runs, len(both))
    # unaligned starts: a channel's first burst is short, then whole bursts again
    mem = Memory(dut)
    await mem.start(bandwidth=16, latency=1, burst_shift=3, burst_cycles=4)
    end = await mem.stream(400, [0, 1], [5, 515])
    assert end[0] - 5 >= 35 and end[1] - 515 >= 35, end


@cocotb.test()
async def distinct_reads_count_each_word_once_until_forgotten(dut):
    """Two channels read overlapping ranges, some words twice in one cycle: each word
    counts once; after ``forget`` the same words count again."""
    mem = Memory(dut)
    await mem.start(rd_stall=32)
    await mem.stream(300, [0, 1], [0, 40])
    await mem.step([None, None])  # the last cycle's count lands
    words = {a for _, ch, a in mem.grants if ch < NR}
    assert int(dut.words_distinct.value) == len(words) < len(mem.grants)
    dut.forget.value = 1
    await RisingEdge(dut.clk)
    dut.forget.value = 0
    mem.grants.clear()
    for _ in range(50):  # the same address on both channels in every cycle
        await mem.step([7, 7])
    await mem.step([None, None])
    assert int(dut.words_distinct.value) == len(words) + 1
