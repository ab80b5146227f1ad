"""cocotb testbench of the UART (``hdl/uart.py``) on its generated Verilog, against an
independent serial port model (``cocotbext-uart``): bytes both ways bit for bit with
random stalls, a sender a few per cent fast or slow, back-to-back bytes at full rate,
and the receiver's glitch, framing-error and overrun cases.

Run through :func:`mixgcn.sim.build.run_cocotb` on :func:`verilog` (pytest:
``tests/test_link.py``); the divisor (clock cycles a bit) arrives in
``MIXGCN_UART_DIVISOR``. The clock runs at 100 MHz (10 ns).
"""

from __future__ import annotations

import os
import random
import warnings
from itertools import pairwise

import cocotb
from amaranth import Module
from amaranth.back import verilog as amaranth_verilog
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge, Timer
from cocotbext.uart import UartSink, UartSource

from mixgcn.hdl.uart import UARTReceiver, UARTTransmitter

# cocotbext-uart 0.1.4 sets its line with a call cocotb 2 deprecates; warnings are
# errors here, so that one warning, from that module only, is let through
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.uart",
                        message=r"Use `handle\.set\(Immediate")

TOP = "uart_tb"
PERIOD_NS = 10
DIVISOR = int(os.environ.get("MIXGCN_UART_DIVISOR", "16"))
SEED = int(os.environ.get("MIXGCN_SEED", "1"))


class UARTPair(wiring.Component):
    """A receiver and a transmitter side by side (not joined): the testbench drives
    both ends of each."""

    def __init__(self, divisor: int):
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "received": Out(stream.Signature(8)),
                          "framing_error": Out(1), "overrun": Out(1),
                          "send": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.receiver = rx = UARTReceiver(self.divisor)
        m.submodules.transmitter = tx = UARTTransmitter(self.divisor)
        wiring.connect(m, rx.bytes, wiring.flipped(self.received))
        wiring.connect(m, wiring.flipped(self.send), tx.bytes)
        m.d.comb += [rx.rx.eq(self.rx), self.framing_error.eq(rx.framing_error),
                     self.overrun.eq(rx.overrun), self.tx.eq(tx.tx)]
        return m


def verilog(divisor: int) -> str:
    return amaranth_verilog.convert(UARTPair(divisor), name=TOP, emit_src=False)


def baud(bit_ns: float) -> float:
    """The rate whose bit cocotbext-uart times as ``bit_ns`` (it truncates 1e9/baud to
    whole nanoseconds: aim a little above)."""
    return 1e9 / (bit_ns + 0.25)


BIT_NS = DIVISOR * PERIOD_NS


async def start(dut):
    cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
    dut.rx.value = 1
    dut.received__ready.value = 0
    dut.send__valid.value = 0
    dut.send__payload.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    errors = dict(framing=0, overrun=0)

    async def count():  # mid-cycle, where the pulses are stable
        while True:
            await FallingEdge(dut.clk)
            errors["framing"] += int(dut.framing_error.value)
            errors["overrun"] += int(dut.overrun.value)

    cocotb.start_soon(count())
    return errors


async def collect(dut, n: int, rng: random.Random, ready: float, timeout_bits: int):
    """Take ``n`` bytes from the receiver, ready with probability ``ready`` a cycle.
    The testbench acts mid-cycle (on the falling edge): a byte it sees valid while it
    is ready is taken at the next rising edge."""
    got = []
    for _ in range(timeout_bits * DIVISOR):
        await FallingEdge(dut.clk)
        take = rng.random() < ready
        dut.received__ready.value = int(take)
        if take and dut.received__valid.value:
            got.append(int(dut.received__payload.value))
            if len(got) == n:
                break
    await FallingEdge(dut.clk)
    dut.received__ready.value = 0
    return got


async def send(dut, byte: int) -> None:
    """Offer ``byte`` from the next falling edge until the transmitter takes it."""
    await FallingEdge(dut.clk)
    dut.send__payload.value = byte
    dut.send__valid.value = 1
    while not dut.send__ready.value:
        await FallingEdge(dut.clk)
    await RisingEdge(dut.clk)  # taken here


async def drive_bits(dut, bits, bit_ns: int):
    """Put ``bits`` on the receiver's line, ``bit_ns`` each (then idle high)."""
    for b in bits:
        dut.rx.value = b
        await Timer(bit_ns, unit="ns")
    dut.rx.value = 1


def frame_bits(byte: int, stop: int = 1):
    return [0, *((byte >> i) & 1 for i in range(8)), stop]


@cocotb.test()
async def test_receives_bytes_under_random_backpressure(dut):
    errors = await start(dut)
    rng = random.Random(SEED)
    data = bytes(rng.randrange(256) for _ in range(300))
    source = UartSource(dut.rx, baud=baud(BIT_NS), bits=8)
    await source.write(data)
    # ready one cycle in four: a byte waits at most a few cycles of its ten bits
    got = await collect(dut, len(data), rng, ready=0.25, timeout_bits=12 * len(data))
    assert bytes(got) == data
    assert errors == dict(framing=0, overrun=0)


@cocotb.test()
async def test_receives_from_a_sender_three_percent_off(dut):
    errors = await start(dut)
    rng = random.Random(SEED + 1)
    for skew in (1.03, 0.97):
        data = bytes(rng.randrange(256) for _ in range(100))
        source = UartSource(dut.rx, baud=baud(round(BIT_NS * skew)), bits=8)
        await source.write(data)
        got = await collect(dut, len(data), rng, ready=1.0, timeout_bits=12 * len(data))
        assert bytes(got) == data, skew
        await source.wait()
        await Timer(2 * BIT_NS, unit="ns")
    assert errors == dict(framing=0, overrun=0)


@cocotb.test()
async def test_a_glitch_is_not_a_start_bit(dut):
    errors = await start(dut)
    # low for a third of a bit: gone at the start bit's middle
    await drive_bits(dut, [0], BIT_NS // 3)
    await Timer(3 * BIT_NS, unit="ns")
    await drive_bits(dut, frame_bits(0xA5), BIT_NS)
    got = await collect(dut, 2, random.Random(0), ready=1.0, timeout_bits=20)
    assert got == [0xA5]
    assert errors == dict(framing=0, overrun=0)


@cocotb.test()
async def test_a_framing_error_drops_the_byte_and_the_next_is_received(dut):
    errors = await start(dut)
    # a stop bit of 0, then the line low for two more bits (a break), then a good byte
    await drive_bits(dut, frame_bits(0x3C, stop=0) + [0, 0], BIT_NS)
    await Timer(BIT_NS, unit="ns")
    await drive_bits(dut, frame_bits(0xC3), BIT_NS)
    got = await collect(dut, 2, random.Random(0), ready=1.0, timeout_bits=20)
    assert got == [0xC3]
    assert errors == dict(framing=1, overrun=0)


@cocotb.test()
async def test_an_overrun_keeps_the_waiting_byte_and_counts_the_lost_ones(dut):
    errors = await start(dut)
    source = UartSource(dut.rx, baud=baud(BIT_NS), bits=8)
    await source.write(bytes([1, 2, 3, 4]))
    await source.wait()
    await Timer(2 * BIT_NS, unit="ns")  # the last byte's stop bit sampled
    got = await collect(dut, 4, random.Random(0), ready=1.0, timeout_bits=10)
    assert got == [1]  # the first waited; the three after it were lost
    assert errors == dict(framing=0, overrun=3)
    await source.write(bytes([5]))
    assert await collect(dut, 1, random.Random(0), ready=1.0, timeout_bits=20) == [5]


@cocotb.test()
async def test_sends_bytes_with_random_gaps(dut):
    await start(dut)
    rng = random.Random(SEED + 2)
    sink = UartSink(dut.tx, baud=baud(BIT_NS), bits=8)
    data = bytes(rng.randrange(256) for _ in range(200))
    for byte in data:
        for _ in range(rng.choice((0, 0, 1, 3 * DIVISOR, 17 * DIVISOR))):
            await RisingEdge(dut.clk)
        await send(dut, byte)
        dut.send__valid.value = 0
    await Timer(12 * BIT_NS, unit="ns")
    assert bytes(await sink.read(len(data))) == data


@cocotb.test()
async def test_sends_back_to_back_at_one_byte_every_ten_bits(dut):
    await start(dut)
    rng = random.Random(SEED + 3)
    data = bytes(rng.randrange(256) for _ in range(50))
    sink = UartSink(dut.tx, baud=baud(BIT_NS), bits=8)
    clock = [0]

    async def cycles():
        while True:
            await RisingEdge(dut.clk)
            clock[0] += 1

    cocotb.start_soon(cycles())
    taken = []  # the cycle each byte was taken in
    for byte in data:
        await send(dut, byte)
        taken.append(clock[0])
    dut.send__valid.value = 0
    # the line never idles between bytes: a byte is taken every ten bits exactly
    assert {b - a for a, b in pairwise(taken)} == {10 * DIVISOR}
    await Timer(12 * BIT_NS, unit="ns")
    assert bytes(await sink.read(len(data))) == data
