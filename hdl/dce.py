"""The dense combination engine (DCE): ``X·W``, ``X·Wᵀ`` and ``Xᵀ·G`` on an R × C MAC array.

Streams (payloads are ``lib.data`` layouts; Verilog ports ``<name>__payload``, ...):

- ``cmd`` — one :data:`command layout <DenseCombinationEngine.cmd_layout>` per operation;
- ``a`` — rows of X, R values a word: row *i* arrives as ⌈k/R⌉ words, lanes past *k* in the
  last word are ignored (Xᵀ·G: one word a row, ``x_i[k0:k0+R]``);
- ``b`` — ``max(R, C)`` values a word: the weights, then nothing (``X·W``, ``X·Wᵀ``), or
  one gradient row ``g_i[m0:m0+C]`` beside each ``a`` word (``Xᵀ·G``);
- ``mask`` — C bits an output row, read only when the command sets ``mask`` (ReLU');
- ``out`` — output rows of C values; ``last`` marks an operation's final row.

One command computes one output tile of at most C columns; wider outputs are
computed tile by tile, the caller streaming X again for each (what weight-stationary
arrays do). The caller keeps ``1 <= k <= max_k`` and ``1 <= m <= C`` (and, for Xᵀ·G,
``k <= R``, ``rows <= max_rows``), which the driver checks.

Operations:

- ``XW`` — weight-stationary ``Y = X·W``: the weights come first as k words, word *j*
  = ``W[j, m0:m0+C]``; MAC (r, c) then holds ``W[jR + r, c]`` for every chunk *j* in
  its row of the weight store. Each input word feeds all R×C MACs; after a row's last
  word the C column sums (over r) leave through the output stage.
- ``XWT`` — ``Y = X·Wᵀ`` with W stored as rows ``[M, K]``: the weights come as
  ⌈k/R⌉·m words, word (j, c) = ``W[m0 + c, jR : jR+R]``, written down column c of the
  array — the transposition happens as the weights are loaded, the datapath is XW's.
- ``XTG`` — output-stationary ``dW = Xᵀ·G``: each (a, b) pair adds the outer product
  ``x_i ⊗ g_i`` into the R×C accumulators; after ``rows`` pairs, the first k rows of the
  accumulators drain, one output row a cycle.

Flow control: inside, the pipeline never stalls; a row is admitted only when the
output FIFO (``out_fifo_depth``) is sure to have room for it, so backpressure on
``out`` throttles the inputs and nothing is ever dropped.

Performance counters (cycles while an operation is in progress): ``busy_cycles``
(a word or row moved), ``starved_cycles`` (waiting for an input), ``blocked_cycles``
(waiting for room at the output), plus ``op_cycles`` (the last operation's length)
and the output stage's ``max_abs``/``saturated`` for the last operation.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import DCEConfig
from mixgcn.hdl.mac import MACCell
from mixgcn.hdl.output_stage import OutputPath, engine_status_members, output_layout

__all__ = ["DCELayouts", "DCEOp", "DenseCombinationEngine"]


class DCEOp(enum.Enum, shape=2):
    XW = 0
    XWT = 1
    XTG = 2


class DCELayouts:
    """The payload layouts of the DCE's streams for a configuration (testbenches and
    drivers pack words with these)."""

    def __init__(self, c: DCEConfig):
        self.cmd_layout = data.StructLayout({
            "op": DCEOp,
            "rows": unsigned(32),
            "k": range(c.max_k + 1),
            "m": range(c.cols + 1),
            "shift": range(c.acc_width),
            "relu": 1,
            "mask": 1,
        })
        self.a_layout = data.ArrayLayout(signed(c.width), c.rows)
        self.b_layout = data.ArrayLayout(signed(c.width), c.b_lanes)
        self.out_layout = output_layout(c.width, c.cols)


class DenseCombinationEngine(wiring.Component, DCELayouts):
    def __init__(self, config: DCEConfig):
        if not isinstance(config, DCEConfig):
            self._MustUse__silence = True  # never built: no "unused elaboratable" warning
            raise TypeError(f"expected a DCEConfig, got {config!r}")
        self.config = c = config
        DCELayouts.__init__(self, c)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "a": In(stream.Signature(self.a_layout)),
            "b": In(stream.Signature(self.b_layout)),
            "mask": In(stream.Signature(unsigned(c.cols))),
            "out": Out(stream.Signature(self.out_layout)),
            **engine_status_members(c.counter_width, c.acc_width),
        })

    def elaborate(self, platform):
        c = self.config
        R, C = c.rows, c.cols
        m = Module()

        # ---------------------------------------------------------------- command
        op = Signal(DCEOp)
        rows_left = Signal(32)
        k = Signal(range(c.max_k + 1))
        mcols = Signal(range(C + 1))
        shift = Signal(range(c.acc_width))
        relu = Signal()
        mask_en = Signal()

        # ------------------------------------------------------------ submodules
        m.submodules.out = path = OutputPath(
            lanes=C, width=c.width, acc_width=c.acc_width, depth=c.out_fifo_depth)
        wiring.connect(m, path.o, wiring.flipped(self.out))
        m.d.comb += [
            path.shift.eq(shift), path.relu.eq(relu), path.mask_en.eq(mask_en),
            self.max_abs.eq(path.max_abs), self.saturated.eq(path.saturated),
        ]

        stores, reads, writes = [], [], []
        for r in range(R):
            mem = memory.Memory(shape=data.ArrayLayout(signed(c.width), C),
                                depth=c.weight_depth, init=[])
            m.submodules[f"wstore{r}"] = mem
            stores.append(mem)
            reads.append(mem.read_port())
            writes.append(mem.write_port(granularity=1))

        cells = [[MACCell(c.width, c.acc_width) for _ in range(C)] for _ in range(R)]
        for r in range(R):
            for col in range(C):
                m.submodules[f"mac{r}_{col}"] = cells[r][col]

        # a row may enter the pipeline only with the output path's credit
        commit, credit = path.commit, path.credit

        # ------------------------------------------------------- input control
        # `base` = index of the first reduction element of the current chunk
        base = Signal(range(c.max_k + c.rows + 1))
        words = Signal(range(c.max_k + 1))  # weight words loaded (XW)
        chunk = Signal(range(c.weight_depth + 1))
        col = Signal(range(C + 1))
        last_chunk = base + R >= k
        drain_row = Signal(range(R + 1))

        accept = Signal()  # an `a` word (and for XTG a `b` word) enters the pipeline
        first = Signal()
        row_end = Signal()  # the accepted word completes an output row (XW/XWT)
        want = Signal()  # the state has work it would do now (for the counters)
        blocked = Signal()
        moved = Signal()

        lane_ok = Cat(*(base + r < k for r in range(R)))
        a_masked = [Mux(lane_ok[r], self.a.payload[r], 0) for r in range(R)]

        # pipeline registers: s1 (memory read in flight), then the cells' own two stages
        s1_valid, s1_first, s1_row_end, s1_last = Signal(), Signal(), Signal(), Signal()
        s1_a = Signal(data.ArrayLayout(signed(c.width), R))
        s1_b = Signal(data.ArrayLayout(signed(c.width), C))
        s1_mask = Signal(C)
        m.d.sync += [
            s1_valid.eq(accept), s1_first.eq(first), s1_row_end.eq(row_end),
            s1_last.eq(row_end & (rows_left == 1)),
        ]
        with m.If(accept):
            m.d.sync += [s1_a[r].eq(a_masked[r]) for r in range(R)]
            m.d.sync += [s1_b[x].eq(self.b.payload[x]) for x in range(C)]
            m.d.sync += s1_mask.eq(Mux(mask_en, self.mask.payload, 0))

        # cells see s1; the row's end reaches the accumulators two cycles later
        s2_end, s3_end = Signal(), Signal()
        s2_last, s3_last = Signal(), Signal()
        s2_mask, s3_mask = Signal(C), Signal(C)
        m.d.sync += [s2_end.eq(s1_valid & s1_row_end), s3_end.eq(s2_end),
                     s2_last.eq(s1_last), s3_last.eq(s2_last),
                     s2_mask.eq(s1_mask), s3_mask.eq(s2_mask)]
        pipeline_empty = ~(s1_valid | s2_end | s3_end)

        clear = Signal()
        for r in range(R):
            for x in range(C):
                cell = cells[r][x]
                m.d.comb += [
                    cell.a.eq(s1_a[r]),
                    cell.b.eq(Mux(op == DCEOp.XTG, s1_b[x], reads[r].data[x])),
                    cell.en.eq(s1_valid),
                    cell.first.eq(s1_first),
                    cell.clear.eq(clear),
                ]
            m.d.comb += reads[r].addr.eq(chunk)

        # output-stage feed: column sums (XW/XWT) or an accumulator row (XTG drain)
        col_sums = [sum(cells[r][x].acc for r in range(R)) for x in range(C)]
        drain = Signal()
        feed = Signal(path.in_layout)
        feed_valid = Signal()
        m.d.sync += feed_valid.eq(s3_end | drain)
        # columns past the tile's width m hold stale weights: they leave as zeros
        with m.If(s3_end):
            m.d.sync += [feed.acc[x].eq(Mux(x < mcols, col_sums[x], 0)) for x in range(C)]
            m.d.sync += [feed.mask.eq(s3_mask), feed.last.eq(s3_last)]
        with m.Elif(drain):
            row_sel = [Signal(signed(c.acc_width), name=f"drain_sel{x}") for x in range(C)]
            for x in range(C):
                with m.Switch(drain_row):
                    for r in range(R):
                        with m.Case(r):
                            m.d.comb += row_sel[x].eq(cells[r][x].acc)
            m.d.sync += [feed.acc[x].eq(Mux(x < mcols, row_sel[x], 0)) for x in range(C)]
            m.d.sync += [feed.mask.eq(0), feed.last.eq(drain_row + 1 == k)]
        m.d.comb += [path.i_valid.eq(feed_valid), path.i.eq(feed)]

        # ------------------------------------------------------------ controller
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.cmd.ready.eq(1), self.idle.eq(pipeline_empty)]
                with m.If(self.cmd.valid):
                    p = self.cmd.payload
                    m.d.sync += [
                        op.eq(p.op), rows_left.eq(p.rows), k.eq(p.k), mcols.eq(p.m),
                        shift.eq(p.shift), relu.eq(p.relu),
                        mask_en.eq(p.mask & (p.op != DCEOp.XTG)),
                        base.eq(0), chunk.eq(0), col.eq(0), drain_row.eq(0), words.eq(0),
                    ]
                    m.d.comb += path.clear.eq(1)
                    with m.If(p.op == DCEOp.XTG):
                        m.d.comb += clear.eq(1)
                        m.next = "REDUCE"
                    with m.Else():
                        m.next = "LOAD"

            with m.State("LOAD"):
                # XW: word j -> store j % R, address j // R, all columns.
                # XWT: word (chunk, col) -> every store, address chunk, column col.
                m.d.comb += [want.eq(1), self.b.ready.eq(1)]
                with m.If(self.b.valid):
                    m.d.comb += moved.eq(1)
                    with m.If(op == DCEOp.XW):
                        for r in range(R):
                            m.d.comb += [
                                writes[r].addr.eq(chunk),
                                writes[r].en.eq(Mux(base == r, (1 << C) - 1, 0)),
                                writes[r].data.eq(Cat(*(self.b.payload[x]
                                                        for x in range(C)))),
                            ]
                        with m.If(base == R - 1):
                            m.d.sync += [base.eq(0), chunk.eq(chunk + 1)]
                        with m.Else():
                            m.d.sync += base.eq(base + 1)
                        m.d.sync += words.eq(words + 1)
                        with m.If(words + 1 >= k):
                            m.d.sync += [base.eq(0), chunk.eq(0)]
                            m.next = "STREAM"
                    with m.Else():
                        for r in range(R):
                            m.d.comb += [
                                writes[r].addr.eq(chunk),
                                writes[r].en.eq(Const(1, C) << col),
                                writes[r].data.eq(Cat(*([self.b.payload[r]] * C))),
                            ]
                        with m.If(col + 1 == mcols):
                            m.d.sync += [col.eq(0), chunk.eq(chunk + 1), base.eq(base + R)]
                            with m.If(last_chunk):
                                m.d.sync += [base.eq(0), chunk.eq(0)]
                                m.next = "STREAM"
                        with m.Else():
                            m.d.sync += col.eq(col + 1)

            with m.State("STREAM"):
                need_mask = mask_en & last_chunk
                inputs_ok = self.a.valid & (~need_mask | self.mask.valid)
                room = ~last_chunk | credit
                m.d.comb += [want.eq(1), blocked.eq(inputs_ok & ~room)]
                with m.If(inputs_ok & room):
                    m.d.comb += [
                        accept.eq(1), moved.eq(1), first.eq(base == 0), row_end.eq(last_chunk),
                        commit.eq(last_chunk), self.a.ready.eq(1),
                        self.mask.ready.eq(need_mask),
                    ]
                    with m.If(last_chunk):
                        m.d.sync += [base.eq(0), chunk.eq(0), rows_left.eq(rows_left - 1)]
                        with m.If(rows_left == 1):
                            m.next = "FLUSH"
                    with m.Else():
                        m.d.sync += [base.eq(base + R), chunk.eq(chunk + 1)]
                with m.If(rows_left == 0):
                    m.next = "FLUSH"

            with m.State("REDUCE"):
                m.d.comb += want.eq(rows_left != 0)
                with m.If(rows_left == 0):
                    with m.If(pipeline_empty):
                        m.next = "DRAIN"
                with m.Elif(self.a.valid & self.b.valid):
                    m.d.comb += [accept.eq(1), moved.eq(1), self.a.ready.eq(1),
                                 self.b.ready.eq(1)]
                    m.d.sync += rows_left.eq(rows_left - 1)

            with m.State("DRAIN"):
                m.d.comb += [want.eq(1), blocked.eq(~credit)]
                with m.If(credit):
                    m.d.comb += [drain.eq(1), commit.eq(1), moved.eq(1)]
                    m.d.sync += drain_row.eq(drain_row + 1)
                    with m.If(drain_row + 1 >= k):
                        m.next = "FLUSH"

            with m.State("FLUSH"):
                # wait for the last rows to pass the output stage's input, so its
                # settings and statistics belong to this operation alone
                with m.If(pipeline_empty & ~feed_valid):
                    m.next = "IDLE"

        # ------------------------------------------------------------- counters
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += self.op_cycles.eq(0)
        with m.Elif(~self.cmd.ready):
            m.d.sync += self.op_cycles.eq(self.op_cycles + 1)
        with m.If(~self.cmd.ready):
            with m.If(moved | ~want):
                m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
            with m.Elif(blocked):
                m.d.sync += self.blocked_cycles.eq(self.blocked_cycles + 1)
            with m.Else():
                m.d.sync += self.starved_cycles.eq(self.starved_cycles + 1)
        return m
