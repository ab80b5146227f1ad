"""Communicators: how the host reaches P chips, each behind its own backend.

A :class:`Communicator` runs one kernel call on every chip of a step at once and
returns each chip's result with the cycles it took (:class:`Outcome`). Two kinds:

- :class:`InProcess` — every chip's backend in this process, the calls of a step on
  one thread each (a simulated chip waits on its simulator process, so P simulations
  run concurrently);
- :class:`MPIHost` — one chip per MPI rank (mpi4py): rank 0 runs the training loop
  and chip 0, ranks 1 … P−1 each open their own backend (on ``rtl``: their own
  simulator process) and :func:`serve` calls from rank 0 until it closes them.

Both run the same :func:`invoke` beside each backend, so a run gives the same results
and counts whichever carries it. The sharding and the byte counting live above, in
:class:`mixgcn.host.sharded.ShardedBackend`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from mixgcn.golden.backend import Backend, BatchRecord, DeviceReport, NumberFormat
from mixgcn.host.device import DeviceError

__all__ = ["Call", "Communicator", "InProcess", "MPIHost", "Outcome", "invoke",
           "mpi_world_size", "serve"]


@dataclass(frozen=True)
class Call:
    """A backend method and its arguments, for one chip."""

    method: str
    args: tuple
    kwargs: dict


@dataclass(frozen=True)
class Outcome:
    """What one chip's call returned, and what its device did for it (``cycles``
    ``None`` on a backend that does not model time)."""

    result: Any
    cycles: int | None
    batches: tuple[BatchRecord, ...]
    words_written: int
    words_read: int


_METHODS = ("spmm", "gemm", "spmm_gemm", "gemm_spmm", "spmm_and_gemm",
            "spmm_gemm_fabric", "gemm_spmm_fabric")  # the last two: a system's chips


def invoke(backend: Backend, call: Call) -> Outcome:
    """Run ``call`` on ``backend``; the cycles and batches are the report's growth."""
    if call.method not in _METHODS:
        raise ValueError(f"not a kernel call: {call.method!r}")
    r = backend.report()
    cycles, runs, written, read = r.cycles, len(r.batches), r.words_written, r.words_read
    result = getattr(backend, call.method)(*call.args, **call.kwargs)
    r = backend.report()
    return Outcome(result, None if cycles is None else r.cycles - cycles,
                   tuple(r.batches[runs:]), r.words_written - written, r.words_read - read)


@runtime_checkable
class Communicator(Protocol):
    """P chips behind one interface: ``size`` chips whose backends are named ``name``
    and compute in ``fmt``."""

    size: int
    name: str
    fmt: NumberFormat
    transport: str  # how the host reaches the chips: "in-process" or "mpi"

    def map(self, calls: Sequence[Call | None]) -> list[Outcome | None]:
        """Chip p runs ``calls[p]`` (``None``: it idles); all at once."""
        ...

    def reports(self) -> list[DeviceReport]: ...

    def close(self) -> None: ...


class InProcess:
    """P backends in this process; ``owned=False`` leaves them open on :meth:`close`
    (chips borrowed for one run of several). ``fabric``: the chips are one simulated
    system (:class:`~mixgcn.sim.chip.process.SimulatedSystem`) whose exchange fabric
    can carry the all-to-all."""

    def __init__(self, backends: Sequence[Backend], *, owned: bool = True, fabric=None):
        self.fabric = fabric
        if not backends:
            raise ValueError("a communicator needs at least one chip")
        self.backends = list(backends)
        self.size = len(self.backends)
        self.name = self.backends[0].name
        self.fmt = self.backends[0].fmt
        self.transport = "in-process" if fabric is None else "one simulated system"
        self.owned = owned
        self._pool = ThreadPoolExecutor(self.size) if self.size > 1 else None

    def map(self, calls: Sequence[Call | None]) -> list[Outcome | None]:
        if len(calls) != self.size:
            raise ValueError(f"{len(calls)} calls for {self.size} chips")
        work = [(b, c) for b, c in zip(self.backends, calls, strict=True)]
        if self._pool is None or sum(c is not None for c in calls) < 2:
            return [invoke(b, c) if c is not None else None for b, c in work]
        futures = [self._pool.submit(invoke, b, c) if c is not None else None
                   for b, c in work]
        return [f.result() if f is not None else None for f in futures]

    def reports(self) -> list[DeviceReport]:
        return [b.report() for b in self.backends]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        if not self.owned:
            return
        errors = []
        for b in self.backends:
            try:
                b.close()
            except Exception as e:  # close every chip, then report the first failure
                errors.append(e)
        if errors:
            raise errors[0]


def mpi_world_size() -> int | None:
    """The number of ranks this process was started among by ``mpiexec`` (MPICH's or
    Open MPI's), or ``None`` when it was not started by one."""
    for key in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        if key in os.environ:
            try:
                return int(os.environ[key])
            except ValueError:
                return None
    return None


# Messages from rank 0 to a chip rank: ("call", Call) | ("report",) | ("close",);
# answers: ("ok", value) | ("error", kind, message).
_ERRORS = {"ValueError": ValueError, "DeviceError": DeviceError, "RuntimeError": RuntimeError}


def _answer(comm, value) -> None:
    comm.send(("ok", value), dest=0)


def serve(comm, backend: Backend) -> None:
    """A chip rank's loop: run rank 0's calls on ``backend`` until it says close."""
    try:
        while True:
            message = comm.recv(source=0)
            try:
                if message[0] == "call":
                    _answer(comm, invoke(backend, message[1]))
                elif message[0] == "report":
                    _answer(comm, backend.report())
                elif message[0] == "close":
                    _answer(comm, None)
                    return
                else:
                    raise RuntimeError(f"unknown request {message[0]!r}")
            except Exception as e:  # the host reports it; this rank keeps serving
                comm.send(("error", type(e).__name__, str(e)), dest=0)
    finally:
        backend.close()


class MPIHost:
    """Rank 0's end: chip 0 is ``backend`` here, chip p is rank p."""

    def __init__(self, comm, backend: Backend):
        self.comm = comm
        self.backend = backend
        self.size = comm.Get_size()
        self.name = backend.name
        self.fmt = backend.fmt
        self.transport = "mpi"
        self._closed = False

    def _ask(self, p: int, message) -> None:
        self.comm.send(message, dest=p)

    def _reply(self, p: int):
        answer = self.comm.recv(source=p)
        if answer[0] == "ok":
            return answer[1]
        kind, text = answer[1], answer[2]
        raise _ERRORS.get(kind, RuntimeError)(f"rank {p}: {text}")

    def map(self, calls: Sequence[Call | None]) -> list[Outcome | None]:
        if len(calls) != self.size:
            raise ValueError(f"{len(calls)} calls for {self.size} chips")
        for p in range(1, self.size):  # the other ranks start first ...
            if calls[p] is not None:
                self._ask(p, ("call", calls[p]))
        out: list[Outcome | None] = [None] * self.size
        error = None
        try:  # ... and chip 0 runs here meanwhile
            out[0] = invoke(self.backend, calls[0]) if calls[0] is not None else None
        except Exception as e:  # collect every rank's answer before raising
            error = e
        for p in range(1, self.size):
            if calls[p] is not None:
                try:
                    out[p] = self._reply(p)
                except Exception as e:
                    error = error or e
        if error is not None:
            raise error
        return out

    def reports(self) -> list[DeviceReport]:
        for p in range(1, self.size):
            self._ask(p, ("report",))
        return [self.backend.report()] + [self._reply(p) for p in range(1, self.size)]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            for p in range(1, self.size):
                self._ask(p, ("close",))
            for p in range(1, self.size):
                self._reply(p)
        finally:
            self.backend.close()
