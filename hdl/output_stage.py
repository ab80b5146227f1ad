"""The output stage shared by both engines: requantise, ReLU, saturate, ReLU' mask."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from mixgcn.hdl.timing import copy

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
    lane) and ``last``; ``o`` carries the output row. ``shift``, ``relu`` and ``mask_en``
    are sampled with each input row.

    A pipeline of :attr:`stages` registers, one step of the arithmetic each, so no
    path holds more than one wide carry chain or one shifter (the chip's clock): the
    row and the masks of the bits its shift drops (functions of ``shift`` alone); the
    shift with its round and sticky bits and each lane's ``|acc|``; the rounding add;
    ReLU, saturation and mask; then the row's largest ``|acc|``, a comparator level a
    stage. It moves as a whole, a row per cycle; ``busy`` while it holds any row. With
    ``stalls`` it stops while ``o`` holds a row not taken (``i.ready = ~o.valid |
    o.ready``). Without, it never stops (``i.ready`` is 1) and whoever takes ``o``
    must be ready whenever it is valid, as :class:`OutputPath`'s credit guarantees: on
    an FPGA the stall was one enable net from the FIFO's state to every flip-flop of
    the stage, thousands of them.

    Statistics for the host's exponent policy, cleared by ``clear``: ``max_abs``, the
    largest ``|acc|`` seen, and ``saturated``, how many outputs were clipped. A row's
    statistics are counted when it leaves ``o``, so they are complete once ``busy``
    falls; ``clear`` must wait for that (the engines do). ``clear`` takes effect a cycle
    after it is raised, before any row given after it can leave.
    """

    @staticmethod
    def latency(lanes: int) -> int:
        """The stage's registers for ``lanes`` values: entry; shift; round; saturate;
        then the max tree's remaining levels (at least one, where the row's count of
        clipped values is added up)."""
        return 4 + max(1, (lanes - 1).bit_length() - 2)

    def __init__(self, *, lanes: int, width: int, acc_width: int, counter_width: int = 32,
                 stalls: bool = True):
        self.lanes, self.width, self.acc_width = lanes, width, acc_width
        self.stalls = stalls
        self.in_layout = data.StructLayout({
            "acc": data.ArrayLayout(signed(acc_width), lanes),
            "mask": unsigned(lanes),
            "last": 1,
        })
        self.out_layout = output_layout(width, lanes)
        self.stages = self.latency(lanes)
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
            "shift": In(range(acc_width)),
            "relu": In(1),
            "mask_en": In(1),
            "clear": In(1),
            "busy": Out(1),
            "occupancy": Out(range(self.stages + 1)),
            "max_abs": Out(unsigned(acc_width)),
            "saturated": Out(unsigned(counter_width)),
        })

    def elaborate(self, platform):
        m = Module()
        L, w, a = self.lanes, self.width, self.acc_width
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        S = self.stages
        advance = ~self.o.valid | self.o.ready if self.stalls else Const(1)
        m.d.comb += self.i.ready.eq(advance)
        valid = [Signal(name=f"v{k}") for k in range(1, S + 1)]  # valid[S-1] is o.valid
        with m.If(advance):
            m.d.sync += [valid[0].eq(self.i.valid)]
            m.d.sync += [valid[k].eq(valid[k - 1]) for k in range(1, S)]
        m.d.comb += [self.o.valid.eq(valid[-1]), self.busy.eq(Cat(*valid).any()),
                     self.occupancy.eq(sum(valid))]

        def carry(x, k0, name):
            """``x`` registered at stage ``k0`` and carried to the last stage; returns the
            register of each stage from ``k0`` on (index 0 = stage k0)."""
            regs = [Signal.like(x, name=f"{name}_s{k}") for k in range(k0, S + 1)]
            with m.If(advance):
                m.d.sync += regs[0].eq(x)
                m.d.sync += [regs[j].eq(regs[j - 1]) for j in range(1, len(regs))]
            return regs

        # stage 1: the row and its settings registered, with the masks of the bits the
        # shift drops (bit b of `below` is set when b < shift) and of the bit worth one
        # half: functions of the shift alone, whose comparators (carry chains) end here
        # rather than in front of the wide reductions that use them
        inp = self.i.payload
        acc0 = [Signal(signed(a), name=f"acc{j}") for j in range(L)]
        below, half = Signal(a), Signal(a)
        # a copy of the shift per lane: each steers that lane's shifter alone
        shift0 = [copy(self.shift.shape(), name=f"shift{j}") for j in range(L)]
        with m.If(advance):
            m.d.sync += [acc0[j].eq(inp.acc[j]) for j in range(L)]
            m.d.sync += [*(s.eq(self.shift) for s in shift0),
                         below.eq(Cat(*(self.shift > b for b in range(a)))),
                         half.eq(Cat(*(self.shift == b + 1 for b in range(a))))]
        keep = carry(Cat(*(~self.mask_en | inp.mask[j] for j in range(L))), 1, "keep")
        relu = carry(self.relu, 1, "relu")
        last = carry(inp.last, 1, "last")

        # stage 2: the shift, the bits it drops, |acc|
        q1 = [Signal(signed(a), name=f"q{j}") for j in range(L)]
        round1, sticky1 = Signal(L), Signal(L)
        mag1 = [Signal(unsigned(a), name=f"mag{j}") for j in range(L)]
        with m.If(advance):
            for j in range(L):
                bits = acc0[j].as_unsigned()
                m.d.sync += [q1[j].eq(acc0[j] >> shift0[j]),
                             round1[j].eq((bits & half).any()),
                             sticky1[j].eq((bits & below & ~half).any()),
                             mag1[j].eq(Mux(acc0[j][-1], -acc0[j], acc0[j]))]

        # stage 3: round half to even
        r2 = [Signal(signed(a + 1), name=f"r{j}") for j in range(L)]
        with m.If(advance):
            m.d.sync += [r2[j].eq(q1[j] + (round1[j] & (sticky1[j] | q1[j][0])))
                         for j in range(L)]

        # stage 4: ReLU, saturation, mask. A value fits in `w` bits when its bits from
        # w-1 up are all equal (no comparator: a carry chain's worth of time saved)
        out3 = [Signal(signed(w), name=f"out{j}") for j in range(L)]
        clipped3 = Signal(L)
        with m.If(advance):
            for j in range(L):
                negative, upper = r2[j][-1], r2[j][w - 1:]
                fits = upper.all() | ~upper.any()
                too_big = ~fits & ~negative
                too_small = ~fits & negative & ~relu[2]
                value = Mux(relu[2] & negative, 0,
                            Mux(fits, r2[j][:w], Mux(negative, Const(lo, signed(w)),
                                                     Const(hi, signed(w)))))
                m.d.sync += [out3[j].eq(Mux(keep[2][j], value, 0)),
                             clipped3[j].eq(too_big | too_small)]
        outs = carry(Cat(*out3), 5, "data")
        m.d.comb += [self.o.payload.data.as_value().eq(outs[-1]),
                     self.o.payload.last.eq(last[-1])]

        # the row's largest |acc|: pairs reduced a level a stage, from stage 3 on
        level = mag1
        for k in range(3, S + 1):
            if len(level) > 1:
                nxt = [Mux(x > y, x, y) for x, y in zip(level[::2], level[1::2], strict=False)]
                if len(level) % 2:
                    nxt.append(level[-1])
            else:
                nxt = level
            regs = [Signal(unsigned(a), name=f"max{k}_{j}") for j in range(len(nxt))]
            with m.If(advance):
                m.d.sync += [r.eq(x) for r, x in zip(regs, nxt, strict=True)]
            level = regs
        row_max = level[0]
        # the row's clipped values, counted at stage 5
        clipped = Signal(range(L + 1))
        with m.If(advance):
            m.d.sync += clipped.eq(sum(clipped3))
        clipped_out = carry(clipped, 6, "clipped")[-1] if S >= 6 else clipped

        # `clear` acts a cycle late (registered: it comes from an engine's command
        # logic, far away): no row of the new operation can leave that soon
        clear = Signal()
        m.d.sync += clear.eq(self.clear)
        done = self.o.valid & self.o.ready  # the row leaves: count it
        with m.If(clear):
            m.d.sync += [self.max_abs.eq(0), self.saturated.eq(0)]
        with m.Elif(done):
            m.d.sync += self.saturated.eq(self.saturated + clipped_out)
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
    engine's pipeline plus ``occupancy``, the rows held by the stage and the FIFO. So
    the FIFO always has room for the row leaving the stage, and the stage never stops
    (also proved).
    Latency: a row leaves ``o`` ``stage.stages + 1`` cycles after it arrives on ``i``
    at the earliest. ``busy``: the stage holds a row (its statistics are not final).
    """

    def __init__(self, *, lanes: int, width: int, acc_width: int, depth: int):
        self.stage = OutputStage(lanes=lanes, width=width, acc_width=acc_width, stalls=False)
        self.depth = depth
        self.in_layout, self.out_layout = self.stage.in_layout, self.stage.out_layout
        # an entry more than the credit ever fills, so the buffered FIFO's memory has
        # room whatever its output register holds: the stage's "never stops" then
        # follows from the credit alone, which the engines' proofs can show (without
        # it, it holds too, but through the FIFO's internal state)
        self.fifo = SyncFIFOBuffered(width=self.out_layout.size, depth=depth + 1)
        super().__init__({
            "i": In(stream.Signature(self.in_layout, always_ready=True)),
            "o": Out(stream.Signature(self.out_layout)),
            "commit": In(1), "credit": Out(1),
            "inflight": Out(range(depth + 1)),
            "occupancy": Out(range(depth + self.stage.stages + 1)), "busy": Out(1),
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
                     self.occupancy.eq(stage.occupancy + fifo.level),
                     self.busy.eq(stage.busy)]
        m.d.sync += self.inflight.eq(self.inflight + self.commit
                                     - (self.o.valid & self.o.ready))
        return m


class ActivityCounters(wiring.Component):
    """An engine's performance counters. While ``active`` (an operation in progress),
    each cycle counts as busy (``moved``: it moved data, or had nothing to wait for),
    blocked (``blocked``: waiting for room at its output) or starved (waiting for an
    input), and ``op_cycles`` counts the operation's length; ``start`` (an operation
    begins) zeroes ``op_cycles``.

    Every count lands a cycle after the cycle it counts: the inputs are registered
    first, because they come from the engine's handshakes, and the counters (read out
    beside every other engine's) sit far from them on a large die. Totals read a cycle
    after an operation are those of the operation."""

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
        start, active, moved, blocked = (Signal(name=f"{n}_q")
                                         for n in ("start", "active", "moved", "blocked"))
        m.d.sync += [start.eq(self.start), active.eq(self.active), moved.eq(self.moved),
                     blocked.eq(self.blocked)]
        with m.If(start):
            m.d.sync += self.op_cycles.eq(0)
        with m.Elif(active):
            m.d.sync += self.op_cycles.eq(self.op_cycles + 1)
        with m.If(active):
            with m.If(moved):
                m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
            with m.Elif(blocked):
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
