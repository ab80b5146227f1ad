"""The board's serial port, as byte streams: a UART receiver and transmitter (8 data
bits, least significant first, no parity, one stop bit — what the boards' FTDI bridges
speak), for the host link.

Both run from the chip's clock: a bit lasts ``divisor`` cycles (the clock's frequency
over the baud rate, rounded; :func:`divisor_for` refuses a rate the clock cannot
make within 2 %). amaranth-stdio, which has a UART, is not on PyPI.

The receiver samples each bit in its middle, counted from the start bit's falling
edge, so it tolerates a sender whose rate differs by a few per cent (a byte's last
sample may drift by at most half a bit). A start bit that is gone at its middle is a
glitch and ignored. A stop bit that reads 0 is a **framing error** (``framing_error``
pulses; the byte is dropped, and the receiver waits for the line to go high before
looking for the next start bit). A byte that completes while the previous one still
waits on ``bytes`` is an **overrun** (``overrun`` pulses; the new byte is dropped).
The link above counts on neither happening silently: its frames carry a checksum.
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["MAX_BAUD_ERROR", "UARTReceiver", "UARTTransmitter", "divisor_for"]

# the largest difference between the baud rate asked for and the one the clock makes
MAX_BAUD_ERROR = 0.02


def _check_divisor(divisor) -> int:
    if isinstance(divisor, bool) or not isinstance(divisor, int) or not 4 <= divisor <= 1 << 24:
        raise ValueError(f"UART divisor must be an integer in 4..{1 << 24} clock cycles "
                         f"a bit, got {divisor!r}")
    return divisor


def divisor_for(clock_hz: float, baud: float) -> int:
    """The clock cycles a bit lasts at ``baud`` on a ``clock_hz`` clock; a rate the
    clock cannot make within :data:`MAX_BAUD_ERROR` is refused, naming both."""
    if not baud > 0 or not clock_hz > 0:
        raise ValueError(f"UART: the clock ({clock_hz!r} Hz) and the baud rate ({baud!r}) "
                         "must be positive")
    divisor = round(clock_hz / baud)
    made = clock_hz / max(divisor, 1)
    if divisor < 4 or abs(made - baud) / baud > MAX_BAUD_ERROR:
        raise ValueError(f"UART: a {clock_hz / 1e6:g} MHz clock cannot make {baud:,.0f} baud "
                         f"(the nearest is {made:,.0f}, {divisor} cycles a bit; at least 4 "
                         f"cycles a bit and within {MAX_BAUD_ERROR:.0%})")
    return _check_divisor(divisor)


class UARTReceiver(wiring.Component):
    """``rx`` (the line, idle high) in; each byte received out on ``bytes``.
    ``framing_error`` and ``overrun`` pulse for a cycle when a byte is dropped (see
    the module docstring)."""

    def __new__(cls, divisor: int, *args, **kwargs):
        _check_divisor(divisor)  # refused before it is an elaboratable
        return super().__new__(cls)

    def __init__(self, divisor: int):
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "bytes": Out(stream.Signature(8)),
                          "framing_error": Out(1), "overrun": Out(1), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        # the line comes from a pin: two registers before anything decides on it
        sync1, line = Signal(init=1), Signal(init=1)
        m.d.sync += [sync1.eq(self.rx), line.eq(sync1)]

        timer = Signal(range(d))
        bit = Signal(range(8))
        shift = Signal(8)
        with m.If(self.bytes.ready):
            m.d.sync += self.bytes.valid.eq(0)
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)

        def deliver():
            with m.If(self.bytes.valid & ~self.bytes.ready):
                m.d.comb += self.overrun.eq(1)
            with m.Else():
                m.d.sync += [self.bytes.payload.eq(shift), self.bytes.valid.eq(1)]

        with m.FSM() as fsm:
            with m.State("idle"):
                with m.If(~line):  # a start bit's falling edge: wait to its middle
                    m.d.sync += timer.eq(d // 2 - 1)
                    m.next = "start"
            with m.State("start"):
                with m.If(timer == 0):
                    with m.If(line):
                        m.next = "idle"  # gone at its middle: a glitch
                    with m.Else():
                        m.d.sync += [timer.eq(d - 1), bit.eq(0)]
                        m.next = "data"
            with m.State("data"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), bit.eq(bit + 1),
                                 timer.eq(d - 1)]
                    with m.If(bit == 7):
                        m.next = "stop"
            with m.State("stop"):
                with m.If(timer == 0):
                    with m.If(line):
                        deliver()
                        m.next = "idle"
                    with m.Else():
                        m.d.comb += self.framing_error.eq(1)
                        m.next = "break"
            with m.State("break"):  # a framing error: wait for the line to go high
                with m.If(line):
                    m.next = "idle"
        # a byte on its way in, or waiting to be taken
        m.d.comb += self.busy.eq(~fsm.ongoing("idle") | self.bytes.valid)
        return m


class UARTTransmitter(wiring.Component):
    """Each byte taken from ``bytes`` sent on ``tx`` (idle high): start bit, 8 data
    bits, stop bit, ``divisor`` cycles each; one byte every 10 bits at full rate."""

    def __new__(cls, divisor: int, *args, **kwargs):
        _check_divisor(divisor)  # refused before it is an elaboratable
        return super().__new__(cls)

    def __init__(self, divisor: int):
        self.divisor = divisor
        super().__init__({"bytes": In(stream.Signature(8)), "tx": Out(1, init=1),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        timer = Signal(range(d))
        frame = Signal(10)  # stop, data (msb .. lsb), start: shifted out from bit 0
        left = Signal(range(11))  # bits still to send
        # the next byte is taken as the current one's stop bit ends
        m.d.comb += [self.bytes.ready.eq((left == 0) | ((left == 1) & (timer == 0))),
                     self.busy.eq(left != 0)]
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Elif(left != 0):
            m.d.sync += [frame.eq(frame[1:]), left.eq(left - 1), timer.eq(d - 1),
                         self.tx.eq(frame[1])]
            with m.If(left == 1):
                m.d.sync += self.tx.eq(1)
        with m.If(self.bytes.valid & self.bytes.ready):
            m.d.sync += [frame.eq(Cat(0, self.bytes.payload, 1)), left.eq(10),
                         timer.eq(d - 1), self.tx.eq(0)]
        return m
