"""cocotb testbench of the board's end of the host link's frames (``hdl/frames.py``) on
its generated Verilog, against the host's end (``host/link.py``): requests the host
encodes come out of the receiver checked, damaged ones flagged and never delivered;
answers the transmitter frames are read back by the host's reader byte for byte.
Every stream stalls at random.

Run through :func:`mixgcn.sim.build.run_cocotb` on :func:`verilog` (pytest:
``tests/test_link.py``).
"""

from __future__ import annotations

import os
import random
from collections import deque

import cocotb
from amaranth import Module
from amaranth.back import verilog as amaranth_verilog
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from mixgcn.hdl.frames import (
    FrameError,
    FrameReceiver,
    FrameTransmitter,
    RequestHeader,
    ResponseHeader,
)
from mixgcn.host.link import REQUEST_SYNC, RESPONSE_SYNC, FrameReader, crc16, encode

TOP = "frames_tb"
MAX_PAYLOAD = 64  # the receiver's buffer in this testbench
SEED = int(os.environ.get("MIXGCN_SEED", "1"))


class FramePair(wiring.Component):
    """A receiver and a transmitter side by side: the testbench drives both."""

    def __init__(self):
        super().__init__({"rx_bytes": In(stream.Signature(8)),
                          "request": Out(stream.Signature(RequestHeader)),
                          "request_payload": Out(stream.Signature(8)),
                          "answer": In(stream.Signature(ResponseHeader)),
                          "answer_payload": In(stream.Signature(8)),
                          "tx_bytes": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.receiver = rx = FrameReceiver(max_payload=MAX_PAYLOAD)
        m.submodules.transmitter = tx = FrameTransmitter()
        wiring.connect(m, wiring.flipped(self.rx_bytes), rx.bytes)
        wiring.connect(m, rx.header, wiring.flipped(self.request))
        wiring.connect(m, rx.payload, wiring.flipped(self.request_payload))
        wiring.connect(m, wiring.flipped(self.answer), tx.header)
        wiring.connect(m, wiring.flipped(self.answer_payload), tx.payload)
        wiring.connect(m, tx.bytes, wiring.flipped(self.tx_bytes))
        return m


def verilog() -> str:
    return amaranth_verilog.convert(FramePair(), name=TOP, emit_src=False)


class Streams:
    """Drives input streams and takes output streams of the design, all at once, a
    cycle at a time: mid-cycle (falling edge) it offers each input's next item (after
    a random idle) and sets each output's ready at random, then reads the handshakes
    that the next rising edge completes (read-only phase). An offered item stays
    valid until taken."""

    def __init__(self, dut, rng: random.Random, idle: float, ready: float):
        self.dut, self.rng, self.idle, self.ready = dut, rng, idle, ready
        self.queues: dict[str, deque] = {}
        self.offer: dict[str, int | None] = {}
        self.got: dict[str, list[int]] = {}

    def send(self, name: str, items) -> None:
        self.queues.setdefault(name, deque()).extend(items)
        self.offer.setdefault(name, None)

    def take(self, name: str) -> list[int]:
        return self.got.setdefault(name, [])

    def _port(self, name: str, field: str):
        return getattr(self.dut, f"{name}__{field}")

    async def run(self, counts: dict[str, int], max_cycles: int) -> None:
        """Until every input is sent and each output in ``counts`` has that many items
        (a few cycles more show that no more come)."""
        after = None
        for _ in range(max_cycles):
            await FallingEdge(self.dut.clk)
            for name, queue in self.queues.items():
                if self.offer[name] is None and queue and self.rng.random() >= self.idle:
                    self.offer[name] = queue.popleft()
                item = self.offer[name]
                self._port(name, "valid").value = int(item is not None)
                if item is not None:
                    self._port(name, "payload").value = item
            for name in self.got:
                self._port(name, "ready").value = int(self.rng.random() < self.ready)
            await ReadOnly()
            for name in self.queues:
                if self._port(name, "valid").value and self._port(name, "ready").value:
                    self.offer[name] = None
            for name, got in self.got.items():
                if self._port(name, "valid").value and self._port(name, "ready").value:
                    got.append(int(self._port(name, "payload").value))
            if after is None and all(not q for q in self.queues.values()) and \
                    all(len(self.got[n]) >= c for n, c in counts.items()):
                after = 50  # cycles more, to see nothing else comes
            if after is not None:
                after -= 1
                if after == 0:
                    for name, c in counts.items():
                        assert len(self.got[name]) == c, \
                            f"{name}: {len(self.got[name])} items, expected {c}"
                    return
        raise AssertionError(f"not done after {max_cycles} cycles")


async def start(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for name in ("rx_bytes", "answer", "answer_payload"):
        getattr(dut, f"{name}__valid").value = 0
    for name in ("request", "request_payload", "tx_bytes"):
        getattr(dut, f"{name}__ready").value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0


def header(seq: int, kind: int, length: int, error: int = 0) -> int:
    """A header as the design packs it (seq in the low byte)."""
    return seq | kind << 8 | length << 16 | error << 32


def _no_sync(rng: random.Random, n: int) -> bytes:
    return bytes(rng.choice([b for b in range(256) if b != REQUEST_SYNC]) for _ in range(n))


def requests(rng: random.Random, count: int):
    """The bytes of ``count`` requests, some damaged, with noise between them; and
    what the receiver should make of them: (header, payload) in order."""
    stream_bytes, expected = bytearray(), []
    for seq in range(count):
        stream_bytes += _no_sync(rng, rng.choice((0, 0, 0, 1, 5)))  # noise between frames
        kind = rng.randrange(256)
        payload = bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 2, 17, 64))))
        frame = bytearray(encode(REQUEST_SYNC, seq, kind, payload))
        damage = rng.choice(("none", "none", "none", "crc", "payload", "check", "long"))
        if (damage in ("crc", "payload") and payload) or damage == "crc":
            frame[-1 if damage == "crc" else 6 + rng.randrange(len(payload))] ^= \
                1 << rng.randrange(8)
            expected.append((header(seq, kind, len(payload), FrameError.CRC.value), b""))
        elif damage == "check":
            # the check byte damaged; what follows must not hold a sync byte (the
            # receiver looks for the next frame right after the check byte)
            frame = frame[:5] + bytes([frame[5] ^ 0x01]) + _no_sync(rng, len(frame) - 6)
            expected.append((header(seq, kind, len(payload), FrameError.HEADER.value), b""))
        elif damage == "long":
            # a good check byte over a length beyond the receiver's buffer: the
            # header alone is sent
            head = bytes([seq, kind]) + (MAX_PAYLOAD + 1).to_bytes(2, "little")
            frame = bytearray([REQUEST_SYNC]) + head + bytes([crc16(head) & 0xFF])
            expected.append((header(seq, kind, MAX_PAYLOAD + 1, FrameError.HEADER.value), b""))
        else:
            expected.append((header(seq, kind, len(payload)), payload))
        stream_bytes += frame
    return bytes(stream_bytes), expected


FLOWS = [(0.0, 1.0), (0.5, 1.0), (0.0, 0.3), (0.5, 0.3)]  # (input idle, output ready)


@cocotb.test()
async def test_requests_are_checked_and_damaged_ones_never_delivered(dut):
    await start(dut)
    rng = random.Random(SEED)
    for idle, ready in FLOWS:
        data, expected = requests(rng, 60)
        bench = Streams(dut, rng, idle, ready)
        bench.send("rx_bytes", data)
        heads, payload = bench.take("request"), bench.take("request_payload")
        want_bytes = sum(len(p) for _, p in expected)
        await bench.run({"request": len(expected), "request_payload": want_bytes},
                        40 * len(data) + 1000)
        assert heads == [h for h, _ in expected], (idle, ready)
        assert bytes(payload) == b"".join(p for _, p in expected), (idle, ready)


@cocotb.test()
async def test_answers_are_framed_as_the_host_reads_them(dut):
    await start(dut)
    rng = random.Random(SEED + 1)
    for idle, ready in FLOWS:
        answers = [(rng.randrange(256), rng.randrange(256),
                    bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 3, 200)))))
                   for _ in range(40)]
        bench = Streams(dut, rng, idle, ready)
        bench.send("answer", [header(s, k, len(p)) for s, k, p in answers])
        bench.send("answer_payload", b"".join(p for _, _, p in answers))
        out = bench.take("tx_bytes")
        want = b"".join(encode(RESPONSE_SYNC, s, k, p) for s, k, p in answers)
        await bench.run({"tx_bytes": len(want)}, 40 * len(want) + 1000)
        assert bytes(out) == want, (idle, ready)
        frames = FrameReader(RESPONSE_SYNC).feed(bytes(out))
        assert [(f.seq, f.kind, f.payload) for f in frames] == answers
