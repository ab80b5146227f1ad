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
from mixgcn.hdl.output_stage import OutputPath, engine_status_members, output_layout

__all__ = ["SAELayouts", "SAEOp", "SparseAggregationEngine"]


class SAEOp(enum.Enum, shape=1):
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


class SparseAggregationEngine(wiring.Component, SAELayouts):
    def __init__(self, config: SAEConfig):
        if not isinstance(config, SAEConfig):
            self._MustUse__silence = True  # never built: no "unused elaboratable" warning
            raise TypeError(f"expected an SAEConfig, got {config!r}")
        self.config = c = config
        SAELayouts.__init__(self, c)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "x": In(stream.Signature(self.x_layout)),
            "csr": In(stream.Signature(self.csr_layout)),
            "mask": In(stream.Signature(unsigned(c.lanes))),
            "out": Out(stream.Signature(self.out_layout)),
            **engine_status_members(c.counter_width, c.acc_width, extra=("load_cycles",)),
        })

    def elaborate(self, platform):
        c = self.config
        L, E = c.lanes, c.edges
        m = Module()

        # ------------------------------------------------------------ submodules
        m.submodules.out = path = OutputPath(
            lanes=L, width=c.width, acc_width=c.acc_width, depth=c.out_fifo_depth)
        wiring.connect(m, path.o, wiring.flipped(self.out))
        m.d.comb += [self.max_abs.eq(path.max_abs), self.saturated.eq(path.saturated)]

        # feature buffer: one read port per pipeline (on an FPGA, synthesis makes a
        # block-RAM replica per port), address = {bank, row}
        m.submodules.xbuf = xbuf = memory.Memory(
            shape=self.x_layout, depth=2 * c.max_nodes, init=[])
        reads = [xbuf.read_port() for _ in range(E)]
        writes = [xbuf.write_port()]

        # ----------------------------------------------------------------- loader
        load_busy = Signal()
        load_bank = Signal()
        load_left = Signal.like(self.cmd.payload.rows)
        load_addr = Signal(range(c.max_nodes))
        take_x = self.x.valid & self.x.ready
        m.d.comb += self.x.ready.eq(load_busy & (load_left != 0))
        for w in writes:
            m.d.comb += [w.addr.eq(Mux(load_bank, c.max_nodes, 0) + load_addr),
                         w.data.eq(self.x.payload), w.en.eq(take_x)]
        with m.If(take_x):
            m.d.sync += [load_addr.eq(load_addr + 1), load_left.eq(load_left - 1)]
        with m.If(load_busy & (load_left == 0)):
            m.d.sync += load_busy.eq(0)
        with m.If(load_busy):
            m.d.sync += self.load_cycles.eq(self.load_cycles + 1)

        # ---------------------------------------------------------------- compute
        spmm_busy = Signal()
        spmm_bank = Signal()
        rows_left = Signal.like(self.cmd.payload.rows)
        shift = Signal(range(c.acc_width))
        relu = Signal()
        mask_en = Signal()
        flushing = Signal()
        start_spmm = Signal()  # a SPMM command is accepted: its rows start from zero
        m.d.comb += [path.shift.eq(shift), path.relu.eq(relu), path.mask_en.eq(mask_en)]
        commit, credit = path.commit, path.credit  # as in the DCE

        beat = self.csr.payload
        need_mask = mask_en & beat.last
        # a following SPMM reads a bank the loader is still filling: a beat waits until
        # every row it gathers has been written
        filling = load_busy & (load_bank == spmm_bank)
        loaded = Cat(*((e >= beat.count) | (beat.col[e] < load_addr) for e in range(E))).all()
        inputs_ok = self.csr.valid & (~need_mask | self.mask.valid) & (~filling | loaded)
        room = ~beat.last | credit
        accept = Signal()
        active = spmm_busy & ~flushing & (rows_left != 0)
        m.d.comb += accept.eq(active & inputs_ok & room)
        m.d.comb += [self.csr.ready.eq(accept), self.mask.ready.eq(accept & need_mask),
                     commit.eq(accept & beat.last)]
        for e in range(E):
            m.d.comb += reads[e].addr.eq(Mux(spmm_bank, c.max_nodes, 0) + beat.col[e])
        with m.If(accept & beat.last):
            m.d.sync += rows_left.eq(rows_left - 1)

        # s1: the gathered rows arrive from the buffer; s2: products; s3: the beat's two
        # partial sums — `lo`, pairs before `split` (the rest of the row that ends here, or
        # the whole beat when no row ends), and `hi`, pairs after it (the next row's head).
        # `final`: this beat ends the command's last row.
        s1_valid, s1_last, s1_final = Signal(), Signal(), Signal()
        s1_val = Signal(data.ArrayLayout(signed(c.width), E))
        s1_lo = Signal(E)
        s1_mask = Signal(L)
        m.d.sync += [s1_valid.eq(accept), s1_last.eq(beat.last),
                     s1_final.eq(beat.last & (rows_left == 1)),
                     s1_mask.eq(Mux(mask_en, self.mask.payload, 0))]
        for e in range(E):  # pairs past `count` contribute nothing
            m.d.sync += [s1_val[e].eq(Mux(e < beat.count, beat.val[e], 0)),
                         s1_lo[e].eq(~beat.last | (e < beat.split))]

        s2_valid, s2_last, s2_final = Signal(), Signal(), Signal()
        s2_lo = Signal(E)
        s2_mask = Signal(L)
        prod = [[Signal(signed(2 * c.width), name=f"p{e}_{l}") for l in range(L)]
                for e in range(E)]
        m.d.sync += [s2_valid.eq(s1_valid), s2_last.eq(s1_last), s2_final.eq(s1_final),
                     s2_lo.eq(s1_lo), s2_mask.eq(s1_mask)]
        for e in range(E):
            for l in range(L):
                m.d.sync += prod[e][l].eq(reads[e].data[l] * s1_val[e])

        s3_valid, s3_last, s3_final = Signal(), Signal(), Signal()
        s3_mask = Signal(L)
        sum_width = 2 * c.width + E.bit_length()
        lo_sum = [Signal(signed(sum_width), name=f"lo{l}") for l in range(L)]
        hi_sum = [Signal(signed(sum_width), name=f"hi{l}") for l in range(L)]
        m.d.sync += [s3_valid.eq(s2_valid), s3_last.eq(s2_last), s3_final.eq(s2_final),
                     s3_mask.eq(s2_mask)]
        for l in range(L):
            m.d.sync += [lo_sum[l].eq(sum(Mux(s2_lo[e], prod[e][l], 0) for e in range(E))),
                         hi_sum[l].eq(sum(Mux(s2_lo[e], 0, prod[e][l]) for e in range(E)))]

        # acc holds the open row's partial sum. A beat that ends a row sends acc + lo to
        # the output stage and keeps hi (the next row's head); any other beat adds lo.
        acc = [Signal(signed(c.acc_width), name=f"acc{l}") for l in range(L)]
        feed = Signal(path.in_layout)
        feed_valid = Signal()
        m.d.sync += feed_valid.eq(s3_valid & s3_last)
        with m.If(s3_valid & s3_last):
            m.d.sync += [feed.acc[l].eq(acc[l] + lo_sum[l]) for l in range(L)]
            m.d.sync += [feed.mask.eq(s3_mask), feed.last.eq(s3_final)]
            m.d.sync += [acc[l].eq(hi_sum[l]) for l in range(L)]
        with m.Elif(s3_valid):
            m.d.sync += [acc[l].eq(acc[l] + lo_sum[l]) for l in range(L)]
        with m.If(start_spmm):
            m.d.sync += [acc[l].eq(0) for l in range(L)]
        m.d.comb += [path.i_valid.eq(feed_valid), path.i.eq(feed)]
        pipeline_empty = ~(s1_valid | s2_valid | s3_valid | feed_valid)

        # the compute unit finishes when its rows are in and the pipeline has drained
        with m.If(spmm_busy & (rows_left == 0)):
            m.d.comb += flushing.eq(1)
            with m.If(pipeline_empty):
                m.d.sync += spmm_busy.eq(0)

        # -------------------------------------------------------------- dispatch
        p = self.cmd.payload
        load_ok = ~load_busy & ~(spmm_busy & (spmm_bank == p.bank))
        spmm_ok = ~spmm_busy & ~(load_busy & (load_bank == p.bank) & ~p.follow)
        m.d.comb += self.cmd.ready.eq(Mux(p.op == SAEOp.LOAD, load_ok, spmm_ok))
        with m.If(self.cmd.valid & self.cmd.ready):
            with m.If(p.op == SAEOp.LOAD):
                m.d.sync += [load_busy.eq(1), load_bank.eq(p.bank), load_left.eq(p.rows),
                             load_addr.eq(0)]
            with m.Else():
                m.d.sync += [spmm_busy.eq(1), spmm_bank.eq(p.bank), rows_left.eq(p.rows),
                             shift.eq(p.shift), relu.eq(p.relu), mask_en.eq(p.mask),
                             self.op_cycles.eq(0)]
                m.d.comb += [path.clear.eq(1), start_spmm.eq(1)]
        m.d.comb += self.idle.eq(~load_busy & ~spmm_busy)

        # -------------------------------------------------------------- counters
        with m.If(spmm_busy):
            m.d.sync += self.op_cycles.eq(self.op_cycles + 1)
            with m.If(accept | flushing):
                m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
            with m.Elif(inputs_ok & ~room):
                m.d.sync += self.blocked_cycles.eq(self.blocked_cycles + 1)
            with m.Else():
                m.d.sync += self.starved_cycles.eq(self.starved_cycles + 1)
        return m
