"""The output stage shared by both engines: requantise, ReLU, saturate, ReLU' mask."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["ActivityCounters", "OutputPath", "OutputStage", "engine_status_members",
           "output_layout"]


def output_layout(width: int, lanes: int) -> data.StructLayout:
    """An output row: ``lanes`` values of ``width`` bits and the operation's last-row flag."""
    return data.StructLayout({
        "data": data.ArrayLayout(signed(width), lanes),
        "last": 1,
    })


class OutputStage(wiring.Component):
    """Maps ``lanes`` accumulators to ``width``-bit outputs, exactly as
    :func:`mixgcn.golden.fixed.output_stage`:

    1. arithmetic right shift by ``shift``, rounding half to even;
    2. ReLU when ``relu``;
    3. saturation to ``[-2**(width-1), 2**(width-1) - 1]``;
    4. zero where ``mask_en`` and the row's mask bit is 0 (ReLU').

    Streams: ``i`` carries ``acc`` (``lanes`` × ``acc_width`` signed), ``mask`` (one bit a
    lane) and ``last``; ``o`` carries the output row. One register stage, one row per
    cycle, full throughput under backpressure (``i.ready = ~o.valid | o.ready``).
    ``shift``, ``relu`` and ``mask_en`` are sampled with each input row.

    Statistics for the host's exponent policy, cleared by ``clear``: ``max_abs``, the
    largest ``|acc|`` seen, and ``saturated``, how many outputs were clipped.
    """

    def __init__(self, *, lanes: int, width: int, acc_width: int, counter_width: int = 32):
        self.lanes, self.width, self.acc_width = lanes, width, acc_width
        self.in_layout = data.StructLayout({
            "acc": data.ArrayLayout(signed(acc_width), lanes),
            "mask": unsigned(lanes),
            "last": 1,
        })
        self.out_layout = output_layout(width, lanes)
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
            "shift": In(range(acc_width)),
            "relu": In(1),
            "mask_en": In(1),
            "clear": In(1),
            "max_abs": Out(unsigned(acc_width)),
            "saturated": Out(unsigned(counter_width)),
        })

    def _lane(self, m: Module, acc, keep):
        """One lane's output value and saturation flag (combinational)."""
        w, a = self.width, self.acc_width
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        bits = acc.as_unsigned()
        # bit b of `below` is set when b < shift: the bits shifted out
        below = Cat(*(self.shift > b for b in range(a)))
        half = Cat(*(self.shift == b + 1 for b in range(a)))  # the bit worth one half
        round_bit = (bits & half).any()
        sticky = (bits & below & ~half).any()
        q = Signal(signed(a), name="q")
        m.d.comb += q.eq(acc >> self.shift)
        r = Signal(signed(a + 1), name="r")
        m.d.comb += r.eq(q + (round_bit & (sticky | q[0])))
        r_relu = Mux(self.relu & r[-1], 0, r)
        too_big = r_relu > hi
        too_small = r_relu < lo
        value = Mux(too_big, Const(hi, signed(w)),
                    Mux(too_small, Const(lo, signed(w)), r_relu[:w].as_signed()))
        return Mux(keep, value, 0), too_big | too_small

    def elaborate(self, platform):
        m = Module()
        take = self.i.valid & self.i.ready
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)

        outs, sats, mags = [], [], []
        for lane in range(self.lanes):
            acc = self.i.payload.acc[lane]
            keep = ~self.mask_en | self.i.payload.mask[lane]
            value, sat = self._lane(m, acc, keep)
            outs.append(value)
            sats.append(sat)
            mag = Signal(unsigned(self.acc_width), name=f"mag{lane}")
            m.d.comb += mag.eq(Mux(acc[-1], -acc, acc))
            mags.append(mag)

        # largest magnitude of this row: a balanced tree of comparators
        level = mags
        while len(level) > 1:
            nxt = [Mux(x > y, x, y) for x, y in zip(level[::2], level[1::2], strict=False)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        row_max = level[0]

        with m.If(take):
            m.d.sync += [self.o.payload.data[lane].eq(v) for lane, v in enumerate(outs)]
            m.d.sync += [self.o.payload.last.eq(self.i.payload.last), self.o.valid.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        with m.If(self.clear):
            m.d.sync += [self.max_abs.eq(0), self.saturated.eq(0)]
        with m.Elif(take):
            m.d.sync += self.saturated.eq(self.saturated + sum(sats))
            with m.If(row_max > self.max_abs):
                m.d.sync += self.max_abs.eq(row_max)
        return m


class OutputPath(wiring.Component):
    """The output stage followed by the output FIFO, with the credit that keeps an
    engine's pipeline stall-free.

    An engine raises ``commit`` in the cycle it admits a row into its pipeline, and may
    do so only while ``credit`` is high: rows admitted but not yet taken from ``o``
    (``inflight``) never exceed ``depth``, so when a row reaches ``i`` — a stream with no
    ``ready``: it is always taken — the stage and the FIFO are sure to have room for it.
    The invariant behind it (proved formally): ``inflight`` equals the rows in the
    engine's pipeline plus ``occupancy``, the rows held by the stage and the FIFO.
    Latency: a row leaves ``o`` two cycles after it arrives on ``i`` at the earliest.
    """

    def __init__(self, *, lanes: int, width: int, acc_width: int, depth: int):
        self.stage = OutputStage(lanes=lanes, width=width, acc_width=acc_width)
        self.depth = depth
        self.in_layout, self.out_layout = self.stage.in_layout, self.stage.out_layout
        self.fifo = SyncFIFOBuffered(width=self.out_layout.size, depth=depth)
        super().__init__({
            "i": In(stream.Signature(self.in_layout, always_ready=True)),
            "o": Out(stream.Signature(self.out_layout)),
            "commit": In(1), "credit": Out(1),
            "inflight": Out(range(depth + 1)), "occupancy": Out(range(depth + 2)),
            "shift": In(range(acc_width)), "relu": In(1), "mask_en": In(1), "clear": In(1),
            "max_abs": Out(unsigned(acc_width)), "saturated": Out(unsigned(32)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.stage = stage = self.stage
        m.submodules.fifo = fifo = self.fifo
        m.d.comb += [
            stage.i.valid.eq(self.i.valid), stage.i.payload.eq(self.i.payload),
            fifo.w_stream.valid.eq(stage.o.valid), fifo.w_stream.payload.eq(stage.o.payload),
            stage.o.ready.eq(fifo.w_stream.ready),
            self.o.valid.eq(fifo.r_stream.valid), self.o.payload.eq(fifo.r_stream.payload),
            fifo.r_stream.ready.eq(self.o.ready),
            stage.shift.eq(self.shift), stage.relu.eq(self.relu),
            stage.mask_en.eq(self.mask_en), stage.clear.eq(self.clear),
            self.max_abs.eq(stage.max_abs), self.saturated.eq(stage.saturated),
        ]
        m.d.comb += [self.credit.eq(self.inflight < self.depth),
                     self.occupancy.eq(stage.o.valid + fifo.level)]
        m.d.sync += self.inflight.eq(self.inflight + self.commit
                                     - (self.o.valid & self.o.ready))
        return m


class ActivityCounters(wiring.Component):
    """An engine's performance counters. While ``active`` (an operation in progress),
    each cycle counts as busy (``moved``: it moved data, or had nothing to wait for),
    blocked (``blocked``: waiting for room at its output) or starved (waiting for an
    input), and ``op_cycles`` counts the operation's length; ``start`` (an operation
    begins) zeroes ``op_cycles``."""

    NAMES = ("busy_cycles", "starved_cycles", "blocked_cycles", "op_cycles")

    def __init__(self, counter_width: int):
        super().__init__({
            "start": In(1), "active": In(1), "moved": In(1), "blocked": In(1),
            **{n: Out(unsigned(counter_width)) for n in self.NAMES},
        })

    def drive(self, engine) -> list:
        """Statements that copy the counters to the engine's status ports of the same
        names (:func:`engine_status_members`)."""
        return [getattr(engine, n).eq(getattr(self, n)) for n in self.NAMES]

    def elaborate(self, platform):
        m = Module()
        with m.If(self.start):
            m.d.sync += self.op_cycles.eq(0)
        with m.Elif(self.active):
            m.d.sync += self.op_cycles.eq(self.op_cycles + 1)
        with m.If(self.active):
            with m.If(self.moved):
                m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
            with m.Elif(self.blocked):
                m.d.sync += self.blocked_cycles.eq(self.blocked_cycles + 1)
            with m.Else():
                m.d.sync += self.starved_cycles.eq(self.starved_cycles + 1)
        return m


def engine_status_members(counter_width: int, acc_width: int, extra=()) -> dict:
    """Status ports both engines expose: idle, performance counters, the output
    stage's statistics of the last operation."""
    members = {"idle": Out(1)}
    for name in ("busy_cycles", "starved_cycles", "blocked_cycles", "op_cycles", *extra):
        members[name] = Out(unsigned(counter_width))
    members.update(max_abs=Out(unsigned(acc_width)), saturated=Out(unsigned(32)))
    return members
