"""The host link's frames: what the host and a board say to each other over a serial
port (docs/link.md), and the host's end of it — requests with sequence numbers and a
checksum, answered once each, retried on a bad or missing answer.

A frame is ``sync, seq, kind, length (2 bytes), check, payload (length bytes), crc
(2 bytes)``, little-endian; ``kind`` is the operation in a request and the status in
a response. The CRC (CRC-16/CCITT-FALSE) covers every byte from ``seq`` to the
payload's last; ``check`` is the low byte of that CRC over the four bytes before it,
so a damaged length is caught at once, not after waiting for bytes that never come.
The board answers each request with a response of the same ``seq``; a request it
receives again with the ``seq`` it answered last is not carried out again: it sends
the same answer (so a retry after a lost answer never writes or runs twice).
``seq`` 0 is never answered from that memory, and clears it: a host opening the link
sends ``STATUS`` (which changes nothing, so it may safely run twice) with ``seq`` 0,
then counts 1, 2, ..., 255, 1, ... — so a host that starts again never meets the last
answer of the one before it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from mixgcn.hdl.frames import MAX_PAYLOAD, REQUEST_SYNC, RESPONSE_SYNC, Op, Status

__all__ = ["MAX_PAYLOAD", "REQUEST_SYNC", "RESPONSE_SYNC", "Frame", "FrameError",
           "FrameReader", "Link", "LinkError", "Op", "Status", "crc16", "encode"]

# the board's end (hdl/frames.py) defines the frame's constants, operations and
# statuses: one place for both ends
_HEADER = struct.Struct("<BBBHB")  # sync, seq, kind, length, check


class FrameError(ValueError):
    """Bytes that are not a frame (named: which field, which value)."""


class LinkError(RuntimeError):
    """A request the board did not answer well, after every retry."""


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF, no reflection): of
    b"123456789" it is 0x29B1."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        crc &= 0xFFFF
    return crc


@dataclass(frozen=True)
class Frame:
    sync: int
    seq: int
    kind: int
    payload: bytes


def encode(sync: int, seq: int, kind: int, payload: bytes = b"") -> bytes:
    """The bytes of a frame; a field out of range is refused, naming it."""
    if sync not in (REQUEST_SYNC, RESPONSE_SYNC):
        raise FrameError(f"sync must be 0x{REQUEST_SYNC:02X} or 0x{RESPONSE_SYNC:02X}, "
                         f"got {sync!r}")
    for name, v in (("seq", seq), ("kind", kind)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 255:
            raise FrameError(f"{name} must be a byte (0..255), got {v!r}")
    if len(payload) > MAX_PAYLOAD:
        raise FrameError(f"payload of {len(payload):,} bytes: at most {MAX_PAYLOAD:,}")
    head = struct.pack("<BBH", seq, kind, len(payload))
    body = head + bytes([crc16(head) & 0xFF]) + bytes(payload)
    return bytes([sync]) + body + struct.pack("<H", crc16(body))


class FrameReader:
    """Frames from a byte stream that may drop, damage or add bytes: bytes go in with
    :meth:`feed`, whole frames with a good CRC come out of it. Bytes before a sync
    byte, and a frame whose header check, length or CRC is wrong, are skipped (counted in
    ``skipped`` and ``bad``), and the search for the next frame starts again one byte
    after the bad frame's sync."""

    def __init__(self, sync: int):
        self.sync = sync
        self.buffer = bytearray()
        self.skipped = 0  # bytes that were not part of any good frame
        self.bad = 0      # frames dropped for their length or CRC

    def feed(self, data: bytes) -> list[Frame]:
        self.buffer += data
        frames = []
        while True:
            start = self.buffer.find(self.sync)
            if start < 0:
                self.skipped += len(self.buffer)
                self.buffer.clear()
                return frames
            self.skipped += start
            del self.buffer[:start]
            if len(self.buffer) < _HEADER.size:
                return frames
            _, seq, kind, length, check = _HEADER.unpack_from(self.buffer)
            if length > MAX_PAYLOAD or check != crc16(self.buffer[1:5]) & 0xFF:
                self._drop_one()
                continue
            end = _HEADER.size + length + 2
            if len(self.buffer) < end:
                return frames
            body = bytes(self.buffer[1:end - 2])
            if struct.unpack_from("<H", self.buffer, end - 2)[0] != crc16(body):
                self._drop_one()
                continue
            frames.append(Frame(self.sync, seq, kind, bytes(self.buffer[_HEADER.size:end - 2])))
            del self.buffer[:end]

    def _drop_one(self) -> None:
        self.bad += 1
        self.skipped += 1
        del self.buffer[:1]


class Link:
    """The host's end: :meth:`request` sends a request and returns its answer's
    payload. A missing answer (nothing within ``timeout`` seconds), a damaged one or
    ``BAD_CHECKSUM`` sends the same request again, with the same ``seq``, up to
    ``retries`` times; any other status, or no good answer after the last retry, is
    a :class:`LinkError` naming the operation and what happened.

    ``write(bytes)`` and ``read(max_bytes, timeout)`` are the serial port's (``read``
    returns what arrived within ``timeout``, possibly nothing)."""

    def __init__(self, write: Callable[[bytes], None], read: Callable[[int, float], bytes],
                 *, timeout: float = 1.0, retries: int = 3):
        if not timeout > 0:
            raise ValueError(f"link time-out must be positive, got {timeout!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"link retries must be an integer >= 0, got {retries!r}")
        self._write, self._read = write, read
        self.timeout, self.retries = timeout, retries
        self.seq: int | None = None  # None: the link is not open yet
        self.reader = FrameReader(RESPONSE_SYNC)
        self.resent = 0  # requests sent again
        self.bytes_sent = self.bytes_received = 0

    def request(self, op: Op, payload: bytes = b"", *, timeout: float | None = None) -> bytes:
        """The answer's payload (see the class docstring); opens the link first.
        ``timeout``: for this request (a ``RUN`` waits for its batch), else the link's."""
        if self.seq is None:
            self.seq = 0
            self._exchange(Op.STATUS, b"", self.timeout)
        self.seq = self.seq % 255 + 1  # 1..255: 0 only opens
        return self._exchange(op, payload, self.timeout if timeout is None else timeout)

    def _exchange(self, op: Op, payload: bytes, timeout: float) -> bytes:
        frame = encode(REQUEST_SYNC, self.seq, int(op), payload)
        what = []
        for attempt in range(self.retries + 1):
            if attempt:
                self.resent += 1
            self._write(frame)
            self.bytes_sent += len(frame)
            answer = self._answer(timeout)
            if answer is None:
                what.append("no answer")
                continue
            if answer.kind == Status.OK:
                return answer.payload
            status = Status(answer.kind) if answer.kind in Status._value2member_map_ \
                else answer.kind
            if status != Status.BAD_CHECKSUM:
                raise LinkError(f"{op.name} (seq {self.seq}): the board answered {status!r}")
            what.append("the board received it damaged")
        raise LinkError(f"{op.name} (seq {self.seq}): no good answer after "
                        f"{self.retries + 1} tries ({', '.join(what)})")

    def _answer(self, timeout: float) -> Frame | None:
        """The answer to the current request, or None once ``timeout`` passes
        without one (answers to older requests are dropped)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            data = self._read(MAX_PAYLOAD + 8, left)
            self.bytes_received += len(data)
            for f in self.reader.feed(data):
                if f.seq == self.seq:
                    return f
        return None
