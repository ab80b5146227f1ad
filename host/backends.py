"""Backends by name — what ``mixgcn train --backend`` chooses.

Each entry of :data:`BACKENDS` opens a :class:`~mixgcn.golden.backend.Backend`:

- ``golden`` — the functional model (:class:`~mixgcn.golden.backend.GoldenBackend`),
  in process;
- ``rtl`` — a simulated chip: the chip's Verilog under Verilator in a server process
  (:class:`~mixgcn.sim.chip.process.SimulatedChip`), driven by
  :class:`~mixgcn.host.chip_driver.ChipBackend`;
- ``board`` — the chip on a board behind its host link (:class:`~mixgcn.host.board.
  BoardDevice`), through a serial port or (``port="sim"``) the simulated board top's
  (:class:`~mixgcn.sim.board.process.SimulatedSerialPort`), driven by the same
  :class:`~mixgcn.host.chip_driver.ChipBackend`.

A backend holds resources (a simulator process): close it, or use it as a context
manager through :func:`opened`. :func:`open_chips` opens P of them in this process
as a communicator (:mod:`mixgcn.host.comm`) for a run on P chips; :func:`open_system`
P simulated chips joined by an exchange fabric in one simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mixgcn.gen.config import CHIP_PRESETS, MEMORY_PROFILES, ChipConfig, MemoryProfile
from mixgcn.gen.dram import DRAMPart, memory_capacity
from mixgcn.golden.backend import Backend, GoldenBackend, NumberFormat
from mixgcn.host.comm import InProcess

__all__ = ["BACKENDS", "DEFAULT_BAUD", "open_board", "open_chips", "open_golden", "open_rtl",
           "open_system", "opened"]

# the ULX3S's and ECPIX-5's USB serial bridges (FT231X, FT2232H) both take 3 Mbaud
DEFAULT_BAUD = 3_000_000


def open_golden(*, width: int = 16, index: int = 0) -> GoldenBackend:
    """The functional model with ``width``-bit data (``index``: unused, every instance
    is alike)."""
    return GoldenBackend(NumberFormat(width=width))


def open_rtl(*, chip: ChipConfig = CHIP_PRESETS["default"], chip_name: str = "default",
             pipeline: bool = True, verbose: bool = False,
             on_build: Callable[[], None] | None = None, index: int = 0,
             memory: MemoryProfile | DRAMPart = MEMORY_PROFILES["ideal"]) -> Backend:
    """A simulated ``chip`` (built on first use) behind the chip driver. ``pipeline``:
    pair kernels on both engines (False: every kernel alone); ``verbose``: show the
    simulator's output; ``on_build``: called before a build that has to run; ``index``:
    the chip's number in a system of several (its name in messages); ``memory``: the
    profile of the chip's memory (docs/memory.md)."""
    from mixgcn.host.chip_driver import ChipBackend
    from mixgcn.sim.chip.process import SimulatedChip

    device = SimulatedChip(chip, name=f"chip {index} ({chip_name})", verbose=verbose,
                           on_build=on_build, memory=memory)
    return ChipBackend(device, pipeline=pipeline)


def open_board(*, chip: ChipConfig = CHIP_PRESETS["default"], chip_name: str = "default",
               board: str = "ulx3s-85f", port: str = "sim", baud: int = DEFAULT_BAUD,
               pipeline: bool = True, verbose: bool = False,
               on_build: Callable[[], None] | None = None, index: int = 0,
               memory: MemoryProfile | DRAMPart = MEMORY_PROFILES["ideal"],
               link_timeout: float | None = None) -> Backend:
    """The chip ``chip`` on ``board`` (:data:`~mixgcn.gen.board.BOARDS`: its chip clock
    sets the serial line's divisor for ``baud``) reached through ``port``: a serial
    device's path, or ``sim`` for the simulated board top (built on first use; its
    memory plays ``memory``: a profile of the memory model, or a DRAM behind LiteDRAM's
    controller). ``link_timeout``: seconds the host waits for an answer
    other than a batch's (default: 2 s on a serial port, 0.05 s on the simulation,
    which answers before its ``write`` returns)."""
    from mixgcn.gen.board import BOARDS
    from mixgcn.hdl.uart import divisor_for
    from mixgcn.host.board import BoardDevice, open_serial
    from mixgcn.host.chip_driver import ChipBackend

    if board not in BOARDS:
        raise ValueError(f"unknown board {board!r}: expected one of {', '.join(BOARDS)}")
    clock_hz = BOARDS[board].chip_hz
    divisor = divisor_for(clock_hz, baud)  # refuses a rate the clock cannot make
    name = f"board {index} ({board}, {chip_name}, {port})"
    if port == "sim":
        from mixgcn.sim.board.process import SimulatedSerialPort

        serial = SimulatedSerialPort(chip, divisor=divisor, name=name, memory=memory,
                                     verbose=verbose, on_build=on_build)
        timeout = 0.05 if link_timeout is None else link_timeout
        sized = dict(capacity=memory_capacity(chip, memory), stretch=serial.stretch)
    else:
        if memory.name != "ideal":
            raise ValueError(f"--memory {memory.name} plays a memory in simulation; a real "
                             "board has its own")
        serial = open_serial(port, baud)
        timeout = 2.0 if link_timeout is None else link_timeout
        sized = {}
    try:
        device = BoardDevice(chip, serial, name=name, clock_hz=clock_hz, timeout=timeout,
                             **sized)
    except BaseException:
        serial.close()
        raise
    return ChipBackend(device, pipeline=pipeline)


BACKENDS: dict[str, Callable[..., Backend]] = {"golden": open_golden, "rtl": open_rtl,
                                               "board": open_board}


def open_system(chips: int, fabric: str = "crossbar", *,
                chip: ChipConfig = CHIP_PRESETS["default"], chip_name: str = "default",
                pipeline: bool = True, verbose: bool = False, link_stall: int = 0,
                on_build: Callable[[], None] | None = None,
                memory: MemoryProfile = MEMORY_PROFILES["ideal"]) -> InProcess:
    """``chips`` simulated chips joined by an exchange fabric (``crossbar`` or
    ``serial``, :data:`~mixgcn.gen.config.FABRIC_PRESETS`) in one simulator, each
    behind the chip driver, as a communicator that carries the fabric; each chip has
    its own memory of the profile ``memory``."""
    from mixgcn.gen.config import FABRIC_PRESETS, SystemConfig
    from mixgcn.host.chip_driver import ChipBackend
    from mixgcn.sim.chip.process import SimulatedSystem

    if fabric not in FABRIC_PRESETS:
        raise ValueError(f"unknown fabric {fabric!r}: expected one of "
                         f"{', '.join(FABRIC_PRESETS)}")
    config = SystemConfig(chip=chip, chips=chips, fabric=FABRIC_PRESETS[fabric])
    system = SimulatedSystem(config, name=f"{chips} chips ({chip_name}, {fabric})",
                             verbose=verbose, on_build=on_build, link_stall=link_stall,
                             memory=memory)
    return InProcess([ChipBackend(c, pipeline=pipeline) for c in system.chips],
                     fabric=system)


def open_chips(name: str, chips: int, **options) -> InProcess:
    """``chips`` instances of the backend ``name`` in this process, as a communicator."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}: expected one of {sorted(BACKENDS)}")
    backends: list[Backend] = []
    try:
        for p in range(chips):
            backends.append(BACKENDS[name](**options, index=p))
            options.pop("on_build", None)  # announced once: the others reuse the build
    except BaseException:
        for b in backends:
            b.close()
        raise
    return InProcess(backends)


@contextmanager
def opened(name: str, **options) -> Iterator[Backend]:
    """The backend ``name`` opened with ``options``, closed on leaving the block."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}: expected one of {sorted(BACKENDS)}")
    backend = BACKENDS[name](**options)
    try:
        yield backend
    finally:
        backend.close()
