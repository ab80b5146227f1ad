"""The chip's memory port: read channels that stream consecutive words into an engine,
write channels that store an engine's output rows.

Every channel moves whole memory words of ``mem_width`` bits; a stream's payload sits in
a word's low bits. A read channel is a request stream of addresses (the memory may
stall it: ``ready`` low) and a response stream that carries each word a fixed number of
cycles later and cannot be stalled — so a reader only asks for words it has room for.
A write channel is one stream of (address, word) pairs, which the memory may stall.
"""

from __future__ import annotations

from amaranth import Module, Shape, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["ReadChannel", "StreamReader", "StreamWriter", "WriteChannel", "write_layout"]


def write_layout(addr_width: int, mem_width: int) -> data.StructLayout:
    return data.StructLayout({"addr": unsigned(addr_width), "data": unsigned(mem_width)})


class ReadChannel(wiring.Signature):
    """A read channel, seen from the chip: ``req`` (addresses) out, ``resp`` (words) in."""

    def __init__(self, addr_width: int, mem_width: int):
        super().__init__({
            "req": Out(stream.Signature(unsigned(addr_width))),
            "resp": In(stream.Signature(unsigned(mem_width))),  # ``ready`` is always 1
        })


class WriteChannel(wiring.Signature):
    """A write channel, seen from the chip: (address, word) pairs out."""

    def __init__(self, addr_width: int, mem_width: int):
        super().__init__({"wr": Out(stream.Signature(write_layout(addr_width, mem_width)))})


class StreamReader(wiring.Component):
    """Streams ``count`` words from ``base`` upwards as payloads of ``layout``.

    ``start`` (one cycle, while ``done``) loads ``base`` and ``count``. Requests go out
    only while the response FIFO (``depth`` words) has room for every word in flight,
    which also keeps the memory's fixed latency covered: with ``depth`` ≥ latency + 2
    a reader sustains a word a cycle. ``done``: every word has left through ``o``.
    """

    def __init__(self, layout, *, addr_width: int, mem_width: int, depth: int = 4):
        self.layout, self.depth = layout, depth
        self.addr_width, self.mem_width = addr_width, mem_width
        super().__init__({
            "mem": Out(ReadChannel(addr_width, mem_width)),
            "o": Out(stream.Signature(layout)),
            "base": In(addr_width), "count": In(32), "start": In(1), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        # a plain FIFO: its free space is exact every cycle (a buffered FIFO's inner
        # queue can be full for a cycle while its level says there is room)
        m.submodules.fifo = fifo = SyncFIFO(width=self.mem_width, depth=self.depth)
        addr = Signal(self.addr_width)
        to_ask = Signal(32)  # words not yet requested
        to_give = Signal(32)  # words not yet delivered through `o`
        inflight = Signal(range(self.depth + 1))
        ask = self.mem.req.valid & self.mem.req.ready
        got = self.mem.resp.valid
        m.d.comb += [
            self.mem.req.payload.eq(addr),
            self.mem.req.valid.eq((to_ask != 0) & (fifo.level + inflight < self.depth)),
            self.mem.resp.ready.eq(1),  # room was reserved when the word was asked for
            fifo.w_data.eq(self.mem.resp.payload), fifo.w_en.eq(got),
            self.o.valid.eq(fifo.r_rdy),
            Value.cast(self.o.payload).eq(fifo.r_data[:Shape.cast(self.layout).width]),
            fifo.r_en.eq(self.o.ready),
            self.done.eq(to_give == 0),
        ]
        m.d.sync += inflight.eq(inflight + ask - got)
        with m.If(self.start):
            m.d.sync += [addr.eq(self.base), to_ask.eq(self.count), to_give.eq(self.count)]
        with m.Else():
            with m.If(ask):
                m.d.sync += [addr.eq(addr + 1), to_ask.eq(to_ask - 1)]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += to_give.eq(to_give - 1)
        return m


class StreamWriter(wiring.Component):
    """Stores each payload of ``i`` (its ``field``, or all of it) at consecutive
    addresses from ``base`` (loaded by ``start``)."""

    def __init__(self, layout, *, addr_width: int, mem_width: int, field: str | None = None):
        self.field, self.addr_width = field, addr_width
        super().__init__({
            "i": In(stream.Signature(layout)),
            "mem": Out(WriteChannel(addr_width, mem_width)),
            "base": In(addr_width), "start": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        addr = Signal(self.addr_width)
        word = self.i.payload if self.field is None else getattr(self.i.payload, self.field)
        wr = self.mem.wr
        m.d.comb += [wr.valid.eq(self.i.valid), self.i.ready.eq(wr.ready),
                     wr.payload.addr.eq(addr), wr.payload.data.eq(Value.cast(word))]
        with m.If(self.start):
            m.d.sync += addr.eq(self.base)
        with m.Elif(wr.valid & wr.ready):
            m.d.sync += addr.eq(addr + 1)
        return m
