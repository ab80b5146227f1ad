"""A simulated board's serial port: the board server (:mod:`mixgcn.sim.board.server`)
in its own process, seen by the host as a serial port — ``write(bytes)``,
``read(max_bytes, timeout)`` — so :class:`~mixgcn.host.link.Link` runs over it as over
``/dev/ttyUSB0``.

The simulation is synchronous: :meth:`SimulatedSerialPort.write` returns once the
board has nothing left to do or say, with what it said buffered for :meth:`read`. So
an answer that does not come (a request lost on the line) is known at once, and the
link's time-out on this port need only be short.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from mixgcn.gen.config import MEMORY_PROFILES, ChipConfig, MemoryProfile
from mixgcn.gen.dram import DRAMPart
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.hdl.memport import CHANNELS
from mixgcn.host.device import TIMEOUTS, DeviceError, TimeoutPolicy
from mixgcn.sim.board.harness import board_verilog
from mixgcn.sim.build import BuildError, build
from mixgcn.sim.chip.harness import TOP
from mixgcn.sim.chip.process import ServerProcess

__all__ = ["SimulatedSerialPort"]


class SimulatedSerialPort(ServerProcess):
    """The serial port of a simulated board holding the chip ``config`` behind its host
    link, ``divisor`` clock cycles a bit, on a memory of the profile ``memory`` or on a
    DRAM behind LiteDRAM's controller (a :class:`~mixgcn.gen.dram.DRAMPart`;
    :attr:`stretch`: how many times longer than on the ideal memory a batch may take).
    ``send_seconds``: how long the host waits for the simulation to carry out what one
    :meth:`write` sent (a ``RUN`` runs a batch); the board's device sets it per
    request. :attr:`cycles`: the board's clock cycles so far; :attr:`line_bytes`: the
    bytes the line carried (both ways)."""

    def __init__(self, config: ChipConfig, *, divisor: int = 4, name: str = "board (sim)",
                 memory: MemoryProfile | DRAMPart = MEMORY_PROFILES["ideal"],
                 verbose: bool = False,
                 on_build: Callable[[], None] | None = None,
                 timeouts: TimeoutPolicy = TIMEOUTS):
        if not isinstance(config, ChipConfig):
            raise TypeError(f"expected a ChipConfig, got {config!r}")
        if not isinstance(memory, MemoryProfile | DRAMPart):
            raise TypeError(f"expected a MemoryProfile or a DRAMPart, got {memory!r}")
        self.config, self.divisor, self.memory = config, divisor, memory
        self.stretch = memory.stretch(ChipLayouts(config).mem_width, len(CHANNELS))
        dram = memory if isinstance(memory, DRAMPart) else None
        self.name, self.timeouts = name, timeouts
        self.send_seconds = timeouts.reply_seconds()
        self.cycles = self.line_bytes = 0
        self._buffer = bytearray()
        announced = []

        def announce():
            if on_build is not None and not announced:
                announced.append(on_build())

        try:
            sim = build(board_verilog(config, divisor, on_generate=announce, dram=dram), TOP,
                        lean=True, timing=True, on_build=announce)
        except (BuildError, ValueError) as e:
            raise DeviceError(f"{name}: {e}") from None
        self._launch(sim, "mixgcn.sim.board.server", "mixgcn-board-",
                     dict(MIXGCN_CHIP_CONFIG=json.dumps(config.to_dict()),
                          MIXGCN_DIVISOR=str(divisor),
                          MIXGCN_MEMORY_PROFILE=json.dumps(memory.to_dict())),
                     verbose=verbose)
        hello, _ = self._request(dict(op="hello"), doing="starting",
                                 timeout=timeouts.start_seconds)
        if (hello.get("config") != json.loads(json.dumps(config.to_dict()))
                or hello.get("divisor") != divisor or hello.get("memory") != memory.to_dict()):
            self._fail()
            raise DeviceError(f"{name}: the simulator serves another board")

    def write(self, data: bytes) -> None:
        """Put ``data`` on the line and run the board until it is quiet."""
        reply, out = self._request(dict(op="send"), bytes(data),
                                   doing=f"sending {len(data)} bytes",
                                   timeout=self.send_seconds)
        self.cycles += int(reply["cycles"])
        self.line_bytes += len(data) + len(out)
        self._buffer += out

    def read(self, max_bytes: int, timeout: float) -> bytes:
        """What the board sent, up to ``max_bytes``; nothing more will come until the
        next :meth:`write` (the simulation ran to quiet), so an empty buffer returns at
        once after a short pause."""
        if not self._buffer:
            time.sleep(min(timeout, 0.001))
            return b""
        out = bytes(self._buffer[:max_bytes])
        del self._buffer[:max_bytes]
        return out

    def stalls(self, read: int = 0, write: int = 0) -> None:
        """The board memory refuses a read request / a write in a cycle with these
        probabilities in 256ths (tests)."""
        self._request(dict(op="stalls", read=int(read), write=int(write)),
                      doing="setting memory stalls")

    def cut(self, cut: bool = True) -> None:
        """Hold the board's receive line idle (``cut``), or give it back."""
        self._request(dict(op="line", cut=bool(cut)), doing="cutting the line")
