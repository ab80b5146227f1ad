"""The board server: a simulated board top on the far end of a serial line.

This module is the cocotb test of a Verilator model of the board harness
(:mod:`mixgcn.sim.board.harness`), run in a process the host starts
(:class:`~mixgcn.sim.board.process.SimulatedSerialPort`). It speaks the device
protocol's messages (:mod:`mixgcn.host.device`, "Messages") on the socket
``$MIXGCN_SERVER_FD``, but what they carry is the serial line's bytes: ``send``
(blob: bytes for the board's ``rx``) puts them on the line through the harness's
UART, runs the clock until the board is quiet (every byte sent, nothing left to do or
say) and replies with the bytes the board sent on ``tx`` meanwhile and the cycles it
took. So the host's link (:class:`~mixgcn.host.link.Link`) runs unchanged over it,
and the whole board — UART, frames, request executor, chip, memory — is the Verilog.

Other operations: ``hello`` (the configuration, divisor and memory: a profile the
memory model plays, or the DRAM behind LiteDRAM's controller the harness was built
on), ``stalls`` (``read``, ``write``: the memory model refuses a request or a write in
a cycle with that probability in 256ths; a DRAM has its own timing, and refuses them),
``line`` (``cut``: the board's ``rx`` held idle), ``close``. While it waits for the
host, no simulated time passes.
"""

from __future__ import annotations

import json
import os
import socket

import cocotb
from cocotb.triggers import ClockCycles, First, RisingEdge
from cocotb.utils import get_sim_time

from mixgcn.gen.config import MEMORY_PROFILES, ChipConfig, MemoryProfile, memory_from_dict
from mixgcn.gen.dram import DRAMPart
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.sim.board.harness import BYTE_DEPTH
from mixgcn.sim.build import CLOCK_PERIOD_NS
from mixgcn.sim.chip.control import wait_for_dram
from mixgcn.sim.chip.server import HostGone, serve_requests

WATCH_CYCLES = 200_000  # cycles between checks that the host still lives


class BoardServer:
    def __init__(self, dut, config: ChipConfig, divisor: int,
                 memory: MemoryProfile | DRAMPart, host_pid: int):
        self.dut, self.config, self.divisor, self.memory = dut, config, divisor, memory
        self.host_pid = host_pid
        self.cycles = 0  # clock cycles the board has run

    def host_alive(self) -> bool:
        return os.getppid() == self.host_pid

    async def start(self) -> None:
        dut, m = self.dut, self.memory
        for name in ("send_count", "send_start", "line_cut"):
            getattr(dut, name).value = 0
        if isinstance(m, MemoryProfile):
            for name in ("read_stall", "write_stall", "mem_forget", "mem_load", "mem_dump",
                         "dump_first", "dump_last"):
                getattr(dut, name).value = 0
            dut.mem_bandwidth.value, dut.mem_latency.value = m.bandwidth, m.latency
            dut.mem_burst_shift.value = m.burst_shift(ChipLayouts(self.config).mem_width)
            dut.mem_burst_cycles.value = m.burst_cycles
        dut.rst.value = 1
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 1)
        if isinstance(m, DRAMPart):  # the board's controller initialises its DRAM first
            await wait_for_dram(dut, m)

    async def send(self, data: bytes) -> tuple[bytes, int]:
        """Put ``data`` on the board's line; the bytes it sent back and the cycles."""
        dut = self.dut
        if len(data) > BYTE_DEPTH:
            raise ValueError(f"{len(data)} bytes at once exceed the harness's "
                             f"{BYTE_DEPTH}-byte line buffer")
        mem = dut.harness.sender.mem
        for i, b in enumerate(data):
            mem[i].value = b
        start = get_sim_time("ns")
        dut.send_count.value = len(data)
        dut.send_start.value = 1
        await RisingEdge(dut.clk)
        dut.send_start.value = 0
        await RisingEdge(dut.clk)
        while not int(dut.quiet.value):
            fired = await First(RisingEdge(dut.quiet), ClockCycles(dut.clk, WATCH_CYCLES))
            if not isinstance(fired, RisingEdge) and not self.host_alive():
                raise HostGone
            await RisingEdge(dut.clk)  # the value settled after the edge
        cycles = round((get_sim_time("ns") - start) / CLOCK_PERIOD_NS)
        got = int(dut.received.value)
        if got > BYTE_DEPTH:
            raise ValueError(f"the board sent {got} bytes, more than the harness's "
                             f"{BYTE_DEPTH}-byte line buffer")
        sink = dut.harness.receiver.mem
        return bytes(int(sink[i].value) for i in range(got)), cycles

    async def handle(self, req: dict, blob: bytes) -> tuple[dict, bytes]:
        op = req.get("op")
        if op == "hello":
            return dict(ok=True, pid=os.getpid(), config=self.config.to_dict(),
                        divisor=self.divisor, memory=self.memory.to_dict()), b""
        if op == "send":
            out, cycles = await self.send(blob)
            self.cycles += cycles
            return dict(ok=True, cycles=cycles), out
        if op == "stalls":
            if isinstance(self.memory, DRAMPart) and (req.get("read") or req.get("write")):
                raise ValueError("random memory stalls are the memory model's; a DRAM "
                                 "behind its controller has its own timing")
            for kind in ("read", "write"):
                level = int(req.get(kind, 0))
                if not 0 <= level <= 255:
                    raise ValueError(f"{kind} stall must be in 0..255, got {level}")
                if isinstance(self.memory, MemoryProfile):
                    getattr(self.dut, f"{kind}_stall").value = level
            return dict(ok=True), b""
        if op == "line":
            self.dut.line_cut.value = int(bool(req.get("cut")))
            return dict(ok=True), b""
        if op == "close":
            return dict(ok=True), b""
        raise ValueError(f"unknown operation {op!r}")


@cocotb.test()
async def serve(dut):
    """Serve requests until the host closes the connection or asks to close."""
    host_pid = int(os.environ["MIXGCN_HOST_PID"])
    config = ChipConfig.from_dict(json.loads(os.environ["MIXGCN_CHIP_CONFIG"]))
    divisor = int(os.environ["MIXGCN_DIVISOR"])
    profile = os.environ.get("MIXGCN_MEMORY_PROFILE")
    memory = memory_from_dict(json.loads(profile)) if profile else MEMORY_PROFILES["ideal"]
    server = BoardServer(dut, config, divisor, memory, host_pid)
    await server.start()
    with socket.socket(fileno=int(os.environ["MIXGCN_SERVER_FD"])) as sock:
        await serve_requests(server, sock)
