"""The simulated chip as a device: chip servers in their own processes, driven over the
device protocol from one host process, and every way one can fail reported in one
line with no process left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.golden.backend import GoldenBackend, NumberFormat, Stage
from mixgcn.hdl.chip import Unit
from mixgcn.host.chip_driver import ChipBackend
from mixgcn.host.device import (
    DeviceError,
    ProtocolError,
    TimeoutPolicy,
    recv_message,
    send_message,
)

TINY = CHIP_PRESETS["tiny"]
GOLDEN = GoldenBackend(NumberFormat(16, 48))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _hanging_batch(chip: ChipBackend) -> list[int]:
    """A LOAD from the exchange port on a chip whose exchange FIFO nothing fills: it
    never completes."""
    return [chip.descriptor(Unit.LOAD, bank=0, rows=50, from_xchg=1)]


# ------------------------------------------------------------------------- messages


def test_messages_round_trip():
    a, b = socket.socketpair()
    with a, b:
        words = np.arange(24, dtype=np.uint8).reshape(3, 8)
        send_message(a, dict(op="write", addr=7, count=3), words)
        send_message(a, dict(op="counters"))
        assert recv_message(b)[0] == dict(op="write", addr=7, count=3)
        assert recv_message(b) == (dict(op="counters"), b"")
        a.sendall(b"JUNK" + bytes(8))
        with pytest.raises(ProtocolError, match="not a device message"):
            recv_message(b)
        send_message(a, dict(op="x"))
        a.close()
        recv_message(b)
        assert recv_message(b) is None  # closed between messages


def test_a_message_cut_short_is_a_protocol_error():
    a, b = socket.socketpair()
    with b:
        with a:
            send_message(a, dict(op="write", addr=0, count=1), bytes(8))
            a.shutdown(socket.SHUT_WR)
        head = b.recv(14)  # take the header and part of the JSON away
        assert head.startswith(b"MXG1")
        with pytest.raises(ProtocolError):
            recv_message(b)


# ---------------------------------------------------------------------- chip servers


@pytest.fixture
def chip():
    from mixgcn.sim.chip.process import SimulatedChip

    device = SimulatedChip(TINY, name="chip 7 (tiny)")
    yield ChipBackend(device)
    device.close()


def _random_spmm(rng, n=60, k=50, f=9, density=0.2):
    s = sp.random_array((n, k), density=density, rng=rng, format="csr")
    s.data = rng.integers(-30000, 30000, s.nnz).astype(np.int64)
    return s, rng.integers(-30000, 30000, (k, f))


@pytest.mark.sim
def test_two_chip_servers_at_once_from_one_host(chip):
    """Two simulated chips, each driven from its own thread, at the same time: both
    results bit for bit, and their simulations overlapped in time."""
    from mixgcn.sim.chip.process import SimulatedChip

    other = ChipBackend(SimulatedChip(TINY, name="chip 8 (tiny)"))
    try:
        assert chip.device.pid != other.device.pid
        spans, errors = {}, []

        def work(backend, seed):
            try:
                rng = np.random.default_rng(seed)
                t0 = time.perf_counter()
                for _ in range(6):
                    s, x = _random_spmm(rng, n=600, k=2000, f=12, density=0.02)
                    got = backend.spmm(s, x, Stage(20), site="a")
                    want = GOLDEN.spmm(s, x, Stage(20))
                    assert np.array_equal(got.rows, want.rows)
                    assert got.stats == want.stats
                spans[seed] = (t0, time.perf_counter())
            except Exception as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(b, i)) for i, b in
                   enumerate((chip, other))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        (a0, a1), (b0, b1) = spans.values()
        assert a0 < b1 and b0 < a1, "the two chips did not run at the same time"
        assert chip.report().kernel_runs == other.report().kernel_runs == 6
    finally:
        other.close()
    assert _wait_gone(other.device.pid)


@pytest.mark.sim
def test_an_exception_in_the_server_is_one_line_naming_the_chip(chip):
    with pytest.raises(DeviceError, match=r"^chip 7 \(tiny\): writing 1 word at 300000 failed: "
                                          r"ValueError: memory words 300000..300000 lie outside"):
        chip.device.write(300000, np.zeros((1, chip.mem_bytes), dtype=np.uint8))
    # the server survives its error and keeps serving
    rng = np.random.default_rng(1)
    s, x = _random_spmm(rng)
    assert np.array_equal(chip.spmm(s, x, Stage(18)).rows, GOLDEN.spmm(s, x, Stage(18)).rows)


@pytest.mark.sim
def test_a_hung_chip_is_reported_at_the_end_of_its_cycle_budget(chip):
    t0 = time.perf_counter()
    with pytest.raises(DeviceError, match=r"chip 7 \(tiny\): running hang \(1 descriptors\) "
                                          r"failed: ChipHung: the chip completed 0 of 1 "
                                          r"descriptors within the batch's budget of 5,000"):
        chip.device.run(chip.descriptors(_hanging_batch(chip)), budget=5000, label="hang")
    assert time.perf_counter() - t0 < 10


@pytest.mark.sim
def test_a_server_killed_mid_batch(chip):
    pid = chip.device.pid
    threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(DeviceError, match=rf"^chip 7 \(tiny\): the simulator \(pid {pid}\) was "
                                          r"killed by SIGKILL while running hang \(1 descr"):
        chip.device.run(chip.descriptors(_hanging_batch(chip)), budget=10**12, label="hang")
    assert _wait_gone(pid)
    with pytest.raises(DeviceError, match="the simulator was stopped earlier"):
        chip.device.counters()


@pytest.mark.sim
def test_a_simulator_that_stops_answering_is_stopped():
    from mixgcn.sim.chip.process import SimulatedChip

    device = SimulatedChip(TINY, name="chip 9 (tiny)",
                           timeouts=TimeoutPolicy(base_seconds=1.5,
                                                  min_cycles_per_second=10**15))
    chip = ChipBackend(device)
    try:
        os.kill(device.pid, signal.SIGSTOP)  # frozen: it cannot answer
        with pytest.raises(DeviceError, match=r"chip 9 \(tiny\): the simulator \(pid \d+\) gave "
                                              r"no answer within 2 s while reading counters; "
                                              r"it was stopped"):
            chip.device.counters()
        assert _wait_gone(device.pid)
    finally:
        device.close()


HOST = textwrap.dedent("""
    import sys
    from mixgcn.gen.config import CHIP_PRESETS
    from mixgcn.hdl.chip import Unit
    from mixgcn.host.chip_driver import ChipBackend
    from mixgcn.sim.chip.process import SimulatedChip

    chips = [ChipBackend(SimulatedChip(CHIP_PRESETS["tiny"], name=f"chip {i}"))
             for i in range(2)]
    print(" ".join(str(c.device.pid) for c in chips), flush=True)
    hang = [chips[0].descriptor(Unit.LOAD, bank=0, rows=50, from_xchg=1)]
    chips[0].device.run(chips[0].descriptors(hang), budget=10**12, label="hang")
""")


@pytest.mark.sim
def test_no_server_outlives_a_host_killed_mid_batch():
    with subprocess.Popen([sys.executable, "-c", HOST], stdout=subprocess.PIPE,
                          text=True) as host:
        try:
            pids = [int(p) for p in host.stdout.readline().split()]
            assert len(pids) == 2 and all(_alive(p) for p in pids)
            time.sleep(1.0)  # chip 0 is in its batch, chip 1 waits for a request
        finally:
            host.kill()
    for pid in pids:
        assert _wait_gone(pid), f"chip server {pid} outlived its host"


@pytest.mark.sim
def test_a_server_killed_during_training_is_one_line_from_the_cli():
    cmd = [sys.executable, "-m", "mixgcn", "train", "--backend", "rtl", "--chip", "tiny",
           "--dataset", "synthetic:nodes=300", "--epochs", "100000"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as cli:
        try:
            for line in cli.stderr:  # wait for the chip to come up
                if "simulated chip ready" in line:
                    break
            time.sleep(1.0)  # and training to be under way
            with open(f"/proc/{cli.pid}/task/{cli.pid}/children") as f:
                (server,) = [int(p) for p in f.read().split()]
            os.kill(server, signal.SIGKILL)
            _, err = cli.communicate(timeout=60)
        finally:
            cli.kill()
    assert cli.returncode == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"mixgcn: chip 0 (tiny): the simulator (pid {server}) was killed "
                           "by SIGKILL while "), last
    assert "Traceback" not in err
    assert _wait_gone(server)


@pytest.mark.sim
def test_a_simulator_that_fails_to_start_says_why(monkeypatch):
    from mixgcn.sim.chip import process

    real = process.simulator_env

    def broken(top, module, results):  # a server module that cannot be imported
        return real(top, "mixgcn.sim.chip.no_such_server", results)

    monkeypatch.setattr(process, "simulator_env", broken)
    with pytest.raises(DeviceError, match=r"^chip 0 \(tiny\): the simulator \(pid \d+\) "
                                          r"exited (with status \d+ )?while starting; its log "
                                          r"says: .ModuleNotFoundError: No module named "
                                          r".mixgcn.sim.chip.no_such_server"):
        process.SimulatedChip(TINY, name="chip 0 (tiny)")


@pytest.mark.sim
def test_a_broken_exchange_contract_reaches_the_host_as_one_line(chip):
    """One batch in which both engines route rows into the exchange: the router holds
    the second, raises its error flag, and the host reports it in one line."""
    rng = np.random.default_rng(3)
    s, x = _random_spmm(rng, n=12, k=9, f=TINY.lanes)
    batch, _, _ = chip.layout_spmm(s, x, Stage(10))
    for addr, words in batch.writes:
        chip.device.write(addr, words)
    descs = []
    for d in batch.descs:
        f = chip.lay.desc_layout.from_bits(d)
        if Unit(f.unit) == Unit.SPMM:  # its rows into the exchange instead of memory
            d = chip.descriptor(Unit.SPMM, bank=int(f.bank), rows=int(f.rows),
                                src=int(f.src), src_len=int(f.src_len), to_xchg=1)
        descs.append(d)
    descs.append(chip.descriptor(Unit.GEMM, op=0, rows=12, k=1, m=1, src_len=12, b_len=1,
                                 to_xchg=1))
    with pytest.raises(DeviceError, match=r"^chip 7 \(tiny\): the exchange router stopped "
                                          r"two producers: both engines routed rows into "
                                          r"the exchange at once"):
        chip.run_descriptors(descs, "two producers")
