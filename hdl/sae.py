"""The sparse aggregation engine (SAE): row-wise (Gustavson) SpMM ``Y = S · X``.

For row i of S and each non-zero (j, s_ij): ``acc_i += s_ij · X[j, lanes]``; after the
row's last non-zero, ``acc_i`` leaves through the shared output stage. The same
engine serves every sparse operand (docs/architecture.md, §1): ``Â · H``, and with sparse input
features ``X · W`` (S = X, the buffer holds W) and ``Xᵀ · G`` (S = Xᵀ, the buffer
holds G).

Streams (payloads are ``lib.data`` layouts):

- ``cmd`` — ``LOAD`` (fill a bank of the feature buffer with ``rows`` rows from ``x``)
  or ``SPMM`` (compute ``rows`` output rows from a bank);
- ``x`` — rows of the dense operand, L values a word, rows 0, 1, ... of the bank;
- ``csr`` — S in row order as *beats* of up to E (column, value) pairs, packed across
  row boundaries: the first ``count`` pairs are valid; a beat with ``last`` ends a row
  after its first ``split`` pairs, the pairs after them opening the next row. A beat
  ends at most one row, so an empty row costs one beat and a row of degree d about d/E.
  The pairs are spread over the E pipelines by position, whatever their rows: one row
  of ten thousand non-zeros keeps every pipeline busy, and so do many short ones (work
  is divided by non-zeros, not by rows). :func:`mixgcn.sim.sae_model.csr_beats` makes
  beats from a CSR matrix;
- ``mask`` — L bits an output row, read when the command sets ``mask`` (ReLU');
- ``out`` — output rows of L values, in row order; ``last`` marks the final row.

The feature buffer has two banks (``bank`` in the command): while a ``SPMM`` reads one,
a ``LOAD`` may fill the other, so passes over F > L features overlap loading with
computing. Commands are taken in order; a command waits while its bank is in use by
the other unit — except a ``SPMM`` with ``follow``, which starts while the ``LOAD``
before it is still filling its bank: each beat then waits until every row it gathers
has been written (``col < rows loaded``). Rows arrive in order, so when S's columns
stay close to its rows (node reordering, :mod:`mixgcn.golden.reorder`) the SpMM
trails its own load, or the DCE producing that load (the chip's DCE→SAE pipeline).
The buffer has one read port per pipeline.

When S gathers from more rows than a bank holds, the host runs it in column windows
(docs/tiling.md): a ``SPMM`` with ``keep`` leaves its rows' sums, at accumulator
width, in a partial-sum memory of ``partial_rows`` rows instead of sending them out,
and one with ``accumulate`` starts each row's sum from the kept one; only the last
window's rows reach the output stage, so each is rounded once.

Flow control, counters and statistics are as in the DCE: inside, the pipeline never
stalls; a row is admitted only when the output FIFO is sure to have room.
``busy_cycles`` / ``starved_cycles`` / ``blocked_cycles`` / ``op_cycles`` describe the
compute unit (cycles while a ``SPMM`` is in progress), ``load_cycles`` the loader.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import SAEConfig
from mixgcn.hdl.mac import Multiplier
from mixgcn.hdl.output_stage import (
    ActivityCounters,
    OutputPath,
    engine_status_members,
    output_layout,
)
from mixgcn.hdl.timing import collision_free_memory, copy, input_buffer

__all__ = ["AggregationPipeline", "FeatureLoader", "Gather", "SAELayouts", "SAEOp",
           "SparseAggregationEngine"]


class SAEOp(enum.Enum, shape=1):
    """An SAE command: fill a buffer bank, or compute an SpMM from one."""

    LOAD = 0
    SPMM = 1


class SAELayouts:
    """Payload layouts of the SAE's streams for a configuration."""

    def __init__(self, c: SAEConfig):
        self.cmd_layout = data.StructLayout({
            "op": SAEOp,
            "bank": 1,
            "rows": range(max(c.max_nodes, 1 << 24) + 1),
            "shift": range(c.acc_width),
            "relu": 1,
            "mask": 1,
            "follow": 1,
            # column windows (SAEConfig.partial_rows > 0): row sums are kept as partial
            # sums instead of leaving (`keep`), and/or start from the kept ones
            # (`accumulate`)
            **({"keep": 1, "accumulate": 1} if c.partial_rows else {}),
        })
        self.x_layout = data.ArrayLayout(signed(c.width), c.lanes)
        self.csr_layout = data.StructLayout({
            "col": data.ArrayLayout(range(c.max_nodes), c.edges),
            "val": data.ArrayLayout(signed(c.width), c.edges),
            "count": range(c.edges + 1),
            "split": range(c.edges + 1),
            "last": 1,
        })
        self.out_layout = output_layout(c.width, c.lanes)


class FeatureLoader(wiring.Component):
    """Fills a bank of the feature buffer with the rows arriving on ``x``.

    ``start`` (one cycle, while not ``busy``) begins a load of ``rows`` rows into
    ``bank`` (kept as ``fill_bank``); row i is written at address i of that bank's
    memory through ``write`` the cycle it is taken from ``x``. ``loaded`` counts the
    rows written so far (a following SPMM gathers a row once it is below ``loaded``);
    ``busy`` falls once all are in. ``cycles`` counts the cycles spent loading."""

    def __init__(self, c: SAEConfig, x_layout, rows_shape):
        self.config = c
        super().__init__({
            "start": In(1), "bank": In(1), "rows": In(rows_shape),
            "x": In(stream.Signature(x_layout)),
            # the buffer's write port signature, flipped: the loader drives it
            "write": In(memory.WritePort.Signature(
                addr_width=max(1, (c.max_nodes - 1).bit_length()), shape=x_layout)),
            "busy": Out(1), "fill_bank": Out(1), "loaded": Out(range(c.max_nodes + 1)),
            "cycles": Out(unsigned(c.counter_width)),
        })
        # rows still to come, and whether any (for the proofs)
        self.left, self.more = Signal(rows_shape), Signal()

    def elaborate(self, platform):
        m = Module()
        left = self.left
        # rows still to come, as a register: `x.ready` starts at flip-flops, not at a
        # 25-bit comparison (which, through the handshake and the buffer's write
        # enables, was the `ecp5` chip's slowest path)
        more = self.more
        take = self.x.valid & self.x.ready
        m.d.comb += [self.x.ready.eq(self.busy & more),
                     self.write.addr.eq(self.loaded),
                     self.write.data.eq(self.x.payload), self.write.en.eq(take)]
        with m.If(take):
            m.d.sync += [self.loaded.eq(self.loaded + 1), left.eq(left - 1),
                         more.eq(left != 1)]
        with m.If(self.busy & ~more):
            m.d.sync += self.busy.eq(0)
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), self.fill_bank.eq(self.bank), left.eq(self.rows),
                         more.eq(self.rows != 0), self.loaded.eq(0)]
        return m


class Gather(wiring.Signature):
    """The buffer reads of the edge pipelines, seen from the pipelines: ``addr[e]`` (a
    row of a bank) out, the row of each bank, ``data[bank][e]``, back one cycle later.
    Each bank (each lane of it) is a memory of its own, so no multiplexer stands between
    a block RAM's output and the register that takes it: the pipeline registers both
    banks' rows and chooses after."""

    def __init__(self, c: SAEConfig, x_layout):
        aw = max(1, (c.max_nodes - 1).bit_length())
        super().__init__({"addr": Out(data.ArrayLayout(unsigned(aw), c.edges)),
                          "data": In(data.ArrayLayout(data.ArrayLayout(x_layout, c.edges), 2))})


class AggregationPipeline(wiring.Component):
    """The SAE's compute unit: takes CSR beats while ``active``, gathers their rows from
    the buffer (``gather``), multiplies, and sums each row into an accumulator that
    leaves on ``feed`` toward the output stage.

    A beat from ``csr`` first waits in a register (``held``), which takes it while
    ``active``. ``rows_in``, a register beside it, says every row it gathers is loaded
    (while the loader is ``filling`` this bank: ``col < loaded``; ``loaded`` only grows,
    so the check stays true). The comparison thus ends at a register, in no handshake:
    on an FPGA it was the slowest path of the small chip, and later of the `ecp5` one.
    The held beat is taken (``accept``) once its rows are in, its mask
    (for a row-ending beat with ``mask_en``) is there and, for a row-ending beat, the
    output path has ``credit`` (``commit`` spends it; ``row`` marks the beat that ends
    a row). A new beat enters ``held`` in the cycle the last one is accepted, but for
    the command's last.
    Latency: a row's sum reaches ``feed`` six cycles after its last beat is taken: s1,
    the gathered rows arrive; r, they are registered; g, the multipliers' operand
    registers; s2, products; s3, the beat's partial sums — ``lo``, pairs
    before ``split`` (the rest of the row ending here, or the whole beat when none
    does), and ``hi``, pairs after it (the next row's head); then the accumulator.
    ``start`` zeroes the accumulator (a cycle later); ``final`` marks the command's
    last row; ``empty``: nothing in flight; ``in_flight``: the rows committed and not
    yet fed. ``waiting``: a beat is there but the output path has no room.

    Partial sums (``SAEConfig.partial_rows`` > 0), for an SpMM run in column windows:
    the command's i-th row is row i of a memory of row sums at accumulator width. With
    ``accumulate``, the row's sum starts from the kept one (read at r, registered at
    s2, added into the row's ``lo`` at s3); with ``keep``, the row's sum is written
    back there (``kept``, one cycle a row) instead of going to the output stage, so it
    needs no credit. Within a command rows are distinct, so a read never meets a write
    to its row; the next command starts once the pipeline is empty.
    """

    LATENCY = 6  # cycles from a row's last beat taken to its sum on ``feed``

    def __init__(self, c: SAEConfig, layouts: SAELayouts, in_layout):
        self.config, self.in_layout = c, in_layout
        super().__init__({
            "csr": In(stream.Signature(layouts.csr_layout)),
            "mask": In(stream.Signature(unsigned(c.lanes))),
            "gather": Out(Gather(c, layouts.x_layout)),
            "active": In(1), "bank": In(1), "mask_en": In(1), "filling": In(1),
            "loaded": In(range(c.max_nodes + 1)), "credit": In(1), "final": In(1),
            "start": In(1), "keep": In(1), "accumulate": In(1),
            "accept": Out(1), "row": Out(1), "commit": Out(1), "waiting": Out(1),
            "kept": Out(1), "empty": Out(1), "in_flight": Out(range(self.LATENCY + 1)),
            # the pairs of the beat being accepted whose gathered rows count (the
            # others are multiplied by zero): what the buffer's reads must get right
            "gathered": Out(c.edges),
            "feed": Out(stream.Signature(in_layout, always_ready=True)),
        })
        # the beat waiting to be accepted, and whether there is one (for the proofs)
        self.beat, self.held = Signal(layouts.csr_layout), Signal()
        self.rows_in = Signal()  # the held beat's rows are loaded (or not being loaded)
        # the partial sums' read (used or not) and write rows, and the command's row a
        # beat ends (for the proofs)
        rows = range(max(c.partial_rows, 1))
        self.sum_read_row, self.sum_read_used = Signal(rows), Signal()
        self.sum_write_row, self.row_at = Signal(rows), Signal(rows)

    def elaborate(self, platform):
        c = self.config
        L, E = c.lanes, c.edges
        m = Module()
        arriving = self.csr.payload
        beat, held, rows_in = self.beat, self.held, self.rows_in

        def rows_loaded(b):
            return ~self.filling | Cat(*((e >= b.count) | (b.col[e] < self.loaded)
                                         for e in range(E))).all()
        # not past the command's last row: the next command's beats are checked in its
        # own context (its bank, its fill)
        ends = beat.last & self.final
        m.d.comb += self.csr.ready.eq(self.active & (~held | (self.accept & ~ends)))
        # whether the held beat's rows are all loaded: a register beside the beat, set
        # as it comes and checked again each cycle it waits. The comparison is in no
        # handshake: in `ready` it reached back into the CSR reader's FIFO, the slowest
        # path of the `ecp5` chip behind its host link (docs/boards.md, step 33). A beat
        # whose rows are loaded in cycle t is still accepted at t + 1 at the soonest.
        with m.If(self.csr.valid & self.csr.ready):
            m.d.sync += [beat.eq(arriving), held.eq(1), rows_in.eq(rows_loaded(arriving))]
        with m.Else():
            m.d.sync += rows_in.eq(rows_loaded(beat))
            with m.If(self.accept):
                m.d.sync += held.eq(0)

        need_mask = self.mask_en & beat.last
        inputs_ok = held & rows_in & (~need_mask | self.mask.valid)
        room = ~beat.last | self.credit | self.keep
        m.d.comb += [self.accept.eq(self.active & inputs_ok & room),
                     self.waiting.eq(inputs_ok & ~room), self.row.eq(self.accept & beat.last),
                     self.mask.ready.eq(self.accept & need_mask),
                     self.commit.eq(self.row & ~self.keep)]
        for e in range(E):
            m.d.comb += [self.gather.addr[e].eq(beat.col[e]),
                         self.gathered[e].eq(self.accept & (e < beat.count))]

        s1_valid, s1_last, s1_final, s1_lo, s1_mask = (
            Signal(), Signal(), Signal(), Signal(E), Signal(L))
        s1_val = Signal(data.ArrayLayout(signed(c.width), E))
        # the command's row a beat ends (its partial sum's address)
        row_at = self.row_at
        with m.If(self.start):
            m.d.sync += row_at.eq(0)
        with m.Elif(self.row):
            m.d.sync += row_at.eq(row_at + 1)
        s1_row = Signal.like(row_at)
        m.d.sync += [s1_valid.eq(self.accept), s1_last.eq(beat.last), s1_row.eq(row_at),
                     s1_final.eq(beat.last & self.final),
                     s1_mask.eq(Mux(self.mask_en, self.mask.payload, 0))]
        for e in range(E):  # pairs past `count` contribute nothing
            m.d.sync += [s1_val[e].eq(Mux(e < beat.count, beat.val[e], 0)),
                         s1_lo[e].eq(~beat.last | (e < beat.split))]

        # the gathered rows of both banks registered as they leave the buffer (r): a
        # block RAM's output takes most of a cycle (5.8 ns on an ECP5), so no path runs
        # on from it, not even through the bank's multiplexer, which comes after
        r_valid, r_last, r_final, r_lo, r_mask = (
            Signal(), Signal(), Signal(), Signal(E), Signal(L))
        # r_data without a reset: the RAMs' own output registers on an ECP5
        # (mixgcn.gen.netlist); the rows count only beside r_valid
        r_val, r_data = Signal.like(s1_val), Signal.like(self.gather.data, reset_less=True)
        r_row = self.sum_read_row
        m.d.sync += [r_valid.eq(s1_valid), r_last.eq(s1_last), r_final.eq(s1_final),
                     r_row.eq(s1_row), r_lo.eq(s1_lo), r_mask.eq(s1_mask), r_val.eq(s1_val),
                     r_data.eq(self.gather.data)]
        # the bank holds for a whole command (the next starts once the pipeline is
        # empty); each lane chooses from its own copy of it
        lane_bank = [copy(1, name=f"bank{lane}") for lane in range(c.lanes)]
        m.d.sync += [x.eq(self.bank) for x in lane_bank]

        # the multipliers register their operands (g), then their products (s2): they
        # run from register to register (inside the DSP blocks on an ECP5)
        g_valid, g_last, g_final, g_lo, g_mask = (
            Signal(), Signal(), Signal(), Signal(E), Signal(L))
        g_row = Signal.like(row_at)
        m.d.sync += [g_valid.eq(r_valid), g_last.eq(r_last), g_final.eq(r_final),
                     g_lo.eq(r_lo), g_mask.eq(r_mask), g_row.eq(r_row)]
        prod = []
        for e in range(E):
            prod.append([])
            for lane in range(L):
                m.submodules[f"mul{e}_{lane}"] = mul = Multiplier(c.width)
                m.d.comb += [mul.a.eq(Mux(lane_bank[lane], r_data[1][e][lane],
                                          r_data[0][e][lane])),
                             mul.b.eq(r_val[e])]
                prod[e].append(mul.product)

        s2_valid, s2_last, s2_final, s2_mask = Signal(), Signal(), Signal(), Signal(L)
        s2_row = Signal.like(row_at)
        m.d.sync += [s2_valid.eq(g_valid), s2_last.eq(g_last), s2_final.eq(g_final),
                     s2_mask.eq(g_mask), s2_row.eq(g_row)]

        s3_valid, s3_last, s3_final, s3_mask = Signal(), Signal(), Signal(), Signal(L)
        s3_row, fed_row = Signal.like(row_at), self.sum_write_row
        sum_width = 2 * c.width + E.bit_length()
        # the kept partial sum of the row a beat ends, for its lo (s2: registered as it
        # leaves the memory, whose output starts no other path)
        part = [0] * L
        if c.partial_rows:
            sum_width = c.acc_width
            # collision-free (mixgcn.hdl.timing): a command's rows are distinct, so the
            # row read is never the row written back (proved: mixgcn.sim.verify.proofs)
            sums = collision_free_memory(shape=data.ArrayLayout(signed(c.acc_width), L),
                                         depth=c.partial_rows)
            m.submodules.partial = sums
            part_read = sums.read_port()
            s2_part = Signal.like(part_read.data, reset_less=True)  # as r_data
            m.d.comb += [part_read.addr.eq(r_row),
                         self.sum_read_used.eq(r_valid & r_last & self.accumulate)]
            m.d.sync += s2_part.eq(part_read.data)
            lane_add = [copy(1, name=f"add{lane}") for lane in range(c.lanes)]
            m.d.sync += [x.eq(self.accumulate & g_last) for x in lane_add]
            part = [Mux(lane_add[lane], s2_part[lane], 0) for lane in range(c.lanes)]
        lo = [Signal(signed(sum_width), name=f"lo{lane}") for lane in range(c.lanes)]
        hi = [Signal(signed(sum_width), name=f"hi{lane}") for lane in range(c.lanes)]
        m.d.sync += [s3_valid.eq(s2_valid), s3_last.eq(s2_last), s3_final.eq(s2_final),
                     s3_mask.eq(s2_mask), s3_row.eq(s2_row)]
        # each lane steers its adders from its own copies of the beat's flags
        # (mixgcn.hdl.timing), not from one register spanning all lanes
        lane_lo = [copy(E, name=f"lo_sel{lane}") for lane in range(c.lanes)]
        lane_valid = [copy(1, name=f"valid{lane}") for lane in range(c.lanes)]
        lane_end = [copy(1, name=f"end{lane}") for lane in range(c.lanes)]
        m.d.sync += [*(x.eq(g_lo) for x in lane_lo), *(x.eq(s2_valid) for x in lane_valid),
                     *(x.eq(s2_valid & s2_last) for x in lane_end)]
        for lane in range(L):
            sel = lane_lo[lane]
            m.d.sync += [lo[lane].eq(sum(Mux(sel[e], prod[e][lane], 0) for e in range(E))
                                     + part[lane]),
                         hi[lane].eq(sum(Mux(sel[e], 0, prod[e][lane]) for e in range(E)))]

        # acc holds the open row's partial sum. A beat that ends a row sends acc + lo to
        # the output stage and keeps hi (the next row's head); any other beat adds lo.
        acc = [Signal(signed(c.acc_width), name=f"acc{lane}") for lane in range(c.lanes)]
        # a finished row's sum (`fed`) goes to the output stage, or with `keep` back
        # into the partial sums
        feed, fed = self.feed.payload, Signal()
        m.d.sync += [fed.eq(s3_valid & s3_last), fed_row.eq(s3_row)]
        m.d.comb += [self.feed.valid.eq(fed & ~self.keep), self.kept.eq(fed & self.keep)]
        if c.partial_rows:
            part_write = sums.write_port()
            m.d.comb += [part_write.addr.eq(fed_row), part_write.data.eq(feed.acc),
                         part_write.en.eq(self.kept)]
        with m.If(s3_valid & s3_last):
            m.d.sync += [feed.mask.eq(s3_mask), feed.last.eq(s3_final)]
        for lane in range(L):
            with m.If(lane_end[lane]):
                m.d.sync += [feed.acc[lane].eq(acc[lane] + lo[lane]), acc[lane].eq(hi[lane])]
            with m.Elif(lane_valid[lane]):
                m.d.sync += acc[lane].eq(acc[lane] + lo[lane])
        # `start` zeroes them a cycle later, from each lane's copy of it: the command's
        # first beat reaches them five cycles after it at the soonest
        lane_start = [copy(1, name=f"start{lane}") for lane in range(c.lanes)]
        m.d.sync += [x.eq(self.start) for x in lane_start]
        for lane in range(L):
            with m.If(lane_start[lane]):
                m.d.sync += acc[lane].eq(0)
        # rows on their way to the output stage (a kept row takes no credit)
        m.d.comb += [self.empty.eq(~(s1_valid | r_valid | g_valid | s2_valid | s3_valid
                                     | fed)),
                     self.in_flight.eq(Mux(self.keep, 0, (s1_valid & s1_last)
                                           + (r_valid & r_last) + (g_valid & g_last)
                                           + (s2_valid & s2_last) + (s3_valid & s3_last)
                                           + fed))]
        return m


class SparseAggregationEngine(wiring.Component, SAELayouts):
    """See the module docstring: an :class:`OutputPath`, the double-banked feature
    buffer, a :class:`FeatureLoader`, an :class:`AggregationPipeline` and the command
    dispatch between them."""

    def __new__(cls, config, *args, **kwargs):
        if not isinstance(config, SAEConfig):  # refused before it is an elaboratable
            raise TypeError(f"expected an SAEConfig, got {config!r}")
        return super().__new__(cls)

    def __init__(self, config: SAEConfig):
        self.config = c = config
        SAELayouts.__init__(self, c)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "x": In(stream.Signature(self.x_layout)),
            "csr": In(stream.Signature(self.csr_layout)),
            "mask": In(stream.Signature(unsigned(c.lanes))),
            "out": Out(stream.Signature(self.out_layout)),
            # a row of a `keep` command went into the partial sums (one cycle a row)
            "kept": Out(1),
            **engine_status_members(c.counter_width, c.acc_width, extra=("load_cycles",)),
        })
        self.path = OutputPath(lanes=c.lanes, width=c.width, acc_width=c.acc_width,
                               depth=c.out_fifo_depth)
        self.loader = FeatureLoader(c, self.x_layout, self.cmd_layout["rows"].shape)
        self.pipe = AggregationPipeline(c, self, self.path.in_layout)
        # the buffer's writes as they reach it, a cycle after the loader takes a row
        # (each bank's enable, the row; the proofs watch them)
        aw = max(1, (c.max_nodes - 1).bit_length())
        self.buffer_write_en, self.buffer_write_addr = Signal(2), Signal(aw)
        # the SPMM in progress, its rows still to take, and whether none or one is left
        # (for the proofs)
        self.busy, self.rows_left = Signal(), Signal.like(self.cmd.payload.rows)
        self.none_left, self.one_left = Signal(), Signal()

    def elaborate(self, platform):
        c = self.config
        m = Module()
        m.submodules.out = path = self.path
        wiring.connect(m, path.o, wiring.flipped(self.out))
        # feature buffer: a memory per bank and lane, each with one read port per
        # pipeline (on an FPGA, synthesis makes a block-RAM replica per port). Why one a
        # lane: a memory as narrow as a lane is deep enough to fill whole block RAMs side
        # by side (ECP5: 4,096 x 4 bits each), while a row-wide one was cut into blocks of
        # fewer rows, joined by a multiplexer right after the block RAM's slow output.
        # Collision-free (mixgcn.hdl.timing): the loader writes row `loaded` of its
        # bank while a SpMM on that bank gathers rows below `loaded` only; what is read
        # from the other bank is not used (proved: mixgcn.sim.verify.proofs)
        banks = [[collision_free_memory(shape=signed(c.width), depth=c.max_nodes)
                  for _ in range(c.lanes)] for _ in range(2)]
        m.submodules.loader = loader = self.loader
        m.submodules.pipe = pipe = self.pipe
        m.submodules.counters = counters = ActivityCounters(c.counter_width)
        wiring.connect(m, wiring.flipped(self.x), loader.x)
        # the CSR beats through a skid buffer (hdl/timing.py): the pipeline's `ready`
        # depends on its held beat, credit and mask, and it reached the CSR reader's
        # FIFO across the die (the `ecp5` chip's slowest path behind its host link,
        # docs/boards.md, step 34); the buffer's `ready` is a flip-flop
        wiring.connect(m, input_buffer(m, "csr", self.csr), pipe.csr)
        wiring.connect(m, wiring.flipped(self.mask), pipe.mask)
        # the loader's writes reach the buffer a cycle later, from registers (the row,
        # a word a lane, an enable a bank), so no path runs from the loader's handshake
        # across the die into the RAMs' write enables (the `ecp5` chip's slowest path
        # at 72.28 MHz). Not copies a bank and lane (mixgcn.hdl.timing): with those,
        # nextpnr's router no longer finished the `ecp5` chip within an hour; without,
        # it routes at 91.63 MHz (docs/boards.md, step 17). A row counts as loaded a
        # cycle before it is written, and that is soon enough: a beat checked against
        # `loaded` is gathered a cycle later at the soonest (it waits in `held`), and
        # the sparse engine's proof says so
        wdata = [Signal(signed(c.width), name=f"wdata{lane}") for lane in range(c.lanes)]
        m.d.sync += [self.buffer_write_addr.eq(loader.write.addr),
                     *(wdata[lane].eq(loader.write.data[lane]) for lane in range(c.lanes)),
                     *(self.buffer_write_en[b].eq(loader.write.en & (loader.fill_bank == b))
                       for b in range(2))]
        for b, lanes in enumerate(banks):
            for lane, buf in enumerate(lanes):
                m.submodules[f"xbuf{b}_{lane}"] = buf
                w = buf.write_port()
                m.d.comb += [w.addr.eq(self.buffer_write_addr), w.data.eq(wdata[lane]),
                             w.en.eq(self.buffer_write_en[b])]
                for e in range(c.edges):
                    port = buf.read_port()
                    m.d.comb += [port.addr.eq(pipe.gather.addr[e]),
                                 pipe.gather.data[b][e][lane].eq(port.data)]

        busy, bank, rows_left = self.busy, Signal(), self.rows_left
        # no row / one row left to take: registers, as they steer the pipeline's
        # handshakes (a 32-bit comparison in front of them was a slow path)
        none_left, one_left = self.none_left, self.one_left
        flushing = busy & none_left  # rows in: the pipeline drains
        wiring.connect(m, pipe.feed, path.i)
        m.d.comb += [path.commit.eq(pipe.commit), pipe.credit.eq(path.credit),
                     pipe.active.eq(busy & ~flushing), pipe.bank.eq(bank),
                     pipe.filling.eq(loader.busy & (loader.fill_bank == bank)),
                     pipe.loaded.eq(loader.loaded), pipe.final.eq(one_left),
                     pipe.mask_en.eq(path.mask_en), self.kept.eq(pipe.kept),
                     self.max_abs.eq(path.max_abs), self.saturated.eq(path.saturated),
                     self.load_cycles.eq(loader.cycles)]
        with m.If(pipe.row):
            m.d.sync += [rows_left.eq(rows_left - 1), none_left.eq(one_left),
                         one_left.eq(rows_left == 2)]
        with m.If(flushing & pipe.empty & ~path.busy):  # statistics final
            m.d.sync += busy.eq(0)

        # dispatch: a command waits while its bank is in use by the other unit — except
        # a SPMM with `follow`, which trails the LOAD filling its bank
        p = self.cmd.payload
        load_ok = ~loader.busy & ~(busy & (bank == p.bank))
        spmm_ok = ~busy & ~(loader.busy & (loader.fill_bank == p.bank) & ~p.follow)
        m.d.comb += self.cmd.ready.eq(Mux(p.op == SAEOp.LOAD, load_ok, spmm_ok))
        take = self.cmd.valid & self.cmd.ready
        m.d.comb += [loader.start.eq(take & (p.op == SAEOp.LOAD)), loader.bank.eq(p.bank),
                     loader.rows.eq(p.rows)]
        with m.If(take & (p.op == SAEOp.SPMM)):
            m.d.sync += [busy.eq(1), bank.eq(p.bank), rows_left.eq(p.rows),
                         none_left.eq(p.rows == 0), one_left.eq(p.rows == 1),
                         path.shift.eq(p.shift), path.relu.eq(p.relu), path.mask_en.eq(p.mask)]
            if c.partial_rows:
                m.d.sync += [pipe.keep.eq(p.keep), pipe.accumulate.eq(p.accumulate)]
            m.d.comb += [path.clear.eq(1), pipe.start.eq(1), counters.start.eq(1)]
        m.d.comb += [self.idle.eq(~loader.busy & ~busy),
                     counters.active.eq(busy), counters.moved.eq(pipe.accept | flushing),
                     counters.blocked.eq(pipe.waiting), *counters.drive(self)]
        return m
