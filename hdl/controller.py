"""The chip's controller: descriptors in, engine commands, channel starts and routes
out, a status record per descriptor back (docs/architecture.md, "Descriptors")."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import enum, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from mixgcn.hdl.dce import DCEOp
from mixgcn.hdl.memport import PortControl
from mixgcn.hdl.router import Route
from mixgcn.hdl.sae import SAEOp

__all__ = ["Controller", "EngineReport", "Unit", "UnitTracker"]


class Unit(enum.Enum, shape=2):
    """The unit a descriptor names (docs/architecture.md, "Descriptors")."""

    LOAD = 0
    SPMM = 1
    GEMM = 2
    FENCE = 3  # does nothing; with ``fence`` set, reports once all before it completed


class EngineReport(wiring.Signature):
    """What an engine tells the controller, seen from the engine side: ``row``, one
    cycle per row its operation moved (out of the engine; for a LOAD, into the SAE's
    buffer), and its output stage's statistics for the operation."""

    def __init__(self, acc_width: int):
        super().__init__({"row": Out(1), "max_abs": Out(unsigned(acc_width)),
                          "saturated": Out(unsigned(32))})


class UnitTracker(wiring.Component):
    """One unit's descriptor from issue to status record.

    ``issue`` (one cycle, only while ``free``) starts an operation: ``busy`` rises and
    ``seq`` and the time ``now`` are kept; ``none_expected`` must say whether
    ``expected`` is 0. It finishes once its engine has taken the command (``sent``, one
    cycle; held high for a unit with no engine) and ``expected`` rows have moved
    (``report.row``, counted a cycle later: a register takes it from the engine's
    handshake, far away): ``busy`` falls and ``record`` — the sequence
    number, ``unit``, the cycles from issue to finish and the engine's statistics — waits
    with ``pending`` high until ``take``. ``free``: neither busy nor pending. ``finish``
    is high in the cycle the operation finishes.
    """

    def __init__(self, unit: Unit, status_layout, *, counter_width: int, acc_width: int):
        self.unit = unit
        super().__init__({
            "issue": In(1), "seq": In(32), "expected": In(32), "none_expected": In(1),
            "now": In(counter_width),
            "sent": In(1), "report": In(EngineReport(acc_width)), "take": In(1),
            "busy": Out(1), "free": Out(1), "pending": Out(1), "finish": Out(1),
            "record": Out(status_layout),
        })

    def elaborate(self, platform):
        m = Module()
        # rows still to come, and whether none is: a register, so the finish (which
        # fans out to the routes and the status) has no 32-bit comparison before it
        sent, left, none_left, row = Signal(), Signal(32), Signal(), Signal()
        t0 = Signal.like(self.now)
        m.d.sync += row.eq(self.report.row)
        m.d.comb += [self.free.eq(~self.busy & ~self.pending),
                     self.finish.eq(self.busy & sent & none_left)]
        with m.If(self.issue):
            m.d.sync += [self.busy.eq(1), sent.eq(0), left.eq(self.expected),
                         none_left.eq(self.none_expected), t0.eq(self.now),
                         self.record.seq.eq(self.seq), self.record.unit.eq(self.unit)]
        with m.If(self.sent):
            m.d.sync += sent.eq(1)
        with m.If(row):
            m.d.sync += [left.eq(left - 1), none_left.eq(left == 1)]
        with m.If(self.finish):
            m.d.sync += [self.busy.eq(0), self.pending.eq(1),
                         self.record.cycles.eq(self.now - t0),
                         self.record.max_abs.eq(self.report.max_abs),
                         self.record.saturated.eq(self.report.saturated)]
        with m.If(self.take):
            m.d.sync += self.pending.eq(0)
        return m


class Controller(wiring.Component):
    """Issues descriptors in order, each as soon as its unit is free.

    ``desc`` fills a queue of ``desc_depth`` descriptors. Its head moves into a register,
    decoded (its unit, the rows its tracker will count and whether there are none),
    and issues from there when its unit (:class:`Unit`) is free and, for
    LOAD/SPMM/GEMM, its engine's command register is empty — and, with ``fence``, once
    every earlier descriptor has completed. Issuing takes effect in the next cycle
    (``dispatch``, a register): it starts the memory channels it names (``memory``),
    loads the engine's command register (``sae_cmd``/``dce_cmd``: a stream, held until
    the engine takes it) and sets the operation's routes (``route``), which are
    cleared again when it completes.
    Completions leave as status records on ``status``, one a cycle (lowest unit first);
    a unit with a record not yet sent takes no new descriptor, so none is lost under
    backpressure. ``sae``, ``load``, ``dce``: the engines' progress and statistics.

    The register takes the next head in the cycle after an issue, so a descriptor
    issues every other cycle at most — against operations of hundreds of cycles — and
    the dispatch cycle needs no guard: nothing else can issue in it. In exchange, the
    decision is a few gates from registers, and its effects (the channels' 32-bit
    counters, the command registers, the trackers) fan out from a register.
    Counters: ``cycles`` since reset, descriptors ``issued`` and ``completed``.
    """

    def __init__(self, layouts, *, desc_depth: int, counter_width: int, acc_width: int):
        self.layouts, self.desc_depth = layouts, desc_depth
        self.counter_width, self.acc_width = counter_width, acc_width
        s, d = layouts.sae_layouts, layouts.dce_layouts
        super().__init__({
            "desc": In(stream.Signature(layouts.desc_layout)),
            "status": Out(stream.Signature(layouts.status_layout)),
            "sae_cmd": Out(stream.Signature(s.cmd_layout)),
            "dce_cmd": Out(stream.Signature(d.cmd_layout)),
            "memory": Out(PortControl(layouts.addr_width)),
            "route": Out(Route()),
            "load": In(EngineReport(acc_width)), "sae": In(EngineReport(acc_width)),
            "dce": In(EngineReport(acc_width)),
            "cycles": Out(unsigned(counter_width)), "issued": Out(32),
            "completed": Out(32), "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = SyncFIFOBuffered(width=self.layouts.desc_layout.size,
                                                      depth=self.desc_depth)
        wiring.connect(m, wiring.flipped(self.desc), queue.w_stream)
        # the head, decoded into registers: `staged` holds it
        fields = self.layouts.desc_layout(queue.r_stream.payload)
        head, staged = Signal(self.layouts.desc_layout), Signal()
        expected, none_expected = Signal(32), Signal()
        rows = Mux((fields.unit == Unit.GEMM) & (fields.op == DCEOp.XTG), fields.k, fields.rows)
        m.d.comb += queue.r_stream.ready.eq(~staged)
        with m.If(queue.r_stream.valid & ~staged):
            m.d.sync += [staged.eq(1), head.eq(fields),
                         expected.eq(Mux(fields.unit == Unit.FENCE, 0, rows)),
                         none_expected.eq(Mux(fields.unit == Unit.FENCE, 1, rows == 0))]
        t = {}
        for u in Unit:
            t[u] = m.submodules[f"track_{u.name.lower()}"] = UnitTracker(
                u, self.layouts.status_layout, counter_width=self.counter_width,
                acc_width=self.acc_width)
            m.d.comb += [t[u].now.eq(self.cycles), t[u].seq.eq(self.issued),
                         t[u].expected.eq(expected), t[u].none_expected.eq(none_expected)]
        for u, report in ((Unit.LOAD, self.load), (Unit.SPMM, self.sae), (Unit.GEMM, self.dce)):
            wiring.connect(m, wiring.flipped(report), t[u].report)
        m.d.comb += t[Unit.FENCE].sent.eq(1)

        sae_owner = Signal(Unit)  # the SAE unit whose command waits in sae_cmd
        taken_sae = self.sae_cmd.valid & self.sae_cmd.ready
        m.d.comb += [t[Unit.LOAD].sent.eq(taken_sae & (sae_owner == Unit.LOAD)),
                     t[Unit.SPMM].sent.eq(taken_sae & (sae_owner == Unit.SPMM)),
                     t[Unit.GEMM].sent.eq(self.dce_cmd.valid & self.dce_cmd.ready)]
        for cmd in (self.sae_cmd, self.dce_cmd):
            with m.If(cmd.valid & cmd.ready):
                m.d.sync += cmd.valid.eq(0)

        def unit(u):
            return head.unit == u

        engine_free = ((unit(Unit.GEMM) & ~self.dce_cmd.valid) | unit(Unit.FENCE)
                       | ((unit(Unit.LOAD) | unit(Unit.SPMM)) & ~self.sae_cmd.valid))
        all_done = ~(t[Unit.LOAD].busy | t[Unit.SPMM].busy | t[Unit.GEMM].busy)
        unit_free = Cat(*(unit(u) & t[u].free for u in Unit)).any()
        issue, dispatch = Signal(), Signal()
        m.d.comb += issue.eq(staged & unit_free & engine_free & (~head.fence | all_done))
        m.d.sync += dispatch.eq(issue)
        with m.If(issue):
            m.d.sync += staged.eq(0)
        with m.If(dispatch):  # `head` still holds the issued descriptor
            m.d.sync += self.issued.eq(self.issued + 1)
            self._dispatch(m, head, unit, t, sae_owner)
        self._clear_routes(m, t)
        self._report(m, t)
        m.d.sync += self.cycles.eq(self.cycles + 1)
        m.d.comb += self.idle.eq(all_done & ~t[Unit.FENCE].busy & ~queue.r_stream.valid
                                 & ~staged & ~dispatch
                                 & ~self.status.valid
                                 & ~(t[Unit.LOAD].pending | t[Unit.SPMM].pending
                                     | t[Unit.GEMM].pending | t[Unit.FENCE].pending))
        return m

    def _dispatch(self, m, head, unit, t, sae_owner):
        """What issuing ``head`` does: start its channels, load its engine's command
        register, set its routes and its tracker. ``unit(u)``: the head is for ``u``."""
        mem, route, sc, dc = self.memory, self.route, self.sae_cmd.payload, self.dce_cmd.payload

        def start(channel, base, count=None):
            m.d.comb += [channel.start.eq(1), channel.base.eq(base)]
            if count is not None:
                m.d.comb += channel.count.eq(count)

        with m.If(unit(Unit.LOAD)):
            start(mem.x, head.src, Mux(head.from_xchg, 0, head.rows))
            m.d.sync += [self.sae_cmd.valid.eq(1), sae_owner.eq(Unit.LOAD),
                         sc.op.eq(SAEOp.LOAD), sc.bank.eq(head.bank), sc.rows.eq(head.rows),
                         route.x_from_xchg.eq(head.from_xchg)]
            m.d.comb += t[Unit.LOAD].issue.eq(1)
        with m.Elif(unit(Unit.SPMM)):
            start(mem.csr, head.src, head.src_len)
            start(mem.smask, head.mask_addr, Mux(head.mask, head.rows, 0))
            start(mem.sae, head.dst)
            m.d.sync += [self.sae_cmd.valid.eq(1), sae_owner.eq(Unit.SPMM),
                         sc.op.eq(SAEOp.SPMM), sc.bank.eq(head.bank), sc.rows.eq(head.rows),
                         sc.shift.eq(head.shift), sc.relu.eq(head.relu),
                         sc.mask.eq(head.mask), sc.follow.eq(head.follow),
                         route.sae_to_mem.eq(head.to_mem),
                         route.sae_to_xchg.eq(head.to_xchg)]
            if "keep" in self.layouts.desc_layout.members:  # partial sums (column windows)
                m.d.sync += [sc.keep.eq(head.keep), sc.accumulate.eq(head.accumulate)]
            m.d.comb += t[Unit.SPMM].issue.eq(1)
        with m.Elif(unit(Unit.GEMM)):
            start(mem.a, head.src, Mux(head.from_xchg, 0, head.src_len))
            start(mem.b, head.src_b, head.b_len)
            start(mem.dmask, head.mask_addr, Mux(head.mask, head.rows, 0))
            start(mem.dce, head.dst)
            m.d.sync += [self.dce_cmd.valid.eq(1), dc.op.eq(head.op), dc.rows.eq(head.rows),
                         dc.k.eq(head.k), dc.m.eq(head.m), dc.shift.eq(head.shift),
                         dc.relu.eq(head.relu), dc.mask.eq(head.mask),
                         route.a_from_xchg.eq(head.from_xchg),
                         route.dce_to_mem.eq(head.to_mem),
                         route.dce_to_xchg.eq(head.to_xchg)]
            m.d.comb += t[Unit.GEMM].issue.eq(1)
        with m.Elif(unit(Unit.FENCE)):
            m.d.comb += t[Unit.FENCE].issue.eq(1)

    def _clear_routes(self, m, t):
        """A finished operation moves no more rows: its routes are cleared."""
        route = self.route
        for u, names in ((Unit.LOAD, ("x_from_xchg",)),
                         (Unit.SPMM, ("sae_to_mem", "sae_to_xchg")),
                         (Unit.GEMM, ("a_from_xchg", "dce_to_mem", "dce_to_xchg"))):
            with m.If(t[u].finish):
                m.d.sync += [getattr(route, n).eq(0) for n in names]

    def _report(self, m, t):
        """Status records leave one a cycle, LOAD first."""
        # the record register loads whenever it may (its enable depends on nothing
        # else: it drives every bit of the record); the choice is in the data
        chosen = Signal.like(self.status.payload)
        any_pending = Cat(t[u].pending for u in Unit).any()
        advance = ~self.status.valid | self.status.ready
        for i, u in enumerate(Unit):
            with (m.If if i == 0 else m.Elif)(t[u].pending):
                m.d.comb += [chosen.eq(t[u].record), t[u].take.eq(advance)]
        with m.If(advance):
            m.d.sync += [self.status.valid.eq(any_pending), self.status.payload.eq(chosen),
                         self.completed.eq(self.completed + any_pending)]
