"""The board's end of the host link: requests carried out on the chip and its memory
(docs/link.md).

::

    rx ─▶ UARTReceiver ─▶ FrameReceiver ─▶ RequestExecutor ─▶ FrameTransmitter ─▶ UART ─▶ tx
                                            │      │    ▲
              memory: a read and a write ◀──┘      ▼    │ status records, counters
              channel (MemoryArbiter)          chip (descriptors)

:class:`RequestExecutor` takes each checked request from the frame receiver, carries
it out and frames one answer:

- ``WRITE`` — the payload's words go to the memory at the word address it names;
- ``READ`` — the words at an address come back as the answer;
- ``RUN`` — the payload's descriptors are gathered into a descriptor memory first, then
  offered to the chip one a cycle, as the simulation's harness offers a batch, so a
  batch's cycles do not depend on the serial port; the answer, once every descriptor's
  status record is in, is the status block then the records;
- ``STATUS`` — the status block: the chip's counters, the last batch's cycles, flags.

Every answer is built in an answer memory before it is sent. The answer stays there
with its ``seq``: a request that arrives again with that ``seq`` (the host retrying
after a lost answer) gets the same answer and is not carried out again. ``seq`` 0
clears it and is not kept (docs/link.md, "Retries"). A request that arrived damaged
is answered ``BAD_CHECKSUM`` and does not touch the kept answer.

Checks come before any effect: a payload whose size does not suit its operation is
answered ``BAD_LENGTH``, words past the memory's end ``BAD_ADDRESS``, an unknown
operation ``BAD_OP`` — nothing written, nothing run.

The executor uses the memory only while no batch runs (a ``RUN`` is answered after its
last status record), so :class:`MemoryArbiter` simply hands one read and one write
channel of the memory to it while ``owner`` says so, and to the chip otherwise.

:class:`HostLink` joins the serial port, the frames and the executor.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import ChipConfig
from mixgcn.hdl.chip import ChipCounters, ChipLayouts
from mixgcn.hdl.frames import (
    MAX_PAYLOAD,
    FrameError,
    FrameReceiver,
    FrameTransmitter,
    Op,
    RequestHeader,
    ResponseHeader,
    Status,
)
from mixgcn.hdl.memport import (
    READ_CHANNELS,
    WRITE_CHANNELS,
    MemoryBus,
    ReadChannel,
    WriteChannel,
)
from mixgcn.hdl.router import RouterError
from mixgcn.hdl.timing import SkidBuffer, one_hot, output_register
from mixgcn.hdl.uart import UARTReceiver, UARTTransmitter

__all__ = ["ADDRESS_BYTES", "COUNTER_BYTES", "HostLink", "LinkLayouts", "LinkedChip",
           "MemoryArbiter", "RequestExecutor"]

ADDRESS_BYTES = 4  # a WRITE's and a READ's word address
COUNTER_BYTES = 8  # each counter in the status block, and the last batch's cycles


class LinkLayouts:
    """What the link's payloads hold for a chip configuration: word sizes in bytes, the
    status block (:attr:`counters` of :attr:`COUNTER_BYTES` each in that order, the last
    batch's cycles, one byte of flags: bit 0 the chip is idle, bit 1 and 2 its router's
    ``producers`` and ``consumers`` errors) and how many words or descriptors one
    request may carry."""

    def __init__(self, config: ChipConfig):
        lay = ChipLayouts(config)
        self.chip = lay
        self.mem_bytes = -(-lay.mem_width // 8)
        self.desc_bytes = -(-lay.desc_layout.size // 8)
        self.status_bytes = -(-lay.status_layout.size // 8)
        counters = ChipCounters(config.sae.counter_width)
        self.counters = tuple("_".join(path) for path, _, _ in counters.flatten(
            counters.create()))
        self.block_bytes = COUNTER_BYTES * (len(self.counters) + 1) + 1
        self.max_write_words = (MAX_PAYLOAD - ADDRESS_BYTES) // self.mem_bytes
        self.max_read_words = MAX_PAYLOAD // self.mem_bytes
        self.max_batch = min(MAX_PAYLOAD // self.desc_bytes,
                             (MAX_PAYLOAD - self.block_bytes) // self.status_bytes)
        self.memory_words = 1 << config.addr_width


class MemoryArbiter(wiring.Component):
    """The memory's channels (``memory``, as the chip's memory port would drive them)
    shared between the chip (``chip``) and the executor (``host``: one read channel, one
    write channel, in place of the chip's ``x`` and ``sae``) while ``owner`` is high.
    The switch needs no state: the executor owns the memory only while no batch runs
    and gives it back only once its last read has come back."""

    def __init__(self, addr_width: int, mem_width: int):
        super().__init__({
            "chip": In(MemoryBus(addr_width, mem_width)),
            "host_read": In(ReadChannel(addr_width, mem_width)),
            "host_write": In(WriteChannel(addr_width, mem_width)),
            "owner": In(1),
            "memory": Out(MemoryBus(addr_width, mem_width)),
        })

    def elaborate(self, platform):
        m = Module()
        # the other channels pass straight through
        for name in READ_CHANNELS:
            if name != "x":
                theirs, out = getattr(self.chip, name), getattr(self.memory, name)
                m.d.comb += [out.req.valid.eq(theirs.req.valid),
                             out.req.payload.eq(theirs.req.payload),
                             theirs.req.ready.eq(out.req.ready),
                             theirs.resp.valid.eq(out.resp.valid),
                             theirs.resp.payload.eq(out.resp.payload)]
        for name in WRITE_CHANNELS:
            if name != "sae":
                theirs, out = getattr(self.chip, name).wr, getattr(self.memory, name).wr
                m.d.comb += [out.valid.eq(theirs.valid), out.payload.eq(theirs.payload),
                             theirs.ready.eq(out.ready)]
        mine, theirs, out = self.host_read, self.chip.x, self.memory.x
        m.d.comb += [
            out.req.valid.eq(Mux(self.owner, mine.req.valid, theirs.req.valid)),
            out.req.payload.eq(Mux(self.owner, mine.req.payload, theirs.req.payload)),
            mine.req.ready.eq(self.owner & out.req.ready),
            theirs.req.ready.eq(~self.owner & out.req.ready),
            mine.resp.valid.eq(self.owner & out.resp.valid),
            theirs.resp.valid.eq(~self.owner & out.resp.valid),
            mine.resp.payload.eq(out.resp.payload), theirs.resp.payload.eq(out.resp.payload),
        ]
        mine, theirs, out = self.host_write.wr, self.chip.sae.wr, self.memory.sae.wr
        m.d.comb += [
            out.valid.eq(Mux(self.owner, mine.valid, theirs.valid)),
            out.payload.eq(Mux(self.owner, mine.payload.as_value(), theirs.payload.as_value())),
            mine.ready.eq(self.owner & out.ready),
            theirs.ready.eq(~self.owner & out.ready),
        ]
        return m


class ConstantDivider(wiring.Component):
    """``x // divisor`` and ``x % divisor`` for a ``width``-bit ``x``, a bit a cycle
    (restoring division): ``start`` (a cycle) takes ``x``; ``busy`` from the next cycle
    until ``quotient`` and ``remainder`` hold the result, ``width`` cycles later. One
    comparator and one subtractor as wide as the divisor: a division in one cycle is a
    chain of ``width`` of them (on an ECP5 it was the host link's slowest path, 30 ns),
    and the executor divides once a request."""

    def __init__(self, width: int, divisor: int):
        if divisor < 1:
            raise ValueError(f"a divisor must be positive, got {divisor}")
        self.width, self.divisor = width, divisor
        super().__init__({"start": In(1), "x": In(width), "busy": Out(1),
                          "quotient": Out(width), "remainder": Out(range(divisor))})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        rest = Signal(self.width)  # the dividend's bits not yet brought down
        steps = Signal(range(self.width + 1))
        partial = Signal(range(2 * d))  # the remainder with the next bit brought down
        m.d.comb += partial.eq(Cat(rest[-1], self.remainder))
        with m.If(self.start):
            m.d.sync += [rest.eq(self.x), steps.eq(self.width), self.quotient.eq(0),
                         self.remainder.eq(0), self.busy.eq(1)]
        with m.Elif(self.busy):
            fits = partial >= d
            m.d.sync += [rest.eq(rest << 1), steps.eq(steps - 1),
                         self.quotient.eq(Cat(fits, self.quotient)),
                         self.remainder.eq(Mux(fits, partial - d, partial)),
                         self.busy.eq(steps != 1)]
        return m


class RequestExecutor(wiring.Component):
    """See the module docstring."""

    def __new__(cls, config, *args, **kwargs):
        if not isinstance(config, ChipConfig):
            raise TypeError(f"expected a ChipConfig, got {config!r}")
        return super().__new__(cls)

    def __init__(self, config: ChipConfig):
        self.config = config
        self.layouts = ll = LinkLayouts(config)
        lay, aw = ll.chip, config.addr_width
        super().__init__({
            "request": In(stream.Signature(RequestHeader)),
            "request_payload": In(stream.Signature(8)),
            "answer": Out(stream.Signature(ResponseHeader)),
            "answer_payload": Out(stream.Signature(8)),
            "read": Out(ReadChannel(aw, lay.mem_width)),
            "write": Out(WriteChannel(aw, lay.mem_width)),
            "owner": Out(1),
            "desc": Out(stream.Signature(lay.desc_layout)),
            "status": In(stream.Signature(lay.status_layout)),
            "counters": In(ChipCounters(config.sae.counter_width)),
            "idle": In(1), "error": In(RouterError), "busy": Out(1),
        })

    def elaborate(self, platform):
        ll, c = self.layouts, self.config
        lay, aw = ll.chip, c.addr_width
        m = Module()

        # ---- the answer memory: the answer being built, then kept for a retry
        m.submodules.answers = answers = memory.Memory(shape=8, depth=MAX_PAYLOAD, init=[])
        aw_port, ar_port = answers.write_port(), answers.read_port()
        # ---- the descriptors of a RUN, gathered before the batch starts
        m.submodules.descs = descs = memory.Memory(shape=lay.desc_layout.size,
                                                    depth=ll.max_batch, init=[])
        dw_port, dr_port = descs.write_port(), descs.read_port()
        # a descriptor is written a cycle after it is whole, from registers that drive
        # nothing else: the gathering's flags then stay beside the state machine (when
        # they drove the write enable, the `ecp5` link top's slowest path ran from the
        # state machine to the block RAM and back, docs/boards.md)
        desc_write = Signal()
        desc_write_word = Signal(lay.desc_layout.size)
        desc_write_at = Signal(range(ll.max_batch))
        m.d.comb += [dw_port.addr.eq(desc_write_at), dw_port.data.eq(desc_write_word),
                     dw_port.en.eq(desc_write)]
        m.d.sync += desc_write.eq(0)

        head = Signal(RequestHeader)
        # (signals declared one to a line: amaranth names only those, and the tools'
        # timing reports speak of them by name)
        kept_seq = Signal(8)
        kept_valid = Signal()
        send_seq = Signal(8)
        send_kind = Signal(8)
        send_len = Signal(16)
        kept_kind = Signal(8)
        kept_len = Signal(16)
        keep = Signal()  # the answer being built becomes the kept one

        # payload bytes in: shift registers filled from the top, little-endian
        take = self.request_payload.valid & self.request_payload.ready
        byte = self.request_payload.payload
        left = Signal(16)  # payload bytes still to take
        # whether ``left`` is 0 or 1, kept in registers beside it: the checks of a byte
        # taken look at these, not at a 16-bit comparison (hdl/timing.py's reason)
        none_left = Signal()
        one_left = Signal()

        def count_down():
            m.d.sync += [left.eq(left - 1), none_left.eq(one_left), one_left.eq(left == 2)]
        addr_in = Signal(8 * 4)
        word_in = Signal(8 * ll.mem_bytes)
        desc_in = Signal(8 * ll.desc_bytes)
        count_in = Signal(16)
        got = Signal(range(max(ll.mem_bytes, ll.desc_bytes) + 1))  # bytes of this word
        # a whole memory word / descriptor gathered (got == its bytes): registers beside
        # the count, as they steer the gathering registers' loads (a comparison in front
        # of them was the link top's slowest path)
        word_full = Signal()
        desc_full = Signal()

        def clear_got():
            m.d.sync += [got.eq(0), word_full.eq(0), desc_full.eq(0)]

        # A byte taken goes into its word (or descriptor) a cycle later, from registers:
        # the word's flip-flops (256 on `ecp5`) load on a flip-flop of their own, not on the
        # "byte taken" logic the flags use (ABC shared one LUT between the two, placed
        # among those flip-flops, and the `ecp5` link top's slowest path went through
        # it: docs/boards.md). A word is whole once its flag is set and its last byte
        # is in: ``word_full & ~shift_word``.
        byte_in = Signal(8)
        shift_word = Signal()
        shift_desc = Signal()
        m.d.sync += [byte_in.eq(byte), shift_word.eq(0), shift_desc.eq(0)]
        with m.If(shift_word):
            m.d.sync += word_in.eq(Cat(word_in[8:], byte_in))
        with m.If(shift_desc):
            m.d.sync += desc_in.eq(Cat(desc_in[8:], byte_in))

        def take_into(shift):
            """Take the payload's next byte into the word ``shift`` loads."""
            m.d.comb += self.request_payload.ready.eq(1)
            with m.If(take):
                m.d.sync += shift.eq(1)
                # whole once this byte is the last: ``got`` compared before its
                # increment, so no adder sits in front of the flags (one did on the
                # `ecp5` link top's slowest path, docs/boards.md)
                m.d.sync += [got.eq(got + 1), word_full.eq(got == ll.mem_bytes - 1),
                             desc_full.eq(got == ll.desc_bytes - 1)]
                count_down()

        def drop_payload():
            """Take and drop what is left of the payload; True once it is all taken."""
            m.d.comb += self.request_payload.ready.eq(~none_left)
            with m.If(take):
                count_down()
            return none_left | (take & one_left)

        # bytes out into the answer memory: a memory word or a status record through a
        # shift register emptied from the bottom, or the status block (below)
        ser_width = 8 * max(ll.mem_bytes, ll.status_bytes)
        ser = Signal(ser_width)
        ser_left = Signal(range(ser_width // 8 + 1))
        ser_empty = Signal(init=1)  # ser_left == 0, a register: it steers the loads below
        ans_addr = Signal(range(MAX_PAYLOAD + 1))
        with m.If(~ser_empty):
            m.d.sync += [ser.eq(ser >> 8), ser_left.eq(ser_left - 1), ans_addr.eq(ans_addr + 1),
                         ser_empty.eq(ser_left == 1)]

        waddr = Signal(aw + 1)  # this request's next memory word (WRITE, READ)
        words = Signal(16)  # words still to write or read
        index = Signal(range(ll.max_batch + 1))  # descriptors in, offered, recorded
        batch = Signal(range(ll.max_batch + 1))
        offered = Signal(range(ll.max_batch + 1))
        elapsed = Signal(COUNTER_BYTES * 8)
        # a RUN's answer length, summed as its descriptors come (not a multiplier after)
        run_length = Signal(16)
        have = Signal()  # a memory read's word waits on its stream

        def answer(kind, length=0, kept=True):
            m.d.sync += [send_kind.eq(kind), send_len.eq(length), keep.eq(kept)]

        # the status block (LinkLayouts): its values snapped in one cycle (the chip's
        # cycle counter runs on), then written a byte a cycle, picked by its index. In
        # the shift register it made that 89 bytes wide, loaded from four sources: the
        # link top's slowest path (docs/boards.md)
        block = Signal(8 * ll.block_bytes)
        counter_values = [v for _, _, v in self.counters.signature.flatten(self.counters)]
        m.d.comb += block.eq(Cat(*(Cat(v, Const(0, 8 * COUNTER_BYTES - len(v)))
                                   for v in counter_values),
                                 elapsed, self.idle, self.error.as_value()))
        snapshot = Signal.like(block)
        block_at = Signal(range(ll.block_bytes))
        block_writing = Signal()
        with m.If(~block_writing):
            m.d.sync += snapshot.eq(block)
        with m.Else():
            m.d.sync += [block_at.eq(block_at + 1), ans_addr.eq(ans_addr + 1)]
            with m.If(block_at == ll.block_bytes - 1):
                m.d.sync += block_writing.eq(0)

        def write_block():
            """The block as it is in this cycle, into the answer from its first byte."""
            m.d.sync += [block_writing.eq(1), block_at.eq(0), ans_addr.eq(0)]

        m.d.comb += [aw_port.addr.eq(ans_addr),
                     aw_port.data.eq(Mux(block_writing, snapshot.word_select(block_at, 8),
                                         ser[:8])),
                     aw_port.en.eq(~ser_empty | block_writing)]
        ser_free = ser_empty & ~block_writing

        # the chip's status records through a register pair: the records' valid from
        # the chip's controller reaches the answer's shift register (a record's flip-
        # flops loaded at once) a cycle later, not in the same cycle
        m.submodules.status_in = status_in = SyncFIFOBuffered(
            width=lay.status_layout.size, depth=2)
        m.d.comb += [status_in.w_data.eq(self.status.payload.as_value()),
                     status_in.w_en.eq(self.status.valid),
                     self.status.ready.eq(status_in.w_rdy)]

        # the shift register's two loads (a memory word in "read", a status record in
        # "run"), chosen from registers: flags beside the FSM's state, as every bit of
        # the register chooses among its sources (from the state's decoding through the
        # choice into all its bits was the link top's slowest path, docs/boards.md)
        reading = Signal()
        running = Signal()
        load_word = reading & have & self.read.resp.valid
        load_record = running & status_in.r_rdy & ser_free
        m.d.comb += status_in.r_en.eq(running & ser_free)
        with m.If(load_word):
            m.d.sync += [ser.eq(self.read.resp.payload), ser_left.eq(ll.mem_bytes),
                         ser_empty.eq(0)]
        with m.If(load_record):
            m.d.sync += [ser.eq(status_in.r_data), ser_left.eq(ll.status_bytes),
                         ser_empty.eq(0)]

        answer_bytes = stream.Signature(8).create(path=("answer_bytes",))
        # a WRITE's or READ's words past the memory's end: its address and word count
        # into a register, a cycle (a "_span" state) before it is looked at
        past_end = Signal()
        m.d.sync += past_end.eq(addr_in + words > ll.memory_words)

        length_ok = Signal()
        address_end = Signal(16)  # the value of ``left`` as the address's last byte comes
        # a WRITE's or READ's byte count in words, a RUN's in descriptors (a bit a cycle)
        m.submodules.per_word = per_word = ConstantDivider(16, ll.mem_bytes)
        m.submodules.per_desc = per_desc = ConstantDivider(16, ll.desc_bytes)
        more_than_address = Signal()

        # one-hot on the board (mixgcn.hdl.timing): each state a flip-flop, so a test of
        # the state is no logic before what it steers
        with m.FSM(name=one_hot("request")) as fsm:
            with m.State("idle"):
                m.d.comb += self.request.ready.eq(ser_free)
                with m.If(self.request.valid & ser_free):
                    p = self.request.payload
                    m.d.sync += [head.eq(p), send_seq.eq(p.seq), left.eq(p.length),
                                 none_left.eq(p.length == 0), one_left.eq(p.length == 1),
                                 ans_addr.eq(0), addr_in.eq(0),
                                 address_end.eq(p.length - (ADDRESS_BYTES - 1))]
                    clear_got()
                    with m.If(p.error != FrameError.NONE):
                        answer(Status.BAD_CHECKSUM, kept=False)
                        m.next = "send"  # a damaged frame brings no payload
                    with m.Elif(kept_valid & (p.seq != 0) & (p.seq == kept_seq)):
                        m.next = "replay"
                    with m.Else():
                        m.d.sync += kept_valid.eq(0)  # overwritten from now on
                        m.next = "dispatch"
            with m.State("dispatch"):
                # sizes checked a cycle after the header, from registers
                n = head.length
                with m.Switch(head.kind):
                    with m.Case(Op.WRITE):
                        m.d.comb += [per_word.start.eq(1),
                                     per_word.x.eq(n - ADDRESS_BYTES)]
                        m.d.sync += more_than_address.eq(n > ADDRESS_BYTES)
                        m.next = "write_size"
                    with m.Case(Op.READ):
                        m.d.sync += length_ok.eq(n == ADDRESS_BYTES + 2)
                        m.next = "address"
                    with m.Case(Op.RUN):
                        m.d.comb += [per_desc.start.eq(1), per_desc.x.eq(n)]
                        m.d.sync += [index.eq(0), run_length.eq(ll.block_bytes)]
                        m.next = "run_size"
                    with m.Case(Op.STATUS):
                        with m.If(n == 0):
                            write_block()
                            answer(Status.OK, ll.block_bytes)
                            m.next = "built"
                        with m.Else():
                            answer(Status.BAD_LENGTH)
                            m.next = "drain"
                    with m.Default():
                        answer(Status.BAD_OP)
                        m.next = "drain"
            with m.State("write_size"):
                with m.If(~per_word.busy):
                    m.d.sync += [words.eq(per_word.quotient),
                                 length_ok.eq(more_than_address & (per_word.remainder == 0))]
                    m.next = "address"
            with m.State("run_size"):
                with m.If(~per_desc.busy):
                    n = head.length
                    m.d.sync += length_ok.eq((n != 0) & (per_desc.remainder == 0)
                                             & (n <= ll.max_batch * ll.desc_bytes))
                    m.next = "run_check"
            with m.State("run_check"):
                with m.If(length_ok):
                    m.next = "gather"
                with m.Else():
                    answer(Status.BAD_LENGTH)
                    m.next = "drain"
            with m.State("address"):
                with m.If(~length_ok):
                    answer(Status.BAD_LENGTH)
                    m.next = "drain"
                with m.Else():
                    m.d.comb += self.request_payload.ready.eq(1)
                    with m.If(take):
                        m.d.sync += addr_in.eq(Cat(addr_in[8:], byte))
                        count_down()
                        with m.If(left == address_end):
                            with m.If(head.kind == Op.WRITE):
                                m.next = "write_span"
                            with m.Else():
                                m.next = "count"
            with m.State("count"):  # a READ's byte count
                m.d.comb += self.request_payload.ready.eq(1)
                with m.If(take):
                    m.d.sync += count_in.eq(Cat(count_in[8:], byte))
                    count_down()
                    with m.If(one_left):
                        m.next = "read_check"
            with m.State("read_check"):
                m.d.comb += [per_word.start.eq(1), per_word.x.eq(count_in)]
                m.next = "read_size"
            with m.State("read_size"):
                with m.If(~per_word.busy):
                    m.d.sync += words.eq(per_word.quotient)
                    with m.If((count_in == 0) | (per_word.remainder != 0)
                              | (count_in > ll.max_read_words * ll.mem_bytes)):
                        answer(Status.BAD_LENGTH)
                        m.next = "send"
                    with m.Else():
                        m.next = "read_span"
            with m.State("read_span"):  # the last of the words past the memory's end?
                m.next = "read_range"
            with m.State("read_range"):
                with m.If(past_end):
                    answer(Status.BAD_ADDRESS)
                    m.next = "send"
                with m.Else():
                    m.d.sync += [waddr.eq(addr_in), have.eq(0), reading.eq(1)]
                    answer(Status.OK, count_in)
                    m.next = "read"
            with m.State("read"):
                # one word at a time: ask, take it (a response cannot wait), write it out
                m.d.comb += self.owner.eq(1)
                with m.If(~have & ser_free):
                    with m.If(words == 0):
                        m.d.sync += reading.eq(0)
                        m.next = "built"
                    with m.Else():
                        m.d.comb += [self.read.req.valid.eq(1),
                                     self.read.req.payload.eq(waddr)]
                        with m.If(self.read.req.ready):
                            m.d.sync += [have.eq(1), waddr.eq(waddr + 1),
                                         words.eq(words - 1)]
                with m.If(load_word):
                    m.d.sync += have.eq(0)
            with m.State("write_span"):  # the last of the words past the memory's end?
                m.next = "write_check"
            with m.State("write_check"):
                with m.If(past_end):
                    answer(Status.BAD_ADDRESS)
                    m.next = "drain"
                with m.Else():
                    m.d.sync += waddr.eq(addr_in)
                    m.next = "write"
            with m.State("write"):
                m.d.comb += self.owner.eq(1)
                with m.If(word_full):
                    with m.If(~shift_word):  # its last byte is in
                        m.d.comb += [self.write.wr.valid.eq(1),
                                     self.write.wr.payload.addr.eq(waddr),
                                     self.write.wr.payload.data.eq(word_in)]
                        with m.If(self.write.wr.ready):
                            m.d.sync += waddr.eq(waddr + 1)
                            clear_got()
                            with m.If(none_left):
                                answer(Status.OK)
                                m.next = "send"
                with m.Else():
                    take_into(shift_word)
            with m.State("gather"):  # a RUN's descriptors into the descriptor memory
                with m.If(desc_full & ~shift_desc):  # whole, its last byte in
                    clear_got()
                    m.d.sync += [index.eq(index + 1),
                                 run_length.eq(run_length + ll.status_bytes),
                                 desc_write.eq(1), desc_write_at.eq(index),
                                 desc_write_word.eq(desc_in)]
                    with m.If(none_left):
                        m.d.sync += [batch.eq(index + 1), index.eq(0), offered.eq(0),
                                     elapsed.eq(0), have.eq(0), running.eq(1),
                                     ans_addr.eq(ll.block_bytes)]
                        m.next = "gathered"
                with m.Elif(~desc_full):
                    take_into(shift_desc)
            with m.State("gathered"):  # the last descriptor is written in this cycle
                m.next = "run"
            with m.State("run"):
                # descriptors offered one a cycle (read ahead from their memory), status
                # records written into the answer as they come; the batch's cycles run
                # from its first offer to its last record
                advance = ~have | (self.desc.valid & self.desc.ready)
                m.d.comb += [dr_port.addr.eq(offered), dr_port.en.eq(advance),
                             self.desc.valid.eq(have), self.desc.payload.eq(dr_port.data)]
                with m.If(advance):
                    with m.If(offered < batch):
                        m.d.sync += [have.eq(1), offered.eq(offered + 1)]
                    with m.Else():
                        m.d.sync += have.eq(0)
                m.d.sync += elapsed.eq(elapsed + 1)
                with m.If(load_record):
                    m.d.sync += index.eq(index + 1)
                    with m.If(index + 1 == batch):
                        m.d.sync += running.eq(0)
                        m.next = "run_done"
            with m.State("run_done"):
                with m.If(ser_free):  # the last record written: the block goes first
                    write_block()
                    answer(Status.OK, run_length)
                    m.next = "built"
            with m.State("built"):
                with m.If(ser_free):
                    m.next = "send"
            with m.State("drain"):  # a refused request's payload, dropped
                with m.If(drop_payload()):
                    m.next = "send"
            with m.State("replay"):  # a request answered already: its payload dropped
                with m.If(drop_payload()):
                    m.d.sync += [send_kind.eq(kept_kind), send_len.eq(kept_len), keep.eq(1)]
                    m.next = "send"
            with m.State("send"):
                m.d.comb += [self.answer.valid.eq(1), self.answer.payload.seq.eq(send_seq),
                             self.answer.payload.kind.eq(send_kind),
                             self.answer.payload.length.eq(send_len)]
                with m.If(self.answer.ready):
                    with m.If(keep):
                        m.d.sync += [kept_seq.eq(send_seq), kept_kind.eq(send_kind),
                                     kept_len.eq(send_len), kept_valid.eq(send_seq != 0)]
                    m.d.sync += [ans_addr.eq(0), have.eq(0)]
                    with m.If(send_len == 0):
                        m.next = "idle"
                    with m.Else():
                        m.next = "send_payload"
            with m.State("send_payload"):
                pay = answer_bytes
                advance = ~have | (pay.valid & pay.ready)
                m.d.comb += [ar_port.addr.eq(ans_addr), ar_port.en.eq(advance),
                             pay.valid.eq(have), pay.payload.eq(ar_port.data)]
                with m.If(advance):
                    with m.If(ans_addr < send_len):
                        m.d.sync += [have.eq(1), ans_addr.eq(ans_addr + 1)]
                    with m.Else():
                        m.d.sync += have.eq(0)
                # the byte in hand is the last once every address has been read
                with m.If(pay.valid & pay.ready & (ans_addr == send_len)):
                    m.next = "idle"
        # the answer's bytes leave its memory through a register (hdl/timing.py): the
        # frame's CRC is computed from them. The last may still be there once the
        # executor is idle; the frame transmitter is busy until it has sent it.
        wiring.connect(m, output_register(m, "answer_byte", answer_bytes),
                       wiring.flipped(self.answer_payload))
        m.d.comb += self.busy.eq(~fsm.ongoing("idle") | ~ser_free)
        return m


class HostLink(wiring.Component):
    """The serial port's pins (``rx`` in, ``tx`` out; ``divisor`` clock cycles a bit)
    to the chip: a :class:`RequestExecutor` between the UART and the frames of
    docs/link.md, with the executor's ports to the chip and the memory
    (``read``, ``write``, ``owner``, ``desc``, ``status``, ``counters``, ``idle``,
    ``error``) as its own. ``busy``: a request is being carried out or answered (the
    simulation runs the clock while it is high)."""

    FRAME_PORTS = ("request", "request_payload", "answer", "answer_payload")

    def __init__(self, config: ChipConfig, divisor: int):
        self.config, self.divisor = config, divisor
        self.uart_rx = UARTReceiver(divisor)  # checks the divisor
        self.uart_tx = UARTTransmitter(divisor)
        self.executor = RequestExecutor(config)
        members = {name: member for name, member in self.executor.signature.members.items()
                   if name not in (*self.FRAME_PORTS, "busy")}
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1),
                          **members})

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = rx = self.uart_rx
        m.submodules.uart_tx = tx = self.uart_tx
        m.submodules.frames_in = frames_in = FrameReceiver()
        m.submodules.frames_out = frames_out = FrameTransmitter()
        m.submodules.executor = ex = self.executor
        m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(tx.tx)]
        wiring.connect(m, rx.bytes, frames_in.bytes)
        # the frames meet the executor through skid buffers (hdl/timing.py): each
        # side's `ready` is then a flip-flop, so the executor's decisions do not reach
        # into the frame receiver's byte count and buffer (the link top's slowest path
        # beside the `ecp5` chip, docs/boards.md). The streams run at the serial port's
        # rate, so the cycle each buffer adds costs nothing.
        buffered = []
        for name, source, sink in (("request", frames_in.header, ex.request),
                                   ("request_payload", frames_in.payload, ex.request_payload),
                                   ("answer", ex.answer, frames_out.header),
                                   ("answer_payload", ex.answer_payload, frames_out.payload)):
            m.submodules[f"{name}_buffer"] = buf = SkidBuffer(source.payload.shape())
            wiring.connect(m, source, buf.i)
            wiring.connect(m, buf.o, sink)
            buffered.append(buf.o.valid)
        wiring.connect(m, frames_out.bytes, tx.bytes)
        for name in self.signature.members:
            if name in ("rx", "tx", "busy"):
                continue
            member, mine, theirs = self.signature.members[name], getattr(self, name), \
                getattr(ex, name)
            if member.is_port:
                m.d.comb += (mine.eq(theirs) if member.flow == Out else theirs.eq(mine))
            elif member.flow == Out:
                wiring.connect(m, theirs, wiring.flipped(mine))
            else:
                wiring.connect(m, wiring.flipped(mine), theirs)
        # a word in a buffer is work not yet done (a spare word sits only behind one)
        m.d.comb += self.busy.eq(rx.busy | frames_in.busy | ex.busy | frames_out.busy
                                 | tx.busy | Cat(*buffered).any())
        return m


class LinkedChip(wiring.Component):
    """A chip reached over the host link: :class:`HostLink` on the serial pins
    (``rx``, ``tx``), the :class:`~mixgcn.hdl.chip.Chip`, and a
    :class:`MemoryArbiter` giving both the one memory bus ``memory`` (what a board
    puts its memory on). ``busy``: the link is carrying out or answering a request."""

    def __new__(cls, config, *args, **kwargs):
        if not isinstance(config, ChipConfig):
            raise TypeError(f"expected a ChipConfig, got {config!r}")
        return super().__new__(cls)

    def __init__(self, config: ChipConfig, divisor: int):
        self.config = config
        self.link = HostLink(config, divisor)
        lay = self.link.executor.layouts.chip
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1),
                          "memory": Out(MemoryBus(config.addr_width, lay.mem_width))})

    def elaborate(self, platform):
        from mixgcn.hdl.chip import Chip

        c = self.config
        m = Module()
        m.submodules.link = link = self.link
        m.submodules.chip = chip = Chip(c)
        m.submodules.arbiter = arbiter = MemoryArbiter(c.addr_width,
                                                       link.executor.layouts.chip.mem_width)
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx), self.busy.eq(link.busy),
                     arbiter.owner.eq(link.owner), link.idle.eq(chip.idle),
                     link.error.eq(chip.error)]
        wiring.connect(m, link.desc, chip.desc)
        wiring.connect(m, chip.status, link.status)
        wiring.connect(m, chip.counters, link.counters)
        wiring.connect(m, chip.memory, arbiter.chip)
        wiring.connect(m, link.read, arbiter.host_read)
        wiring.connect(m, link.write, arbiter.host_write)
        wiring.connect(m, arbiter.memory, wiring.flipped(self.memory))
        return m
