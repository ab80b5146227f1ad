"""A board as a device: the device protocol (:mod:`mixgcn.host.device`) carried over
the host link's frames (:mod:`mixgcn.host.link`, docs/link.md) to the board's request
executor (:mod:`mixgcn.hdl.host_link`).

:class:`BoardDevice` turns each operation into link requests: ``write`` and ``read``
into ``WRITE`` / ``READ`` of as many words as a frame holds, ``run`` into ``RUN``
requests of at most :attr:`~mixgcn.hdl.host_link.LinkLayouts.max_batch` descriptors,
``counters`` into ``STATUS``. A batch longer than one ``RUN`` is cut only where every
row a descriptor sends into the exchange has been taken by a descriptor before the cut
(a ``RUN`` is answered once its batch completes, so a cut between an engine sending
rows and the one taking them would never complete). Each ``RUN`` starts with an idle
chip, so a batch cut in several runs a little longer than in one; the cycles reported
are the board's own count of each ``RUN``, summed.

The serial port is any object with ``write(bytes)`` and ``read(max_bytes, timeout)``:
a :class:`~mixgcn.sim.board.process.SimulatedSerialPort` (``--port sim``), or a real
port (:func:`open_serial`, pyserial, the ``board`` extra).
"""

from __future__ import annotations

import itertools
import struct
import time

import numpy as np

from mixgcn.gen.config import ChipConfig
from mixgcn.hdl.frames import Op
from mixgcn.hdl.host_link import COUNTER_BYTES, LinkLayouts
from mixgcn.host.device import (
    TIMEOUTS,
    BatchResult,
    DeviceError,
    StatusRecord,
    TimeoutPolicy,
)
from mixgcn.host.link import Link, LinkError
from mixgcn.host.packing import to_ints

__all__ = ["BoardDevice", "batch_cuts", "open_serial"]


def batch_cuts(layouts: LinkLayouts, descriptors: list[int]) -> list[int]:
    """Where a batch of packed descriptors is cut into ``RUN`` requests: the index of
    each part's first descriptor (0 first). A cut is allowed where the rows sent into
    the exchange so far equal the rows taken from it; each part is as long as allowed.
    Raises ``ValueError`` when no allowed cut keeps a part within ``max_batch``."""
    limit = layouts.max_batch
    balanced = [True]  # may a part start at index i?
    sent = taken = 0
    for d in descriptors:
        f = layouts.chip.desc_layout.from_bits(d)
        if f.to_xchg:
            sent += int(f.rows)
        if f.from_xchg:
            taken += int(f.rows)
        balanced.append(sent == taken)
    cuts, start = [0], 0
    n = len(descriptors)
    while n - start > limit:
        end = max((i for i in range(start + 1, start + limit + 1) if balanced[i]),
                  default=None)
        if end is None:
            raise ValueError(f"descriptors {start}..{start + limit - 1} pass rows through "
                             f"the exchange past descriptor {start + limit - 1}: a RUN holds "
                             f"at most {limit} descriptors, so this batch cannot be cut")
        cuts.append(end)
        start = end
    return cuts


class BoardDevice:
    """The chip ``config`` on a board reached through ``port`` (module docstring).
    ``clock_hz``: the board's clock, for the time a ``RUN`` may take before the host
    gives up on it (with the cycle budget of :class:`TimeoutPolicy`); ``timeout``:
    seconds the host waits for any other answer; ``retries``: how often a request is
    sent again (docs/link.md); ``capacity``: the memory words the host may use (the
    chip's address space unless the board's memory is smaller); ``stretch``: how many
    times longer than on an ideal memory a batch may take on the board's."""

    backend = "board"  # what a run's JSON names as its backend
    counts_memory = False  # the board does not count its memory's words

    def __init__(self, config: ChipConfig, port, *, name: str = "board",
                 clock_hz: float = 25e6, timeout: float = 2.0, retries: int = 3,
                 timeouts: TimeoutPolicy = TIMEOUTS, capacity: int | None = None,
                 stretch: int = 1):
        if not isinstance(config, ChipConfig):
            raise TypeError(f"expected a ChipConfig, got {config!r}")
        if not clock_hz > 0:
            raise ValueError(f"the board's clock must be positive, got {clock_hz!r}")
        self.config, self.name, self.port = config, name, port
        self.clock_hz, self.timeouts = clock_hz, timeouts
        self.layouts = ll = LinkLayouts(config)
        self.capacity = ll.memory_words if capacity is None else int(capacity)
        if not 0 < self.capacity <= ll.memory_words:
            raise ValueError(f"the board's memory must hold 1..{ll.memory_words} words (the "
                             f"chip's address space), got {capacity!r}")
        if not (isinstance(stretch, int) and stretch >= 1):
            raise ValueError(f"a batch's stretch must be a whole number >= 1, got {stretch!r}")
        self.stretch = stretch
        self._lay = ll.chip
        self.link = Link(port.write, port.read, timeout=timeout, retries=retries)
        # the counters before anything runs: each batch reports what it added
        self._last = self._parse_block(self._request(Op.STATUS, b"", doing="opening the link"))

    # ---------------------------------------------------------------- protocol
    def write(self, addr: int, words: np.ndarray) -> None:
        words = self._words(words)
        self._check(addr, len(words))
        step = self.layouts.max_write_words
        for i in range(0, len(words), step):
            chunk = words[i:i + step]
            self._request(Op.WRITE, struct.pack("<I", addr + i) + chunk.tobytes(),
                          doing=f"writing {len(chunk)} words at {addr + i}")

    def read(self, addr: int, count: int) -> np.ndarray:
        self._check(addr, count)
        ll, parts = self.layouts, []
        for i in range(0, count, ll.max_read_words):
            n = min(ll.max_read_words, count - i)
            data = self._request(Op.READ, struct.pack("<IH", addr + i, n * ll.mem_bytes),
                                 doing=f"reading {n} words at {addr + i}")
            if len(data) != n * ll.mem_bytes:
                raise DeviceError(f"{self.name}: reading {n} words at {addr + i}: the board "
                                  f"answered {len(data)} bytes, not {n * ll.mem_bytes}")
            parts.append(np.frombuffer(data, dtype=np.uint8).reshape(n, ll.mem_bytes))
        if not parts:
            return np.zeros((0, ll.mem_bytes), dtype=np.uint8)
        return np.concatenate(parts)

    def run(self, descriptors: np.ndarray, *, budget: int, label: str = "a batch") -> BatchResult:
        ll = self.layouts
        descriptors = np.asarray(descriptors, dtype=np.uint8)
        if descriptors.ndim != 2 or descriptors.shape[1] != ll.desc_bytes:
            raise ValueError(f"descriptors are {ll.desc_bytes} bytes each, got an array of "
                             f"shape {descriptors.shape}")
        ints = to_ints(descriptors)
        try:
            cuts = batch_cuts(ll, ints) + [len(ints)]
        except ValueError as e:
            raise DeviceError(f"{self.name}: {label}: {e}") from None
        before, cycles, records, error = self._last, 0, [], 0
        start = time.monotonic()
        for a, b in itertools.pairwise(cuts):
            part = self.timeouts.batch_cycles(self._lay, ints[a:b]) * self.stretch
            seconds = self.timeouts.reply_seconds(part) + part / self.clock_hz
            wait = seconds
            if hasattr(self.port, "send_seconds"):
                # a simulated port runs the batch before its write returns: that is
                # where the time goes, and the answer is there or lost when it does
                self.port.send_seconds, wait = seconds, None
            answer = self._request(Op.RUN, descriptors[a:b].tobytes(), timeout=wait,
                                   doing=f"running {label} (descriptors {a}..{b - 1})")
            block = self._parse_block(answer)
            want = ll.block_bytes + (b - a) * ll.status_bytes
            if len(answer) != want:
                raise DeviceError(f"{self.name}: running {label}: the board answered "
                                  f"{len(answer)} bytes, not {want}")
            cycles += block["elapsed"]
            error |= block["error"]
            body = answer[ll.block_bytes:]
            for i in range(b - a):
                word = int.from_bytes(body[i * ll.status_bytes:(i + 1) * ll.status_bytes],
                                      "little")
                records.append(StatusRecord.decode(self._lay, word))
            self._last = block
        counters = {k: self._last["counters"][k] - before["counters"][k]
                    for k in ll.counters if k != "cycles"}
        return BatchResult(cycles=cycles, status=records, counters=counters,
                           device_seconds=time.monotonic() - start, error=error)

    def counters(self) -> dict[str, int]:
        self._last = self._parse_block(self._request(Op.STATUS, b"",
                                                     doing="reading counters"))
        return dict(self._last["counters"])

    def close(self) -> None:
        close = getattr(self.port, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> BoardDevice:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- helpers
    def _request(self, op: Op, payload: bytes, *, doing: str,
                 timeout: float | None = None) -> bytes:
        try:
            return self.link.request(op, payload, timeout=timeout)
        except LinkError as e:
            raise DeviceError(f"{self.name}: {doing}: {e}") from None

    def _parse_block(self, answer: bytes) -> dict:
        ll = self.layouts
        if len(answer) < ll.block_bytes:
            raise DeviceError(f"{self.name}: a status block of {len(answer)} bytes, not "
                              f"{ll.block_bytes}")
        values = [int.from_bytes(answer[i * COUNTER_BYTES:(i + 1) * COUNTER_BYTES], "little")
                  for i in range(len(ll.counters) + 1)]
        flags = answer[ll.block_bytes - 1]
        return dict(counters=dict(zip(ll.counters, values[:-1], strict=True)),
                    elapsed=values[-1], idle=flags & 1, error=flags >> 1)

    def _words(self, words) -> np.ndarray:
        words = np.asarray(words, dtype=np.uint8)
        if words.ndim != 2 or words.shape[1] != self.layouts.mem_bytes:
            raise ValueError(f"memory words are {self.layouts.mem_bytes} bytes each, got an "
                             f"array of shape {words.shape}")
        return words

    def _check(self, addr: int, count: int) -> None:
        if addr < 0 or count < 0 or addr + count > self.capacity:
            raise ValueError(f"memory words {addr}..{addr + count - 1} lie outside the "
                             f"board's {self.capacity}-word memory")


def open_serial(path: str, baud: int):
    """A real serial port (pyserial) as the link wants it: ``write(bytes)`` and
    ``read(max_bytes, timeout)``."""
    try:
        import serial
    except ImportError:
        raise RuntimeError("a board's serial port needs pyserial: pip install "
                           "'mixgcn[board]'") from None

    class Port:
        def __init__(self):
            self.serial = serial.Serial(path, baud, timeout=0)

        def write(self, data: bytes) -> None:
            self.serial.write(data)
            self.serial.flush()

        def read(self, max_bytes: int, timeout: float) -> bytes:
            self.serial.timeout = timeout
            return self.serial.read(max(1, min(max_bytes, self.serial.in_waiting or 1)))

        def close(self) -> None:
            self.serial.close()

    return Port()

