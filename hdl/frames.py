"""The board's end of the host link's frames (docs/link.md): a receiver that turns the
serial port's bytes into checked requests, and a transmitter that frames answers.

**Receiver.** Bytes in (``bytes``); for each frame, one ``header`` (seq, kind, length,
error) out, and when the frame is good its ``length`` payload bytes on ``payload``
after it. The payload is held in a memory until the CRC has been checked, so nothing
of a damaged frame ever reaches the board: its header comes out with ``error`` set
(``HEADER``: a bad check byte or a length over the limit, where seq and kind may be
damaged too; ``CRC``: the frame's CRC) and no payload. While a frame's header and
payload go out the receiver takes no bytes: the host sends its next request only
once it has the answer. Unlike the host's reader, after a bad frame the receiver
does not search the bytes it already took for another sync byte; it goes on from the
next byte (the host sends the lost request again).

**Transmitter.** A ``header`` (seq, kind, length) in, then ``length`` bytes on
``payload``; the frame's bytes out on ``bytes``, its check byte and CRC computed on
the way.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "MAX_PAYLOAD",
    "REQUEST_SYNC",
    "RESPONSE_SYNC",
    "FrameError",
    "FrameReceiver",
    "FrameTransmitter",
    "Op",
    "RequestHeader",
    "ResponseHeader",
    "Status",
    "crc16_step",
]

# docs/link.md; the host's end (host/link.py) takes them from here
REQUEST_SYNC, RESPONSE_SYNC = 0x5A, 0xA5
MAX_PAYLOAD = 4096  # bytes: the receiver holds a whole payload until its CRC is checked


class Op(enum.IntEnum):
    """What a request asks (its ``kind``)."""
    WRITE = 1   # payload: word address (4 bytes), then the words to write there
    READ = 2    # payload: word address (4 bytes), byte count (2 bytes); answer: the words
    RUN = 3     # payload: descriptors; answer, once the batch is done: status block, records
    STATUS = 4  # no payload; answer: the status block (counters, last batch, flags)


class Status(enum.IntEnum):
    """How a board answered (a response's ``kind``)."""
    OK = 0
    BAD_CHECKSUM = 1  # the request arrived damaged: send it again
    BAD_OP = 2        # no such operation
    BAD_LENGTH = 3    # a payload the operation cannot take (size, or a count out of range)
    BAD_ADDRESS = 4   # words past the end of the board's memory


class FrameError(enum.Enum, shape=2):
    NONE = 0
    HEADER = 1  # the check byte, or a length over the limit
    CRC = 2


def _crc16_terms() -> list[tuple[frozenset, frozenset]]:
    """For each bit of CRC-16/CCITT-FALSE after one byte: the bits of the CRC before
    and of the byte whose XOR it is (the CRC is linear over GF(2))."""
    # each bit as the set of ("c", i) / ("d", i) it is the XOR of
    bits = [{("c", i)} for i in range(16)]
    for i in range(8):
        bits[8 + i] = bits[8 + i] ^ {("d", i)}
    for _ in range(8):
        top = bits[15]
        bits = [set()] + bits[:15]
        for i in range(16):
            if (0x1021 >> i) & 1:
                bits[i] = bits[i] ^ top
    return [(frozenset(i for k, i in b if k == "c"), frozenset(i for k, i in b if k == "d"))
            for b in bits]


_CRC16_TERMS = _crc16_terms()


def crc16_step(crc, byte):
    """CRC-16/CCITT-FALSE after one more byte, as an expression: each bit the XOR of
    a few bits of the CRC and the byte (:func:`_crc16_terms`), not 8 unrolled steps."""
    out = []
    for c_bits, d_bits in _CRC16_TERMS:
        terms = [crc[i] for i in sorted(c_bits)] + [byte[i] for i in sorted(d_bits)]
        x = Const(0, 1)
        for t in terms:
            x = x ^ t
        out.append(x)
    return Cat(*out)


# what goes into an answer's frame, and what comes out of a request's (its error too)
ResponseHeader = data.StructLayout({"seq": 8, "kind": 8, "length": 16})
RequestHeader = data.StructLayout({"seq": 8, "kind": 8, "length": 16, "error": FrameError})


class FrameReceiver(wiring.Component):
    """See the module docstring."""

    def __init__(self, sync: int = REQUEST_SYNC, max_payload: int = MAX_PAYLOAD):
        if not 1 <= max_payload <= MAX_PAYLOAD:
            raise ValueError(f"max_payload must be in 1..{MAX_PAYLOAD}, got {max_payload!r}")
        self.sync, self.max_payload = sync, max_payload
        super().__init__({"bytes": In(stream.Signature(8)),
                          "header": Out(stream.Signature(RequestHeader)),
                          "payload": Out(stream.Signature(8)), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.buffer = buf = memory.Memory(shape=8, depth=self.max_payload, init=[])
        w, r = buf.write_port(), buf.read_port()
        head = Signal(ResponseHeader)
        error = Signal(FrameError)
        crc = Signal(16)
        crc_low = Signal(8)  # the frame's own CRC, its first byte
        count = Signal(range(self.max_payload + 1))  # payload bytes in, or out
        byte = self.bytes.payload
        take = self.bytes.valid & self.bytes.ready
        next_crc = crc16_step(crc, byte)
        m.d.comb += [self.header.payload.seq.eq(head.seq),
                     self.header.payload.kind.eq(head.kind),
                     self.header.payload.length.eq(head.length),
                     self.header.payload.error.eq(error),
                     w.addr.eq(count), w.data.eq(byte),
                     # the read port's data is the payload's output register: it
                     # moves only when a byte is read for the stream
                     r.en.eq(0), r.addr.eq(count), self.payload.payload.eq(r.data)]

        with m.FSM() as fsm:
            with m.State("sync"):
                m.d.comb += self.bytes.ready.eq(1)
                with m.If(take & (byte == self.sync)):
                    m.d.sync += crc.eq(0xFFFF)
                    m.next = "seq"
            for state, field, after in (("seq", head.seq, "kind"),
                                        ("kind", head.kind, "len0"),
                                        ("len0", head.length[:8], "len1"),
                                        ("len1", head.length[8:], "check")):
                with m.State(state):
                    m.d.comb += self.bytes.ready.eq(1)
                    with m.If(take):
                        m.d.sync += [field.eq(byte), crc.eq(next_crc)]
                        m.next = after
            with m.State("check"):
                m.d.comb += self.bytes.ready.eq(1)
                with m.If(take):
                    m.d.sync += [crc.eq(next_crc), count.eq(0)]
                    with m.If((byte != crc[:8]) | (head.length > self.max_payload)):
                        m.d.sync += error.eq(FrameError.HEADER)
                        m.next = "header"
                    with m.Elif(head.length == 0):
                        m.next = "crc0"
                    with m.Else():
                        m.next = "payload_in"
            with m.State("payload_in"):
                m.d.comb += [self.bytes.ready.eq(1), w.en.eq(take)]
                with m.If(take):
                    m.d.sync += [crc.eq(next_crc), count.eq(count + 1)]
                    with m.If(count + 1 == head.length):
                        m.next = "crc0"
            with m.State("crc0"):
                m.d.comb += self.bytes.ready.eq(1)
                with m.If(take):
                    m.d.sync += crc_low.eq(byte)
                    m.next = "crc1"
            with m.State("crc1"):
                m.d.comb += self.bytes.ready.eq(1)
                with m.If(take):
                    with m.If(Cat(crc_low, byte) != crc):
                        m.d.sync += error.eq(FrameError.CRC)
                    m.next = "header"
            with m.State("header"):
                m.d.comb += self.header.valid.eq(1)
                with m.If(self.header.ready):
                    with m.If((error == FrameError.NONE) & (head.length != 0)):
                        m.d.comb += [r.en.eq(1), r.addr.eq(0)]
                        m.d.sync += count.eq(1)
                        m.next = "payload_out"
                    with m.Else():
                        m.d.sync += error.eq(FrameError.NONE)
                        m.next = "sync"
            with m.State("payload_out"):
                m.d.comb += self.payload.valid.eq(1)
                with m.If(self.payload.ready):
                    with m.If(count == head.length):
                        m.next = "sync"
                    with m.Else():
                        m.d.comb += r.en.eq(1)
                        m.d.sync += count.eq(count + 1)
        # a frame going out (while one comes in, it waits for bytes: not busy)
        m.d.comb += self.busy.eq(fsm.ongoing("header") | fsm.ongoing("payload_out"))
        return m


class FrameTransmitter(wiring.Component):
    """See the module docstring."""

    def __init__(self, sync: int = RESPONSE_SYNC):
        self.sync = sync
        super().__init__({"header": In(stream.Signature(ResponseHeader)),
                          "payload": In(stream.Signature(8)),
                          "bytes": Out(stream.Signature(8)), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        head = Signal(ResponseHeader)
        crc = Signal(16)
        count = Signal(16)
        out = self.bytes
        sent = out.valid & out.ready

        def emit(value, after, *, crc_it=True):
            m.d.comb += [out.valid.eq(1), out.payload.eq(value)]
            with m.If(sent):
                if crc_it:
                    m.d.sync += crc.eq(crc16_step(crc, value))
                m.next = after

        with m.FSM() as fsm:
            with m.State("idle"):
                m.d.comb += self.header.ready.eq(1)
                with m.If(self.header.valid):
                    m.d.sync += [head.eq(self.header.payload), crc.eq(0xFFFF), count.eq(0)]
                    m.next = "sync"
            with m.State("sync"):
                emit(self.sync, "seq", crc_it=False)
            with m.State("seq"):
                emit(head.seq, "kind")
            with m.State("kind"):
                emit(head.kind, "len0")
            with m.State("len0"):
                emit(head.length[:8], "len1")
            with m.State("len1"):
                emit(head.length[8:], "check")
            with m.State("check"):
                emit(crc[:8], "payload")
                with m.If(sent & (head.length == 0)):
                    m.next = "crc0"
            with m.State("payload"):
                m.d.comb += [out.valid.eq(self.payload.valid), out.payload.eq(self.payload.payload),
                             self.payload.ready.eq(out.ready)]
                with m.If(sent):
                    m.d.sync += [crc.eq(crc16_step(crc, self.payload.payload)),
                                 count.eq(count + 1)]
                    with m.If(count + 1 == head.length):
                        m.next = "crc0"
            with m.State("crc0"):
                emit(crc[:8], "crc1", crc_it=False)
            with m.State("crc1"):
                emit(crc[8:], "idle", crc_it=False)
        m.d.comb += self.busy.eq(~fsm.ongoing("idle"))
        return m
