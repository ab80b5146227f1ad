"""The chip server: a simulated chip serving the device protocol.

This module is the cocotb test of a Verilator model of the chip harness, run in a
process the host starts (:class:`~mixgcn.sim.chip.process.SimulatedChip`). It reads
requests (:mod:`mixgcn.host.device`, "Messages") from the socket the host passed it
as file descriptor ``$MIXGCN_SERVER_FD`` and carries each out on the simulation
(:class:`~mixgcn.sim.chip.control.HarnessControl`); while it waits for a request the
simulation waits with it, so no simulated time passes between batches.

The memory is the one in ``$MIXGCN_MEMORY_PROFILE`` (the ``to_dict()`` of a
:class:`~mixgcn.gen.config.MemoryProfile` the memory model plays, or of a
:class:`~mixgcn.gen.dram.DRAMPart` the harness was built on; the ideal memory without
it).

Operations (each may name a ``chip`` of a system; the first by default): ``hello``
(the word sizes, the configuration and the memory profile), ``write`` (``addr``,
``count``; blob: the words), ``read`` (``addr``, ``count``; reply blob: the words),
``run`` (``count``, ``budget``; blob: descriptors; reply: ``cycles``, ``counters``,
``device_seconds``, ``error`` (the chip's error flags), ``completed``; blob: the
status records), ``counters``, ``reset``, ``stalls`` (``read``, ``write``: the chip's
memory refuses a request or a write in a cycle with that probability in 256ths),
``close``; on a system, ``run_together`` (every chip's batch at once across the
fabric, :meth:`ChipServer._run_together`). Any exception becomes an error reply; the
server keeps serving. It ends when the host asks it to or closes the connection, and
when the host process is gone (checked every :data:`WATCH_CYCLES` cycles of a running
batch too, so a long batch never leaves it behind).
"""

from __future__ import annotations

import json
import os
import socket

import cocotb
import numpy as np

from mixgcn.gen.config import MEMORY_PROFILES, ChipConfig, SystemConfig, memory_from_dict
from mixgcn.hdl.fabric import FabricMode, route_layout
from mixgcn.host.device import recv_message, send_message, words_from_blob
from mixgcn.host.packing import word_bytes
from mixgcn.sim.chip.control import HarnessControl, run_together

WATCH_CYCLES = 200_000


class HostGone(Exception):
    """The host process that started this server has ended."""


class ChipServer:
    """The operations of the device protocol on a running harness: one chip's, or a
    system's (``system``: its configuration), whose requests name a ``chip``."""

    def __init__(self, chips: list[HarnessControl], host_pid: int, *,
                 system: SystemConfig | None = None, dut=None):
        self.chips, self.host_pid, self.system, self.dut = chips, host_pid, system, dut
        lay = chips[0].lay
        self.desc_bytes = word_bytes(lay.desc_layout.size)

    def host_alive(self) -> bool:
        return os.getppid() == self.host_pid

    async def handle(self, req: dict, blob: bytes) -> tuple[dict, bytes]:
        op = req.get("op")
        index = req.get("chip", 0)
        if not (isinstance(index, int) and 0 <= index < len(self.chips)):
            raise ValueError(f"no chip {index!r}: the simulation holds {len(self.chips)}")
        chip = self.chips[index]
        if op == "hello":
            config = self.system.to_dict() if self.system else chip.config.to_dict()
            return dict(ok=True, pid=os.getpid(), mem_bytes=chip.mem_bytes,
                        desc_bytes=self.desc_bytes, status_bytes=chip.status_bytes,
                        config=config, memory=chip.memory.to_dict()), b""
        if op == "run_together":
            return await self._run_together(req, blob)
        if op == "write":
            count = int(req["count"])
            chip.write(int(req["addr"]), words_from_blob(blob, chip.mem_bytes, count, "write"))
            return dict(ok=True), b""
        if op == "read":
            words = await chip.read(int(req["addr"]), int(req["count"]))
            return dict(ok=True, count=len(words)), words.tobytes()
        if op == "run":
            descs = words_from_blob(blob, self.desc_bytes, int(req["count"]), "run")
            cycles, status, counters, seconds, error = await chip.run(
                descs, int(req["budget"]), watch=(WATCH_CYCLES, self._watch))
            return dict(ok=True, cycles=cycles, counters=counters, device_seconds=seconds,
                        error=error, completed=len(status)), status.tobytes()
        if op == "stalls":  # random stalls on this chip's memory (tests)
            for kind in ("read", "write"):
                level = int(req.get(kind, 0))
                if not 0 <= level <= 255:
                    raise ValueError(f"{kind} stall must be in 0..255, got {level}")
                setattr(chip, f"{kind}_stall", level)
            return dict(ok=True), b""
        if op == "counters":
            return dict(ok=True, counters=chip.counters()), b""
        if op == "reset":
            await chip.reset()
            return dict(ok=True), b""
        if op == "close":
            return dict(ok=True), b""
        raise ValueError(f"unknown operation {op!r}")

    async def _run_together(self, req: dict, blob: bytes) -> tuple[dict, bytes]:
        """Every chip's batch at once, the fabric set to ``route`` (``mode``: scatter or
        gather; ``lo``, ``count``: each chip's lanes); ``counts``: descriptors per chip,
        their words one chip after the other in the blob; ``link_stall``: each link's
        stall level (0..255). Reply: ``results`` (each chip's ``run`` reply) and the
        flits each link carried (``flits``, link p·P + q); blob: the status records,
        chip after chip."""
        if self.system is None:
            raise ValueError("run_together needs a system of chips")
        P, L = self.system.chips, self.system.chip.lanes
        counts = [int(n) for n in req["counts"]]
        if len(counts) != P:
            raise ValueError(f"run_together: {len(counts)} batches for {P} chips")
        words = words_from_blob(blob, self.desc_bytes, sum(counts), "run_together")
        batches = np.split(words, np.cumsum(counts)[:-1])
        route = req["route"]
        mode = {"scatter": FabricMode.SCATTER, "gather": FabricMode.GATHER}[route["mode"]]
        self.dut.route.value = route_layout(P, L).const(
            {"mode": mode, "lo": route["lo"], "count": route["count"]}).as_bits()
        stall = int(req.get("link_stall", 0))
        if not 0 <= stall <= 255:
            raise ValueError(f"link_stall must be in 0..255, got {stall}")
        self.dut.link_stall.value = stall
        flits = self._flits()
        results = await run_together(self.chips, batches, int(req["budget"]),
                                     watch=(WATCH_CYCLES, self._watch), stall=stall)
        moved = [a - b for a, b in zip(self._flits(), flits, strict=True)]
        replies, out = [], b""
        for cycles, status, counters, seconds, error in results:
            replies.append(dict(cycles=cycles, counters=counters, device_seconds=seconds,
                                error=error, completed=len(status)))
            out += status.tobytes()
        return dict(ok=True, results=replies, flits=moved), out

    def _flits(self) -> list[int]:
        P = self.system.chips
        value = int(self.dut.flits.value)
        return [(value >> (32 * i)) & 0xFFFF_FFFF for i in range(P * P)]

    def _watch(self) -> None:
        if not self.host_alive():
            raise HostGone


@cocotb.test()
async def serve(dut):
    """Serve requests until the host closes the connection or asks to close."""
    host_pid = int(os.environ["MIXGCN_HOST_PID"])
    config = json.loads(os.environ["MIXGCN_CHIP_CONFIG"])
    profile = os.environ.get("MIXGCN_MEMORY_PROFILE")
    memory = memory_from_dict(json.loads(profile)) if profile else MEMORY_PROFILES["ideal"]
    if config.get("kind") == "system":
        system = SystemConfig.from_dict(config)
        chips = [HarnessControl(dut, system.chip, chip=p, memory=memory)
                 for p in range(system.chips)]
        dut.link_stall.value = 0
        server = ChipServer(chips, host_pid, system=system, dut=dut)
    else:
        chips = [HarnessControl(dut, ChipConfig.from_dict(config), memory=memory)]
        server = ChipServer(chips, host_pid)
    for chip in chips:
        await chip.start()  # the reset is shared: every chip's inputs are set first
    with socket.socket(fileno=int(os.environ["MIXGCN_SERVER_FD"])) as sock:
        await serve_requests(server, sock)


async def serve_requests(server, sock: socket.socket) -> None:
    """Answer the host's requests on ``sock`` with ``server`` (its ``handle`` and
    ``host_alive``) until the host closes the connection, asks to close, or is gone;
    the board server (:mod:`mixgcn.sim.board.server`) serves the same way."""
    while server.host_alive():
        try:
            message = recv_message(sock)  # blocks: the simulation waits for the host
        except OSError:
            return
        if message is None:  # the host closed the connection
            return
        req, blob = message
        try:
            reply, out = await server.handle(req, blob)
        except HostGone:
            return
        except Exception as e:  # every failure is the host's to report, in one line
            reply, out = dict(ok=False, error=f"{type(e).__name__}: {e}"), b""
        try:
            send_message(sock, reply, out)
        except OSError:
            return
        if req.get("op") == "close":
            return
