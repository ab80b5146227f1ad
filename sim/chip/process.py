"""A simulated chip as a device: a chip server process, and the host's end of it.

:class:`SimulatedChip` builds the chip harness for a configuration with Verilator
(once: :mod:`mixgcn.sim.build` caches it), starts the model in its own process running
the chip server (:mod:`mixgcn.sim.chip.server`) and speaks the device protocol to it
over a socket pair. Several run at once from one host process (one thread each).

Why a Verilator model under cocotb rather than Verilator's own C++ harness: the same
harness, drivers and cocotb version verify the chip (:mod:`mixgcn.sim.verify`), and
Python acts once per request, never per cycle — a batch runs with the simulator alone
(measured in ``make bench``: the simulator's cycles per second against the wall time).

Failure is one line naming the chip and what it was doing (:class:`DeviceError`): a
simulator that dies, one that answers nothing within the time-out policy (it is then
stopped), and any exception the server reports. No server outlives its host: the
server exits when the connection closes or its parent changes, and the host stops its
servers when it closes them, when they are garbage-collected and at exit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mixgcn.gen.config import MEMORY_PROFILES, ChipConfig, MemoryProfile, SystemConfig
from mixgcn.gen.dram import DRAMPart, memory_capacity
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.hdl.memport import CHANNELS
from mixgcn.host.device import (
    TIMEOUTS,
    BatchResult,
    DeviceError,
    ProtocolError,
    StatusRecord,
    TimeoutPolicy,
    recv_message,
    send_message,
    words_from_blob,
)
from mixgcn.host.packing import to_ints, word_bytes
from mixgcn.sim.build import BuildError, build, simulator_env
from mixgcn.sim.chip.harness import TOP, harness_verilog

__all__ = ["ServerProcess", "SimulatedChip", "SimulatedSystem", "SystemChip", "check_route"]


def _words(n: int) -> str:
    return f"{n} word" if n == 1 else f"{n} words"


def _how(code: int | None) -> str:
    if code is None:
        return "closed its connection"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return "exited" if code == 0 else f"exited with status {code}"


def _stop(process: subprocess.Popen, sock: socket.socket, seconds: float) -> None:
    """Close the connection and make sure the server process is gone."""
    sock.close()
    if process.poll() is None:
        try:
            process.wait(timeout=seconds)  # it exits on end of file
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class ServerProcess:
    """A simulator process serving requests (the device protocol's messages) on a
    socket pair: started by :meth:`_launch`, spoken to by :meth:`_request`, stopped by
    :meth:`close`. Every failure is a :class:`DeviceError` naming :attr:`name`."""

    name: str
    timeouts: TimeoutPolicy
    process: subprocess.Popen | None = None

    def _launch(self, sim, server_module: str, prefix: str, env_extra: dict[str, str], *,
                plusargs: dict[str, str] | None = None, verbose: bool = False) -> None:
        """Start the simulator ``sim`` (a :class:`~mixgcn.sim.build.SimBuild`) running
        the cocotb module ``server_module`` in a new working folder; ``plusargs``: file
        names in that folder passed as ``+NAME=path``."""
        self.workdir = Path(tempfile.mkdtemp(prefix=prefix))
        self.log = self.workdir / "simulator.log"
        host_end, server_end = socket.socketpair()
        env = simulator_env(TOP, server_module, self.workdir / "results.xml")
        env.update(MIXGCN_SERVER_FD=str(server_end.fileno()),
                   MIXGCN_HOST_PID=str(os.getpid()), **env_extra)
        args = [f"+{k}={self.workdir / v}" for k, v in (plusargs or {}).items()]
        out = None if verbose else open(self.log, "wb")
        try:
            self.process = subprocess.Popen(
                [str(sim.binary), *args], cwd=self.workdir, env=env,
                pass_fds=(server_end.fileno(),), stdin=subprocess.DEVNULL,
                stdout=out or sys.stderr, stderr=subprocess.STDOUT)
        except OSError as e:
            host_end.close()
            raise DeviceError(f"{self.name}: the simulator {sim.binary} could not be "
                              f"started: {e.strerror or e}") from None
        finally:
            server_end.close()
            if out is not None:
                out.close()
        self.pid = self.process.pid
        self._sock = host_end
        self._stop = weakref.finalize(self, _stop, self.process, host_end,
                                      self.timeouts.stop_seconds)
        self.failed = False

    def close(self) -> None:
        """Ask the server to end, then make sure it has. Its working folder goes too,
        unless it failed (its log stays for a post-mortem)."""
        if self.process is None or not self._stop.alive:
            return
        if self.process.poll() is None:
            try:
                self._request(dict(op="close"), doing="closing",
                              timeout=self.timeouts.stop_seconds)
            except DeviceError:
                pass
        self._stop()
        if not self.failed:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _log_tail(self) -> str:
        """Why the simulator ended, from its log: the last Python exception it printed,
        else its last line other than Verilator's own ``$finish``."""
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines()
                     if ln.strip() and "Verilog $finish" not in ln]
        except OSError:
            return ""
        errors = [ln for ln in lines if re.match(r"[\w.]*(Error|Exception)\b", ln)]
        last = (errors or lines or [""])[-1]
        return f"; its log says: {last[:200]!r}" if last else ""

    def _fail(self) -> None:
        self.failed = True
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        self._stop()

    def _request(self, req: dict, blob=b"", *, doing: str,
                 timeout: float | None = None) -> tuple[dict, bytes]:
        if not self._stop.alive:
            raise DeviceError(f"{self.name}: cannot go on {doing}: the simulator was stopped "
                              "earlier")
        timeout = self.timeouts.reply_seconds() if timeout is None else timeout
        try:
            self._sock.settimeout(timeout)
            send_message(self._sock, req, blob)
            message = recv_message(self._sock)
        except TimeoutError:
            self._fail()
            raise DeviceError(f"{self.name}: the simulator (pid {self.pid}) gave no answer "
                              f"within {timeout:.0f} s while {doing}; it was stopped "
                              f"(log: {self.log})") from None
        except (OSError, ProtocolError):
            message = None
        except BaseException:  # interrupted mid-request: the connection is out of step
            self._fail()
            raise
        if message is None:
            try:
                code = self.process.wait(timeout=self.timeouts.stop_seconds)
            except subprocess.TimeoutExpired:
                code = None
            self._fail()
            tail = self._log_tail() if code is not None and code >= 0 else ""
            raise DeviceError(f"{self.name}: the simulator (pid {self.pid}) {_how(code)} "
                              f"while {doing}{tail} (log: {self.log})")
        reply, out = message
        if not reply.get("ok"):
            raise DeviceError(f"{self.name}: {doing} failed: {reply.get('error', 'no reason')}")
        return reply, out


class SimulatedChip(ServerProcess):
    """The chip ``config`` simulated in a server process (module docstring).

    ``name`` appears in every message; ``loopback=False`` exposes the exchange port
    (closed in the harness by a randomly stalling wire); ``verbose`` shows the
    simulator's own output on stderr (otherwise it goes to ``simulator.log`` in the
    server's working folder); ``on_build`` is called before a build that has to run;
    ``memory``: the profile the memory model plays, or a DRAM behind LiteDRAM's
    controller (:class:`~mixgcn.gen.dram.DRAMPart`, one chip only); a batch's cycle
    budget, and the time the host waits for it, stretch by its ``stretch``.
    ``capacity``: the memory words the host may use (the chip's address space, or the
    DRAM's size if smaller)."""

    def __init__(self, config: ChipConfig, *, name: str = "chip 0", loopback: bool = True,
                 verbose: bool = False, on_build: Callable[[], None] | None = None,
                 timeouts: TimeoutPolicy = TIMEOUTS,
                 memory: MemoryProfile | DRAMPart = MEMORY_PROFILES["ideal"]):
        served = config  # what the simulation holds: this chip, or a system's chips
        if isinstance(config, SystemConfig):
            config = config.chip
        if not isinstance(config, ChipConfig):
            raise TypeError(f"expected a ChipConfig, got {config!r}")
        dram = memory if isinstance(memory, DRAMPart) else None
        if not isinstance(memory, MemoryProfile) and dram is None:
            raise TypeError(f"expected a MemoryProfile or a DRAMPart, got {memory!r}")
        self.config, self.name, self.timeouts, self.memory = config, name, timeouts, memory
        lay = ChipLayouts(config)
        self.capacity = memory_capacity(config, memory)
        self.counts_distinct_reads = dram is None  # the memory model counts them
        self.stretch = memory.stretch(lay.mem_width, len(CHANNELS))
        self.mem_bytes = word_bytes(lay.mem_width)
        self.desc_bytes = word_bytes(lay.desc_layout.size)
        self.status_bytes = word_bytes(lay.status_layout.size)
        self._lay = lay
        self.process: subprocess.Popen | None = None
        announced = []

        def announce():  # once, whether the Verilog, the simulator or both are made
            if on_build is not None and not announced:
                announced.append(on_build())

        try:
            sim = build(harness_verilog(served, loopback, on_generate=announce, dram=dram),
                        TOP, lean=True, timing=True, on_build=announce)
        except (BuildError, ValueError) as e:
            raise DeviceError(f"{name}: {e}") from None
        self._launch(sim, "mixgcn.sim.chip.server", "mixgcn-chip-",
                     dict(MIXGCN_CHIP_CONFIG=json.dumps(served.to_dict()),
                          MIXGCN_MEMORY_PROFILE=json.dumps(memory.to_dict())),
                     plusargs=dict(MIXGCN_MEM_LOAD="load.hex", MIXGCN_MEM_DUMP="dump.hex"),
                     verbose=verbose)
        hello, _ = self._request(dict(op="hello"), doing="starting",
                                 timeout=timeouts.start_seconds)
        sizes = (hello.get("mem_bytes"), hello.get("desc_bytes"), hello.get("status_bytes"))
        want = (self.mem_bytes, self.desc_bytes, self.status_bytes)
        if sizes != want or hello.get("config") != json.loads(json.dumps(served.to_dict())):
            self._fail()
            raise DeviceError(f"{self.name}: the simulator serves another chip (words of "
                              f"{sizes} bytes, not {want}, or another configuration)")
        if hello.get("memory") != memory.to_dict():
            self._fail()
            raise DeviceError(f"{self.name}: the simulator plays another memory "
                              f"({hello.get('memory')}, not {memory.name!r})")

    # ---------------------------------------------------------------- protocol
    def write(self, addr: int, words: np.ndarray) -> None:
        words = np.asarray(words, dtype=np.uint8)
        self._request(dict(op="write", addr=int(addr), count=len(words)), words,
                      doing=f"writing {_words(len(words))} at {addr}")

    def run(self, descriptors: np.ndarray, *, budget: int, label: str = "a batch") -> BatchResult:
        descriptors = np.asarray(descriptors, dtype=np.uint8)
        reply, blob = self._request(
            dict(op="run", count=len(descriptors), budget=int(budget)), descriptors,
            doing=f"running {label} ({len(descriptors)} descriptors)",
            timeout=self.timeouts.reply_seconds(budget * self.stretch))
        return self._result(reply, blob)

    def _result(self, reply: dict, blob: bytes) -> BatchResult:
        """A batch's reply (one chip's) and its status records as a BatchResult."""
        done = int(reply["completed"])
        status = self._words(blob, self.status_bytes, done, "status records")
        return BatchResult(cycles=int(reply["cycles"]), counters=dict(reply["counters"]),
                           device_seconds=float(reply["device_seconds"]),
                           status=[StatusRecord.decode(self._lay, w) for w in to_ints(status)],
                           error=int(reply.get("error", 0)))

    def read(self, addr: int, count: int) -> np.ndarray:
        _, blob = self._request(dict(op="read", addr=int(addr), count=int(count)),
                                doing=f"reading {_words(count)} at {addr}")
        return self._words(blob, self.mem_bytes, count, "read")

    def counters(self) -> dict[str, int]:
        return dict(self._request(dict(op="counters"), doing="reading counters")[0]["counters"])

    def reset(self) -> None:
        self._request(dict(op="reset"), doing="resetting the chip")

    # ---------------------------------------------------------------- transport
    def _words(self, blob: bytes, nbytes: int, count: int, what: str) -> np.ndarray:
        try:
            return words_from_blob(blob, nbytes, count, what)
        except ProtocolError as e:
            self._fail()
            raise DeviceError(f"{self.name}: {e}") from None



def check_route(route: dict, chips: int, lanes: int) -> None:
    """Refuse a route the fabric cannot carry (hdl/fabric.py): a mode other than
    ``scatter`` / ``gather``, or lanes that are not one non-empty, disjoint slice of the
    row per chip."""
    if not isinstance(route, dict) or route.get("mode") not in ("scatter", "gather"):
        raise ValueError(f"a fabric route needs mode 'scatter' or 'gather', got {route!r}")
    lo, count = route.get("lo"), route.get("count")
    if not (isinstance(lo, list) and isinstance(count, list) and len(lo) == len(count) == chips):
        raise ValueError(f"a fabric route needs {chips} 'lo' and 'count' values, got {route!r}")
    taken = np.zeros(lanes, dtype=int)
    for p, (a, n) in enumerate(zip(lo, count, strict=True)):
        if not (isinstance(a, int) and isinstance(n, int) and 0 <= a and 1 <= n
                and a + n <= lanes):
            raise ValueError(f"chip {p}'s lanes {a}..{a}+{n} are not a non-empty slice of "
                             f"the {lanes} lanes of a row")
        taken[a:a + n] += 1
    if taken.max() > 1:
        raise ValueError(f"the chips' lanes overlap: {route!r}")


class SimulatedSystem(SimulatedChip):
    """``config.chips`` chips and their exchange fabric (a
    :class:`~mixgcn.gen.config.SystemConfig`) in one simulator process. :attr:`chips`
    are the chips as devices (:class:`SystemChip`): each serves the device protocol on
    its own memory and descriptors, so the host's chip driver runs on each unchanged; a
    batch whose rows cross the fabric runs on every chip at once
    (:meth:`run_together`). ``link_stall``: each fabric link holds back a flit in a
    cycle with this probability in 256ths (tests)."""

    def __init__(self, config: SystemConfig, *, name: str = "system", link_stall: int = 0,
                 **kwargs):
        if not isinstance(config, SystemConfig):
            raise TypeError(f"expected a SystemConfig, got {config!r}")
        self._lock = threading.RLock()  # one request at a time on the connection
        super().__init__(config, name=name, **kwargs)
        self.system = config
        self.link_stall = int(link_stall)
        P = config.chips
        self.link_flits = np.zeros((P, P), dtype=np.int64)  # flits each link carried
        self.link_bits = np.array([[config.link_width(p, q) for q in range(P)]
                                   for p in range(P)])
        self._meet = threading.Condition()
        self._waiting: dict[int, tuple] = {}
        self._round = 0
        self._results: list[BatchResult] | BaseException = []
        self.chips = [SystemChip(self, p) for p in range(P)]
        self._open = set(range(P))

    def _chip_closed(self, p: int) -> None:
        self._open.discard(p)
        if not self._open:
            self.close()

    def _request(self, req: dict, blob=b"", **kwargs):
        with self._lock:
            return super()._request(req, blob, **kwargs)

    def run_together(self, batches: list[np.ndarray], route: dict, *, budget: int,
                     label: str = "a batch") -> list[BatchResult]:
        """Every chip's batch (packed descriptors) at once, the fabric set to ``route``
        (``mode``: ``scatter`` or ``gather``; ``lo``, ``count``: each chip's lanes)."""
        P = self.system.chips
        if len(batches) != P:
            raise ValueError(f"{len(batches)} batches for a system of {P} chips")
        check_route(route, P, self.system.chip.lanes)
        batches = [np.asarray(b, dtype=np.uint8) for b in batches]
        blob = np.concatenate(batches) if batches else b""
        reply, out = self._request(
            dict(op="run_together", counts=[len(b) for b in batches], budget=int(budget),
                 route=route, link_stall=self.link_stall), blob,
            doing=f"running {label} on {P} chips",
            timeout=self.timeouts.reply_seconds(budget * self.stretch))
        self.link_flits += np.asarray(reply["flits"], dtype=np.int64).reshape(P, P)
        results, offset = [], 0
        for r in reply["results"]:
            end = offset + int(r["completed"]) * self.status_bytes
            results.append(self._result(r, out[offset:end]))
            offset = end
        return results

    def link_bytes(self) -> np.ndarray:
        """Bytes each link has carried (P × P, ``[p, q]``: chip p to chip q)."""
        return self.link_flits * self.link_bits / 8

    def _meet_and_run(self, p: int, descriptors, budget: int, route: dict,
                      label: str) -> BatchResult:
        """Chip p's part of a batch every chip runs at once: the last chip to arrive
        runs them all; the others wait for it."""
        P = self.system.chips
        with self._meet:
            if p in self._waiting:
                raise DeviceError(f"{self.name}: chip {p} joined a fabric batch twice")
            here = self._round
            self._waiting[p] = (descriptors, budget, route, label)
            if len(self._waiting) == P:
                waiting, self._waiting = self._waiting, {}
                routes = {json.dumps(w[2], sort_keys=True) for w in waiting.values()}
                try:
                    if len(routes) != 1:
                        raise DeviceError(f"{self.name}: the chips of one fabric batch "
                                          f"asked for {len(routes)} different routes")
                    self._results = self.run_together(
                        [waiting[q][0] for q in range(P)], route,
                        budget=max(w[1] for w in waiting.values()), label=label)
                except BaseException as e:  # every chip of the batch hears of it
                    self._results = e
                self._round += 1
                self._meet.notify_all()
            else:
                wait = self.timeouts.reply_seconds(budget * self.stretch)
                if not self._meet.wait_for(lambda: self._round != here, timeout=wait):
                    self._waiting.pop(p, None)
                    raise DeviceError(f"{self.name}: chip {p} waited {wait:.0f} s for the "
                                      f"other chips to join {label}")
            results = self._results
        if isinstance(results, BaseException):
            raise results
        return results[p]


class SystemChip:
    """Chip ``index`` of a :class:`SimulatedSystem`, as a
    :class:`~mixgcn.host.device.ChipDevice`. ``run(..., fabric=route)`` joins a batch
    every chip of the system runs at once (each from its own thread)."""

    def __init__(self, system: SimulatedSystem, index: int):
        self.system, self.index = system, index
        self.config = system.config
        self.name = f"{system.name} chip {index}"

    def write(self, addr: int, words: np.ndarray) -> None:
        words = np.asarray(words, dtype=np.uint8)
        self.system._request(dict(op="write", chip=self.index, addr=int(addr),
                                  count=len(words)), words,
                             doing=f"writing {_words(len(words))} at {addr} of chip "
                                   f"{self.index}")

    def run(self, descriptors: np.ndarray, *, budget: int, label: str = "a batch",
            fabric: dict | None = None) -> BatchResult:
        descriptors = np.asarray(descriptors, dtype=np.uint8)
        if fabric is not None:
            return self.system._meet_and_run(self.index, descriptors, budget, fabric, label)
        s = self.system
        reply, blob = s._request(
            dict(op="run", chip=self.index, count=len(descriptors), budget=int(budget)),
            descriptors, doing=f"running {label} on chip {self.index}",
            timeout=s.timeouts.reply_seconds(budget * s.stretch))
        return s._result(reply, blob)

    def read(self, addr: int, count: int) -> np.ndarray:
        _, blob = self.system._request(dict(op="read", chip=self.index, addr=int(addr),
                                            count=int(count)),
                                       doing=f"reading {_words(count)} at {addr} of chip "
                                             f"{self.index}")
        return self.system._words(blob, self.system.mem_bytes, count, "read")

    def counters(self) -> dict[str, int]:
        return dict(self.system._request(dict(op="counters", chip=self.index),
                                         doing="reading counters")[0]["counters"])

    def stalls(self, read: int = 0, write: int = 0) -> None:
        """Random stalls on this chip's memory from now on: it refuses a read request
        (``read``) or a write (``write``) in a cycle with that probability in 256ths."""
        self.system._request(dict(op="stalls", chip=self.index, read=int(read),
                                  write=int(write)), doing=f"setting chip {self.index}'s stalls")

    def close(self) -> None:
        """The system closes with its last chip (:meth:`SimulatedSystem.close`)."""
        self.system._chip_closed(self.index)
