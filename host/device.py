"""The chip as a device: one protocol for every way the host reaches a chip.

A device holds a chip (:class:`~mixgcn.hdl.chip.Chip`) and its memory. The host
drives it with five operations, whatever carries them (a simulator process, later a
board's UART link or an MPI rank):

- ``write(addr, words)`` — store memory words (operands) in bulk;
- ``run(descriptors)`` — queue a batch of descriptors and wait for the status record
  of each (:class:`BatchResult`: the batch's cycles, the records, the counters);
- ``read(addr, count)`` — fetch memory words (results) in bulk;
- ``counters()`` — the chip's performance counters;
- ``close()`` — release the device.

Words are ``uint8 [N, nbytes]`` arrays (:mod:`mixgcn.host.packing`): memory words are
``ChipLayouts.mem_width`` bits, descriptors and status records their layouts' widths.

**Messages** (docs/architecture.md, "Device protocol"). A transport carries each
operation as one request and one reply, in order. A message is a 12-byte header —
the magic ``MXG1``, the length of a JSON object and the length of a binary blob, both
unsigned 32-bit little-endian — then the UTF-8 JSON object, then the blob (words,
row after row). Requests name their operation in ``op``; every reply has ``ok`` and,
when it is false, ``error`` (one line).

**Time-outs** (:class:`TimeoutPolicy`): a batch gets a budget of chip cycles from its
work; a chip that has not finished within it is hung (the simulator reports that
without waiting longer). The host waits for each reply a wall-clock time derived
from the same budget, after which the device is declared unresponsive and stopped.
"""

from __future__ import annotations

import enum
import json
import socket
import struct
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mixgcn.gen.config import ChipConfig
from mixgcn.hdl.chip import ENGINE_COUNTERS, ChipLayouts, Unit

__all__ = [
    "COUNTERS",
    "MEMORY_COUNTERS",
    "TIMEOUTS",
    "BatchResult",
    "ChipDevice",
    "ChipError",
    "DeviceError",
    "ProtocolError",
    "StatusRecord",
    "TimeoutPolicy",
    "recv_message",
    "send_message",
]

# the chip's counters a device reports, named as the chip's ports
COUNTERS = ("cycles", "issued", "completed", "load_cycles",
            *(f"{e}_{c}" for e in ("sae", "dce") for c in ENGINE_COUNTERS))
# what a device may count beside the chip: the words the chip's memory moved for it,
# read and written, and the distinct words a batch read (the simulation's memory model
# counts them)
MEMORY_COUNTERS = ("memory_reads", "memory_writes", "memory_distinct_reads")


class DeviceError(RuntimeError):
    """A device failed: its message is one line naming the device and what it was doing."""


class ProtocolError(DeviceError):
    """A malformed message."""


@dataclass(frozen=True)
class StatusRecord:
    """A descriptor's completion: its sequence number, unit, cycles from issue to
    completion and its output stage's statistics."""

    seq: int
    unit: Unit
    cycles: int
    max_abs: int
    saturated: int

    @classmethod
    def decode(cls, layouts: ChipLayouts, word: int) -> StatusRecord:
        rec = layouts.status_layout.from_bits(word)
        return cls(seq=int(rec.seq), unit=Unit(rec.unit), cycles=int(rec.cycles),
                   max_abs=int(rec.max_abs), saturated=int(rec.saturated))


class ChipError(enum.IntFlag):
    """The chip's error flags (sticky until reset): a broken exchange contract."""

    PRODUCERS = 1  # both engines routed rows into the exchange at once
    CONSUMERS = 2  # both engine inputs took rows from the exchange at once

    def describe(self) -> str:
        return " and ".join(text for flag, text in (
            (ChipError.PRODUCERS, "both engines routed rows into the exchange at once"),
            (ChipError.CONSUMERS, "both engine inputs took rows from the exchange at once"))
            if flag in self)


@dataclass
class BatchResult:
    """One batch of descriptors: its cycles (from the start to the last status record),
    one record per descriptor in completion order, the engine counters' increase over
    the batch, the wall time the device took and the chip's error flags
    (:class:`ChipError`; a batch that raised one ends there, with the records so far)."""

    cycles: int
    status: list[StatusRecord] = field(repr=False)
    counters: dict[str, int] = field(default_factory=dict)
    device_seconds: float = 0.0
    error: int = 0


class ChipDevice(Protocol):
    """A chip behind the device protocol (module docstring). One thread drives a
    device at a time; several devices may run at once from different threads."""

    name: str  # e.g. "chip 0 (default)", used in every error message
    config: ChipConfig

    def write(self, addr: int, words: np.ndarray) -> None: ...

    def run(self, descriptors: np.ndarray, *, budget: int, label: str) -> BatchResult: ...

    def read(self, addr: int, count: int) -> np.ndarray: ...

    def counters(self) -> dict[str, int]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TimeoutPolicy:
    """How long anything may take: one policy for every device and testbench.

    - a batch may take ``cycles_per_unit`` chip cycles per unit of work (a word it
      reads, a row it writes, a chunk of a GEMM row) plus ``base_cycles`` before the
      chip counts as hung;
    - a reply may take ``base_seconds`` plus the batch's budget at ``min_cycles_per_second``
      (far below what the simulator runs at) before the device counts as unresponsive;
    - a device may take ``start_seconds`` to come up, and ``stop_seconds`` to end once
      asked to (or once its connection is closed) before it is killed.
    """

    cycles_per_unit: int = 20
    base_cycles: int = 20_000
    min_cycles_per_second: int = 20_000
    base_seconds: float = 60.0
    start_seconds: float = 180.0
    stop_seconds: float = 5.0

    def cycles(self, work: int, slowdown: float = 1.0) -> int:
        """The cycle budget of ``work`` units, ``slowdown`` times slower than one a
        cycle (random stalls: 1 / the probability a stream moves in a cycle)."""
        return int(slowdown * self.cycles_per_unit * work) + self.base_cycles

    def batch_cycles(self, layouts: ChipLayouts, descriptors: list[int]) -> int:
        """The cycle budget of a batch of (packed) descriptors: every word it reads, row
        it writes and chunk of a GEMM row is a unit of work."""
        work = 0
        for d in descriptors:
            f = layouts.desc_layout.from_bits(d)
            work += int(f.src_len) + int(f.b_len) + int(f.rows) * (1 + int(f.k))
        return self.cycles(work)

    def reply_seconds(self, budget_cycles: int = 0) -> float:
        return self.base_seconds + budget_cycles / self.min_cycles_per_second


TIMEOUTS = TimeoutPolicy()

# ------------------------------------------------------------------------ messages

MAGIC = b"MXG1"
_HEADER = struct.Struct("<4sII")
MAX_JSON = 1 << 20


def send_message(sock: socket.socket, obj: dict, blob: bytes | np.ndarray = b"") -> None:
    """Send one message: header, JSON object, blob."""
    head = json.dumps(obj, separators=(",", ":")).encode()
    body = np.ascontiguousarray(blob, dtype=np.uint8).tobytes() if isinstance(
        blob, np.ndarray) else bytes(blob)
    sock.sendall(_HEADER.pack(MAGIC, len(head), len(body)) + head)
    if body:
        sock.sendall(body)


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            if got == 0:
                return None
            raise ProtocolError(f"the connection closed {got} bytes into a {n}-byte read")
        got += k
    return bytes(buf)


def recv_message(sock: socket.socket) -> tuple[dict, bytes] | None:
    """Receive one message as (JSON object, blob); ``None`` when the peer has closed the
    connection between messages."""
    head = _recv_exactly(sock, _HEADER.size)
    if head is None:
        return None
    magic, njson, nblob = _HEADER.unpack(head)
    if magic != MAGIC or njson > MAX_JSON:
        raise ProtocolError(f"not a device message (header {head.hex()})")
    parts = [_recv_exactly(sock, n) if n else b"" for n in (njson, nblob)]
    if any(p is None for p in parts):
        raise ProtocolError("the connection closed inside a message")
    try:
        obj = json.loads(parts[0])
    except ValueError as e:
        raise ProtocolError(f"a message's JSON does not parse: {e}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"a message's JSON must be an object, got {type(obj).__name__}")
    return obj, parts[1]


def words_from_blob(blob: bytes, nbytes: int, count: int, what: str) -> np.ndarray:
    """``count`` words of ``nbytes`` bytes from a message's blob, checked."""
    if len(blob) != count * nbytes:
        raise ProtocolError(f"{what}: {len(blob)} bytes do not hold {count} words of "
                            f"{nbytes} bytes")
    return np.frombuffer(blob, dtype=np.uint8).reshape(count, nbytes)
