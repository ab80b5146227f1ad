"""The chip server: a simulated chip serving the device protocol.

This module is the cocotb test of a Verilator model of the chip harness, run in a
process the host starts (:class:`~mixgcn.sim.chip.process.SimulatedChip`). It reads
requests (:mod:`mixgcn.host.device`, "Messages") from the socket the host passed it
as file descriptor ``$MIXGCN_SERVER_FD`` and carries each out on the simulation
(:class:`~mixgcn.sim.chip.control.HarnessControl`); while it waits for a request the
simulation waits with it, so no simulated time passes between batches.

Operations: ``hello`` (the chip's word sizes and configuration), ``write`` (``addr``,
``count``; blob: the words), ``read`` (``addr``, ``count``; reply blob: the words),
``run`` (``count``, ``budget``; blob: descriptors; reply: ``cycles``, ``counters``,
``device_seconds``, ``error`` (the chip's error flags), ``completed``; blob: the status
records), ``counters``, ``reset``, ``close``. Any
exception becomes an error reply; the server keeps serving. It ends when the host asks
it to or closes the connection, and when the host process is gone (checked every
:data:`WATCH_CYCLES` cycles of a running batch too, so a long batch never leaves it
behind).
"""

from __future__ import annotations

import json
import os
import socket

import cocotb

from mixgcn.gen.config import ChipConfig
from mixgcn.host.device import recv_message, send_message, words_from_blob
from mixgcn.host.packing import word_bytes
from mixgcn.sim.chip.control import HarnessControl

WATCH_CYCLES = 200_000


class HostGone(Exception):
    """The host process that started this server has ended."""


class ChipServer:
    """The operations of the device protocol on a running harness."""

    def __init__(self, chip: HarnessControl, host_pid: int):
        self.chip, self.host_pid = chip, host_pid
        lay = chip.lay
        self.desc_bytes = word_bytes(lay.desc_layout.size)

    def host_alive(self) -> bool:
        return os.getppid() == self.host_pid

    async def handle(self, req: dict, blob: bytes) -> tuple[dict, bytes]:
        op = req.get("op")
        chip = self.chip
        if op == "hello":
            return dict(ok=True, pid=os.getpid(), mem_bytes=chip.mem_bytes,
                        desc_bytes=self.desc_bytes, status_bytes=chip.status_bytes,
                        config=chip.config.to_dict()), b""
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
        if op == "counters":
            return dict(ok=True, counters=chip.counters()), b""
        if op == "reset":
            await chip.reset()
            return dict(ok=True), b""
        if op == "close":
            return dict(ok=True), b""
        raise ValueError(f"unknown operation {op!r}")

    def _watch(self) -> None:
        if not self.host_alive():
            raise HostGone


@cocotb.test()
async def serve(dut):
    """Serve requests until the host closes the connection or asks to close."""
    host_pid = int(os.environ["MIXGCN_HOST_PID"])
    config = ChipConfig.from_dict(json.loads(os.environ["MIXGCN_CHIP_CONFIG"]))
    chip = HarnessControl(dut, config)
    await chip.start()
    with socket.socket(fileno=int(os.environ["MIXGCN_SERVER_FD"])) as sock:
        await _serve(ChipServer(chip, host_pid), sock)


async def _serve(server: ChipServer, sock: socket.socket) -> None:
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
