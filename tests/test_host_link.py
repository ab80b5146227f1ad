"""The host link's frames and the host's end of it (host/link.py), against a board's
end written in the test from docs/link.md, with bytes lost and damaged on the way."""

from __future__ import annotations

import random

import pytest

from mixgcn.host.link import (
    MAX_PAYLOAD,
    REQUEST_SYNC,
    RESPONSE_SYNC,
    FrameError,
    FrameReader,
    Link,
    LinkError,
    Op,
    Status,
    crc16,
    encode,
)


def test_crc_is_ccitt_false():
    assert crc16(b"123456789") == 0x29B1
    assert crc16(b"") == 0xFFFF


def test_frames_survive_noise_and_any_split():
    rng = random.Random(5)
    frames = [encode(RESPONSE_SYNC, s, s % 3, rng.randbytes(rng.randrange(0, 300)))
              for s in range(40)]
    # garbage between frames (sync bytes in it too), a damaged frame, a frame cut short
    stream = bytearray(b"\x00\xA5\x01")
    damaged = bytearray(encode(RESPONSE_SYNC, 99, 0, b"damaged"))
    damaged[6] ^= 0x10
    for i, f in enumerate(frames):
        stream += f
        if i == 10:
            stream += damaged
        if i == 20:
            stream += f[:7]  # lost its tail: the next frame's sync follows
    reader = FrameReader(RESPONSE_SYNC)
    got = []
    pos = 0
    while pos < len(stream):  # fed in random pieces
        n = rng.randrange(1, 50)
        got += reader.feed(bytes(stream[pos:pos + n]))
        pos += n
    assert [(f.seq, f.kind, f.payload) for f in got] == \
        [(s, s % 3, f[6:-2]) for s, f in enumerate(frames)]
    assert reader.bad >= 2  # the damaged frame and the cut one
    assert reader.skipped > 0


def test_a_frame_longer_than_the_limit_is_skipped():
    reader = FrameReader(REQUEST_SYNC)
    head = bytes([1, 1]) + (MAX_PAYLOAD + 1).to_bytes(2, "little")
    huge = bytes([REQUEST_SYNC]) + head + bytes([crc16(head) & 0xFF])
    good = encode(REQUEST_SYNC, 2, 4)
    assert [f.seq for f in reader.feed(huge + good)] == [2]
    assert reader.bad == 1


def test_a_damaged_length_is_caught_at_once():
    frame = bytearray(encode(REQUEST_SYNC, 7, 4))
    frame[4] ^= 0x01  # length 256: without the header check the reader would wait
    reader = FrameReader(REQUEST_SYNC)
    assert reader.feed(bytes(frame)) == [] and reader.bad == 1
    assert [f.seq for f in reader.feed(encode(REQUEST_SYNC, 8, 4))] == [8]


@pytest.mark.parametrize(("args", "message"), [
    ((0x00, 1, 1), "sync must be 0x5A or 0xA5, got 0"),
    ((REQUEST_SYNC, 256, 1), r"seq must be a byte \(0..255\), got 256"),
    ((REQUEST_SYNC, 1, -1), r"kind must be a byte \(0..255\), got -1"),
    ((REQUEST_SYNC, True, 1), r"seq must be a byte \(0..255\), got True"),
    ((REQUEST_SYNC, 1, 1, bytes(MAX_PAYLOAD + 1)), "payload of 4,097 bytes: at most 4,096"),
])
def test_bad_fields_are_refused_naming_them(args, message):
    with pytest.raises(FrameError, match=message):
        encode(*args)


class Board:
    """A board's end as docs/link.md says: answers each request once; a request again
    with the last answered seq gets that answer again, not carried out twice; seq 0
    clears that memory. ``lose_answers`` / ``damage_requests`` / ``damage_answers``:
    how many of each go wrong, the first ones."""

    def __init__(self, lose_answers=0, damage_requests=0, damage_answers=0, status=None):
        self.reader = FrameReader(REQUEST_SYNC)
        self.memory = bytearray(64)
        self.runs = 0
        self.last = None  # (seq, answer bytes)
        self.out = bytearray()
        self.lose, self.damage_in, self.damage_out = lose_answers, damage_requests, damage_answers
        self.status = status

    def write(self, data: bytes) -> None:  # the host's bytes arrive
        data = bytearray(data)
        if self.damage_in:
            self.damage_in -= 1
            data[-3] ^= 0x01
        frames = self.reader.feed(bytes(data))
        if not frames and self.reader.bad:
            self.reader.bad = 0  # a damaged request: say so
            self.out += encode(RESPONSE_SYNC, data[1], Status.BAD_CHECKSUM)
        for f in frames:
            if f.seq != 0 and self.last and self.last[0] == f.seq:
                answer = self.last[1]
            else:
                answer = encode(RESPONSE_SYNC, f.seq, *self._carry_out(f))
                self.last = (f.seq, answer)
            self._send(answer)

    def _carry_out(self, f):
        if self.status is not None:
            return self.status, b""
        if f.kind == Op.WRITE:
            addr = int.from_bytes(f.payload[:4], "little")
            self.memory[addr:addr + len(f.payload) - 4] = f.payload[4:]
            return Status.OK, b""
        if f.kind == Op.READ:
            addr = int.from_bytes(f.payload[:4], "little")
            n = int.from_bytes(f.payload[4:6], "little")
            return Status.OK, bytes(self.memory[addr:addr + n])
        if f.kind == Op.RUN:
            self.runs += 1
            return Status.OK, b""
        return Status.OK, b"status"

    def _send(self, answer: bytes) -> None:
        if self.lose:
            self.lose -= 1
            return
        answer = bytearray(answer)
        if self.damage_out:
            self.damage_out -= 1
            answer[-1] ^= 0x80
        self.out += answer

    def read(self, n: int, timeout: float) -> bytes:
        data, self.out = bytes(self.out[:n]), self.out[n:]
        return data


def _link(board, **kwargs):
    return Link(board.write, board.read, timeout=kwargs.pop("timeout", 0.02), **kwargs)


def test_requests_are_answered_and_a_retry_never_runs_twice():
    board = Board(lose_answers=2)  # the STATUS that opens the link, then the RUN's
    link = _link(board)
    assert link.request(Op.RUN) == b""
    assert board.runs == 1 and link.resent == 2 and link.seq == 1
    link.request(Op.WRITE, (8).to_bytes(4, "little") + b"abcdef")
    assert link.request(Op.READ, (8).to_bytes(4, "little") + (6).to_bytes(2, "little")) \
        == b"abcdef"


def test_damage_either_way_is_resent():
    # the opening STATUS arrives damaged (the board says so), then its answer does
    board = Board(damage_requests=1, damage_answers=1)
    link = _link(board)
    assert link.request(Op.RUN) == b""
    assert link.resent == 2 and board.runs == 1


def test_a_new_host_does_not_get_the_last_hosts_answer():
    board = Board()
    first = _link(board)
    first.request(Op.RUN)  # seq 1
    second = _link(board)
    second.request(Op.RUN)  # seq 1 again, after seq 0 cleared the board's memory
    assert board.runs == 2


def test_sequence_numbers_skip_zero_when_they_wrap():
    board = Board()
    link = _link(board)
    seen = []
    for _ in range(300):
        link.request(Op.RUN)
        seen.append(link.seq)
    assert 0 not in seen and seen[254] == 255 and seen[255] == 1
    assert board.runs == 300


def test_no_answer_after_every_retry_is_one_clear_error():
    board = Board(lose_answers=10)
    link = _link(board, retries=2)
    with pytest.raises(LinkError, match=r"STATUS \(seq 0\): no good answer after 3 tries "
                                        r"\(no answer, no answer, no answer\)"):
        link.request(Op.RUN)


def test_a_refusal_is_not_retried():
    link = _link(Board(status=Status.BAD_OP))
    with pytest.raises(LinkError, match=r"STATUS \(seq 0\): the board answered .*BAD_OP"):
        link.request(Op.STATUS)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(timeout=0), "time-out must be positive, got 0"),
    (dict(retries=-1), "retries must be an integer >= 0, got -1"),
])
def test_bad_link_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _link(Board(), **kwargs)
