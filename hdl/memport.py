"""The chip's memory port: read channels that stream consecutive words into the engines,
write channels that store the engines' output rows.

Every channel moves whole memory words of ``mem_width`` bits; a stream's payload sits in
a word's low bits. A read channel is a request stream of addresses (the memory may
stall it: ``ready`` low) and a response stream that carries each word a fixed number of
cycles later and cannot be stalled — so a reader only asks for words it has room for.
A write channel is one stream of (address, word) pairs, which the memory may stall.

:class:`MemoryPort` holds a :class:`StreamReader` for each of :data:`READ_CHANNELS` and a
:class:`StreamWriter` for each of :data:`WRITE_CHANNELS` on one :class:`MemoryBus`; the
controller starts them through :class:`PortControl`.
"""

from __future__ import annotations

from amaranth import Module, Shape, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["CHANNELS", "READ_CHANNELS", "WRITE_CHANNELS", "ChannelControl", "MemoryBus",
           "MemoryPort", "PortControl", "ReadChannel", "StreamReader", "StreamWriter", "Streams",
           "WriteChannel", "write_layout"]

# the memory port's channels, in the order the simulation's memory model numbers them:
# the SAE's features, CSR beats and ReLU' masks, the DCE's rows, weights and masks
READ_CHANNELS = ("x", "csr", "smask", "a", "b", "dmask")
# one write channel per engine
WRITE_CHANNELS = ("sae", "dce")
# every channel: what shares a memory's bandwidth
CHANNELS = READ_CHANNELS + WRITE_CHANNELS


def write_layout(addr_width: int, mem_width: int) -> data.StructLayout:
    return data.StructLayout({"addr": unsigned(addr_width), "data": unsigned(mem_width)})


class ReadChannel(wiring.Signature):
    """A read channel, seen from the reader: ``req`` (addresses) out, ``resp`` (words) in,
    always taken (the reader reserved room for each word when it asked for it)."""

    def __init__(self, addr_width: int, mem_width: int):
        super().__init__({
            "req": Out(stream.Signature(unsigned(addr_width))),
            "resp": In(stream.Signature(unsigned(mem_width), always_ready=True)),
        })


class WriteChannel(wiring.Signature):
    """A write channel, seen from the writer: (address, word) pairs out."""

    def __init__(self, addr_width: int, mem_width: int):
        super().__init__({"wr": Out(stream.Signature(write_layout(addr_width, mem_width)))})


class MemoryBus(wiring.Signature):
    """Every channel of the memory port, seen from the chip: a :class:`ReadChannel` per
    name of :data:`READ_CHANNELS`, a :class:`WriteChannel` per name of
    :data:`WRITE_CHANNELS`."""

    def __init__(self, addr_width: int, mem_width: int):
        super().__init__({**{n: Out(ReadChannel(addr_width, mem_width)) for n in READ_CHANNELS},
                          **{n: Out(WriteChannel(addr_width, mem_width))
                             for n in WRITE_CHANNELS}})


class ChannelControl(wiring.Signature):
    """Starts a channel, seen from the controller: a one-cycle ``start`` loads ``base``
    (and for a reader ``count``, the words to stream)."""

    def __init__(self, addr_width: int, count: bool = True):
        members = {"start": Out(1), "base": Out(addr_width)}
        if count:
            members["count"] = Out(32)
        super().__init__(members)


class PortControl(wiring.Signature):
    """A :class:`ChannelControl` for every channel of the memory port."""

    def __init__(self, addr_width: int):
        super().__init__({**{n: Out(ChannelControl(addr_width)) for n in READ_CHANNELS},
                          **{n: Out(ChannelControl(addr_width, count=False))
                             for n in WRITE_CHANNELS}})


class Streams(wiring.Signature):
    """Named streams, one per entry of ``layouts`` (name -> payload layout)."""

    def __init__(self, layouts: dict):
        super().__init__({n: Out(stream.Signature(layout)) for n, layout in layouts.items()})


class StreamReader(wiring.Component):
    """Streams ``count`` words from ``base`` upwards as payloads of ``layout``.

    ``ctrl.start`` (one cycle, while ``done``) loads ``base`` and ``count``. Requests go
    out only while the response FIFO (``depth`` words) has room for every word in
    flight, which also keeps the memory's fixed latency covered: with ``depth`` ≥
    latency + 2 a reader sustains a word a cycle. ``done``: every word has left
    through ``o``. Latency: a word can leave ``o`` two cycles after its response arrives
    (the FIFO, then the output register). Invariant (proved formally): the words still
    to deliver are those not yet asked for, those in flight, those in the FIFO and the
    one in the output register — none is lost or duplicated.
    """

    def __init__(self, layout, *, addr_width: int, mem_width: int, depth: int = 4):
        self.layout, self.depth = layout, depth
        self.addr_width, self.mem_width = addr_width, mem_width
        # a plain FIFO: its free space is exact every cycle (a buffered FIFO's inner
        # queue can be full for a cycle while its level says there is room)
        self.fifo = SyncFIFO(width=mem_width, depth=depth)
        self.inflight = Signal(range(depth + 1))  # words asked for, not yet arrived
        self.to_ask = Signal(32)  # words not yet asked for
        # `to_ask != 0` as a register: the request's `valid`, and so the memory bus's
        # arbiter, starts at a flip-flop rather than behind a 32-bit comparison (the
        # comparison, the arbiter across the die and back into the count was the
        # `ecp5` chip's slowest path; docs/boards.md, step 32)
        self.asking = Signal()
        self.to_give = Signal(32)  # words not yet delivered through `o`
        super().__init__({
            "mem": Out(ReadChannel(addr_width, mem_width)),
            "o": Out(stream.Signature(layout)),
            "ctrl": In(ChannelControl(addr_width)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = self.fifo
        addr = Signal(self.addr_width)
        to_ask, to_give, inflight, asking = self.to_ask, self.to_give, self.inflight, self.asking
        ask = self.mem.req.valid & self.mem.req.ready
        got = self.mem.resp.valid
        m.d.comb += [
            self.mem.req.payload.eq(addr),
            self.mem.req.valid.eq(asking & (fifo.level + inflight < self.depth)),
            fifo.w_data.eq(self.mem.resp.payload), fifo.w_en.eq(got),
            fifo.r_en.eq(~self.o.valid | self.o.ready),
            self.done.eq(to_give == 0),
        ]
        # the output is a register: what the consumer decides from a word (an engine's
        # whole handshake logic) starts at a flip-flop, not at the FIFO's memory
        with m.If(fifo.r_en):
            m.d.sync += [self.o.valid.eq(fifo.r_rdy), Value.cast(self.o.payload).eq(
                fifo.r_data[:Shape.cast(self.layout).width])]
        m.d.sync += inflight.eq(inflight + ask - got)
        with m.If(self.ctrl.start):
            m.d.sync += [addr.eq(self.ctrl.base), to_ask.eq(self.ctrl.count),
                         to_give.eq(self.ctrl.count), asking.eq(self.ctrl.count != 0)]
        with m.Else():
            with m.If(ask):
                m.d.sync += [addr.eq(addr + 1), to_ask.eq(to_ask - 1),
                             asking.eq(to_ask != 1)]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += to_give.eq(to_give - 1)
        return m


class StreamWriter(wiring.Component):
    """Stores each payload of ``i`` (its ``field``, or all of it) at consecutive
    addresses from ``base`` (loaded by ``ctrl.start``). No latency of its own: ``i``
    passes straight to the write channel, which may stall it."""

    def __init__(self, layout, *, addr_width: int, mem_width: int, field: str | None = None):
        self.field, self.addr_width = field, addr_width
        super().__init__({
            "i": In(stream.Signature(layout)),
            "mem": Out(WriteChannel(addr_width, mem_width)),
            "ctrl": In(ChannelControl(addr_width, count=False)),
        })

    def elaborate(self, platform):
        m = Module()
        addr = Signal(self.addr_width)
        word = self.i.payload if self.field is None else getattr(self.i.payload, self.field)
        wr = self.mem.wr
        m.d.comb += [wr.valid.eq(self.i.valid), self.i.ready.eq(wr.ready),
                     wr.payload.addr.eq(addr), wr.payload.data.eq(Value.cast(word))]
        with m.If(self.ctrl.start):
            m.d.sync += addr.eq(self.ctrl.base)
        with m.Elif(wr.valid & wr.ready):
            m.d.sync += addr.eq(addr + 1)
        return m


class MemoryPort(wiring.Component):
    """The chip's memory port: a :class:`StreamReader` per read channel, its words out
    on ``read.<name>`` as payloads of ``read_layouts[name]``, and a
    :class:`StreamWriter` per write channel storing the ``data`` field of the rows on
    ``write.<name>``; all on one :class:`MemoryBus` (``bus``), started through
    ``control`` (:class:`PortControl`). ``depth``: words each reader buffers."""

    def __init__(self, read_layouts: dict, write_layouts: dict, *, addr_width: int,
                 mem_width: int, depth: int):
        self.read_layouts, self.write_layouts = read_layouts, write_layouts
        self.addr_width, self.mem_width, self.depth = addr_width, mem_width, depth
        super().__init__({
            "bus": Out(MemoryBus(addr_width, mem_width)),
            "control": In(PortControl(addr_width)),
            "read": Out(Streams(read_layouts)),
            "write": In(Streams(write_layouts)),
        })

    def elaborate(self, platform):
        m = Module()
        aw, mw = self.addr_width, self.mem_width
        for name in READ_CHANNELS:
            r = StreamReader(self.read_layouts[name], addr_width=aw, mem_width=mw,
                             depth=self.depth)
            m.submodules[f"read_{name}"] = r
            wiring.connect(m, r.mem, wiring.flipped(getattr(self.bus, name)))
            wiring.connect(m, r.ctrl, wiring.flipped(getattr(self.control, name)))
            wiring.connect(m, r.o, wiring.flipped(getattr(self.read, name)))
        for name in WRITE_CHANNELS:
            w = StreamWriter(self.write_layouts[name], addr_width=aw, mem_width=mw,
                             field="data")
            m.submodules[f"write_{name}"] = w
            wiring.connect(m, w.mem, wiring.flipped(getattr(self.bus, name)))
            wiring.connect(m, w.ctrl, wiring.flipped(getattr(self.control, name)))
            wiring.connect(m, wiring.flipped(getattr(self.write, name)), w.i)
        return m
