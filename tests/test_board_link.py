"""The chip on a board behind its host link, in simulation: the generated Verilog of
the whole board top (UART, frames, request executor, memory arbiter, chip, memory
model) under Verilator, reached through its serial line by the host's link
(docs/link.md).

Training over the link gives golden fixed16's weights; words written are read back
under random memory stalls; damaged, cut and lost frames are sent again and a ``RUN``
whose answer was lost runs once; requests the board must refuse are refused with the
status that names why, and nothing of them takes effect; a line that carries nothing
ends in one error naming the request."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.hdl.controller import Unit
from mixgcn.hdl.frames import REQUEST_SYNC, RESPONSE_SYNC, Op, Status
from mixgcn.hdl.host_link import LinkLayouts
from mixgcn.host.board import BoardDevice, batch_cuts
from mixgcn.host.cli import main
from mixgcn.host.device import DeviceError
from mixgcn.host.link import FrameReader, encode
from mixgcn.host.packing import from_ints

CHIP = CHIP_PRESETS["tiny"]
DIVISOR = 4  # 25 Mbaud on the ULX3S's 100 MHz: the fastest line the UART allows
BAUD = "25000000"


@pytest.fixture(scope="module")
def port():
    from mixgcn.sim.board.process import SimulatedSerialPort

    with SimulatedSerialPort(CHIP, divisor=DIVISOR) as p:
        yield p


class Faulty:
    """A serial port that spoils chosen ``write`` calls, counted from 0 (a device's
    first two open the link: ``STATUS`` with seq 0, then its own ``STATUS``): ``drop``
    loses a byte of the request, ``flip`` a bit of it, ``lose`` the board's answer,
    ``eat`` the whole request."""

    def __init__(self, port, faults: dict[int, str]):
        self.port, self.faults, self.calls = port, dict(faults), 0

    def write(self, data: bytes) -> None:
        fault = self.faults.pop(self.calls, None)
        self.calls += 1
        data = bytearray(data)
        if fault == "drop":
            del data[len(data) // 2]
        elif fault == "flip":
            data[len(data) // 2] ^= 0x10
        elif fault == "eat":
            return
        self.port.write(bytes(data))
        if fault == "lose":
            self.port.read(1 << 20, 0.0)

    def read(self, max_bytes: int, timeout: float) -> bytes:
        return self.port.read(max_bytes, timeout)

    @property
    def send_seconds(self) -> float:  # the simulated port's: how long a batch may run
        return self.port.send_seconds

    @send_seconds.setter
    def send_seconds(self, seconds: float) -> None:
        self.port.send_seconds = seconds


def _device(port, faults=None) -> BoardDevice:
    serial = Faulty(port, faults or {})
    return BoardDevice(CHIP, serial, name="board", clock_hz=100e6, timeout=0.05)


def _fences(n: int) -> np.ndarray:
    lay = LinkLayouts(CHIP)
    word = lay.chip.desc_layout.const({"unit": Unit.FENCE, "fence": 1}).as_bits()
    return from_ints([word] * n, lay.desc_bytes)


@pytest.mark.sim
def test_training_over_the_link_matches_golden(tmp_path):
    args = ["--dataset", "synthetic:nodes=120,features=24", "--epochs", "1", "--seed", "3"]
    out = tmp_path / "board.json"
    assert main(["train", "--quiet", "--backend", "board", "--board", "ulx3s-85f",
                 "--port", "sim", "--baud", BAUD, "--chip", "tiny", "--json", str(out),
                 *args]) == 0
    board = json.loads(out.read_text())
    gold = tmp_path / "golden.json"
    assert main(["train", "--quiet", "--backend", "golden", "--precision", "fixed16",
                 "--json", str(gold), *args]) == 0
    assert board["weights_sha256"] == json.loads(gold.read_text())["weights_sha256"]
    assert board["backend"] == "board" and board["chip"] == "tiny" and board["cycles"] > 0
    assert "chip_words_read" not in board  # the board does not count its memory's words


@pytest.mark.sim
def test_words_written_are_read_back_under_memory_stalls(port):
    dev = _device(port)
    ll = dev.layouts
    rng = np.random.default_rng(5)
    words = rng.integers(0, 256, (3 * ll.max_write_words + 7, ll.mem_bytes), dtype=np.uint8)
    port.stalls(read=140, write=140)
    try:
        dev.write(1000, words)
        assert np.array_equal(dev.read(1000, len(words)), words)
        assert np.array_equal(dev.read(1003, 5), words[3:8])
        # the last word of the memory
        dev.write(ll.memory_words - 1, words[:1])
        assert np.array_equal(dev.read(ll.memory_words - 1, 1), words[:1])
    finally:
        port.stalls(0, 0)
    assert dev.link.resent == 0


@pytest.mark.sim
@pytest.mark.parametrize("fault", ["drop", "flip", "eat"])
def test_a_spoiled_request_is_sent_again(port, fault):
    ll = LinkLayouts(CHIP)
    words = np.random.default_rng(6).integers(0, 256, (40, ll.mem_bytes), dtype=np.uint8)
    dev = _device(port, {2: fault})  # write calls 0 and 1 open the link, 2 is the WRITE
    dev.write(2000 + 100 * len(fault), words)
    assert dev.link.resent >= 1
    assert np.array_equal(dev.read(2000 + 100 * len(fault), len(words)), words)


@pytest.mark.sim
def test_a_lost_answer_is_asked_again_and_a_run_runs_once(port):
    ll = LinkLayouts(CHIP)
    words = np.random.default_rng(7).integers(0, 256, (9, ll.mem_bytes), dtype=np.uint8)
    dev = _device(port, {3: "lose"})  # 2 is the WRITE, 3 the READ
    dev.write(3000, words)
    assert np.array_equal(dev.read(3000, len(words)), words)
    assert dev.link.resent == 1
    # the RUN's answer is lost: sent again, it is answered from the board's memory;
    # had it run twice, its counters would show 10 descriptors issued
    dev = _device(port, {2: "lose"})
    result = dev.run(_fences(5), budget=10_000)
    assert dev.link.resent == 1
    assert len(result.status) == 5 and result.counters["issued"] == 5
    assert [r.unit for r in result.status] == [Unit.FENCE] * 5
    before = dev.counters()["issued"]
    dev.run(_fences(2), budget=10_000)
    assert dev.counters()["issued"] == before + 2


def _raw(port, seq: int, kind: int, payload: bytes = b""):
    """One request's answer (status, payload) straight from the line."""
    port.write(encode(REQUEST_SYNC, seq, kind, payload))
    frames = FrameReader(RESPONSE_SYNC).feed(port.read(1 << 20, 0.0))
    assert len(frames) == 1, frames
    assert frames[0].seq == seq
    return frames[0].kind, frames[0].payload


@pytest.mark.sim
def test_the_board_refuses_what_it_cannot_do_and_does_none_of_it(port):
    ll = LinkLayouts(CHIP)
    mb, top = ll.mem_bytes, ll.memory_words
    assert _raw(port, 0, Op.STATUS)[0] == Status.OK  # opens; clears the kept answer
    word = bytes(range(mb))
    assert _raw(port, 1, Op.WRITE, (50).to_bytes(4, "little") + word)[0] == Status.OK
    cases = [
        (9, b"", Status.BAD_OP),
        (Op.WRITE, (50).to_bytes(4, "little") + b"\xff" * (mb + 1), Status.BAD_LENGTH),
        (Op.WRITE, (50).to_bytes(3, "little"), Status.BAD_LENGTH),
        (Op.WRITE, (top - 1).to_bytes(4, "little") + b"\xff" * (2 * mb), Status.BAD_ADDRESS),
        (Op.READ, (0).to_bytes(4, "little") + (0).to_bytes(2, "little"), Status.BAD_LENGTH),
        (Op.READ, (0).to_bytes(4, "little") + (mb + 1).to_bytes(2, "little"),
         Status.BAD_LENGTH),
        (Op.READ, (top - 1).to_bytes(4, "little") + (2 * mb).to_bytes(2, "little"),
         Status.BAD_ADDRESS),
        (Op.READ, (0).to_bytes(4, "little"), Status.BAD_LENGTH),
        (Op.RUN, b"", Status.BAD_LENGTH),
        (Op.RUN, b"\x00" * (ll.desc_bytes + 1), Status.BAD_LENGTH),
        (Op.STATUS, b"\x00", Status.BAD_LENGTH),
    ]
    issued = None
    for seq, (kind, payload, want) in enumerate(cases, start=2):
        status, body = _raw(port, seq, kind, payload)
        assert (status, body) == (want, b""), (kind, payload[:8], status)
        status, block = _raw(port, seq + 100, Op.STATUS)
        assert status == Status.OK
        now = int.from_bytes(block[8:16], "little")  # descriptors issued
        assert issued is None or now == issued, "a refused RUN ran"
        issued = now
    # nothing of the refused WRITEs landed
    status, data = _raw(port, 200, Op.READ,
                        (50).to_bytes(4, "little") + mb.to_bytes(2, "little"))
    assert (status, data) == (Status.OK, word)
    # a damaged request is answered BAD_CHECKSUM with its seq, and the kept answer is
    # still the last one: the same READ again is answered from it
    frame = bytearray(encode(REQUEST_SYNC, 201, Op.STATUS, b""))
    frame[-1] ^= 1
    port.write(bytes(frame))
    [bad] = FrameReader(RESPONSE_SYNC).feed(port.read(1 << 20, 0.0))
    assert (bad.seq, bad.kind, bad.payload) == (201, Status.BAD_CHECKSUM, b"")
    assert _raw(port, 200, Op.READ, b"\x00" * 6) == (Status.OK, word)  # replayed


@pytest.mark.sim
def test_a_dead_line_ends_in_one_error_naming_the_request(port):
    dev = _device(port)
    port.cut(True)
    try:
        with pytest.raises(DeviceError, match=r"board: reading counters: STATUS \(seq \d+\): "
                                              r"no good answer after 4 tries \(no answer"):
            dev.counters()
    finally:
        port.cut(False)
    dev = _device(port, {2: "eat", 3: "eat", 4: "eat", 5: "eat"})
    with pytest.raises(DeviceError, match=r"writing 1 words at 7: WRITE"):
        dev.write(7, np.zeros((1, LinkLayouts(CHIP).mem_bytes), dtype=np.uint8))
    assert dev.counters()["cycles"] > 0  # the link goes on after


def test_batches_are_cut_only_where_the_exchange_is_balanced():
    ll = LinkLayouts(CHIP)
    lay = ll.chip.desc_layout

    def d(**f):
        return lay.const({"unit": Unit.GEMM, **f}).as_bits()

    n = ll.max_batch
    alone = [d(rows=4)] * (2 * n + 3)
    assert batch_cuts(ll, alone) == [0, n, 2 * n]
    # a producer of 10 rows at n - 1 whose consumer is at n: the cut moves before them
    pair = [d(rows=4)] * (n - 1) + [d(rows=10, to_xchg=1), d(rows=10, from_xchg=1)] + [d()] * 5
    assert batch_cuts(ll, pair) == [0, n - 1]
    # two producers into one consumer: no cut between them
    two = [d()] * (n - 2) + [d(rows=3, to_xchg=1), d(rows=3, to_xchg=1),
                             d(rows=6, from_xchg=1)]
    assert batch_cuts(ll, two) == [0, n - 2]
    with pytest.raises(ValueError, match=r"a RUN holds at most \d+ descriptors"):
        batch_cuts(ll, [d(rows=1, to_xchg=1)] * (n + 1) + [d(rows=n + 1, from_xchg=1)])
    assert batch_cuts(ll, []) == [0]
