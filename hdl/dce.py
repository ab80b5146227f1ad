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
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import DCEConfig
from mixgcn.hdl.mac import MACCell
from mixgcn.hdl.output_stage import (
    ActivityCounters,
    OutputPath,
    engine_status_members,
    output_layout,
)
from mixgcn.hdl.timing import accept_buffer, collision_free_memory, copy, input_buffer

__all__ = ["DCELayouts", "DCEOp", "DenseCombinationEngine", "MACArray", "WeightStore"]


class DCEOp(enum.Enum, shape=2):
    """A DCE operation: ``X·W``, ``X·Wᵀ`` or ``Xᵀ·G`` (module docstring)."""

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


class WeightStore(wiring.Component):
    """The weight stores: one memory per array row ``r``, ⌈max_k/R⌉ words of C weights.

    ``start`` (one cycle) begins a load of the weights of an ``op`` (``XW``/``XWT``) of
    reduction ``k`` and ``mcols`` output columns (all three sampled with ``start``);
    each cycle ``valid`` writes ``word`` (a B-stream word; it reaches the RAMs a cycle
    later, from registers, so ``writing`` is high then): for ``XW`` word j goes to
    store j mod R, address j div R, all columns; for ``XWT`` word (chunk, col) goes
    down column ``col`` of every store at address chunk (the transposition happens
    here). ``done`` marks the last word; it
    comes from registers that know ahead whether the next word is the last, since it
    ends the engine's LOAD state in the cycle of the word's handshake.
    ``addr`` reads chunk ``addr`` of every store: ``rows[r]`` one cycle later."""

    def __init__(self, c: DCEConfig, b_layout):
        self.config = c
        row = data.ArrayLayout(signed(c.width), c.cols)
        super().__init__({
            "start": In(1), "op": In(DCEOp), "k": In(range(c.max_k + 1)),
            "mcols": In(range(c.cols + 1)), "valid": In(1), "word": In(b_layout),
            "done": Out(1), "addr": In(range(c.weight_depth)),
            "rows": Out(data.ArrayLayout(row, c.rows)),
        })
        self.writing = Signal()  # a word goes into the RAMs this cycle (for the proof)

    def elaborate(self, platform):
        c = self.config
        R, C = c.rows, c.cols
        m = Module()
        k, mcols = Signal.like(self.k), Signal.like(self.mcols)
        # the load is an X·W: one copy steers the memories' write enables and data (a
        # thousand loads), the other `done`, which ends the engine's LOAD state
        xw, xw_done = copy(1, name="xw"), copy(1, name="xw_done")
        lane, chunk = Signal(range(R)), Signal(range(c.weight_depth + 1))  # next XW word
        words = Signal(range(c.max_k + 1))
        col = Signal(range(C + 1))  # next XWT column
        # the next word is the load's last (XW); ends its chunk, and the chunk is the
        # load's last (XWT)
        last_word, col_last, chunk_last = Signal(), Signal(), Signal()
        enables = []
        for r in range(R):
            # collision-free: a word is written while the engine loads and in the cycle
            # after, and the array uses what it reads only for a word accepted in STREAM,
            # which begins a cycle after the load's last word (the dense engine's proof),
            # so no block-RAM bypass logic is built after its output
            mem = collision_free_memory(shape=data.ArrayLayout(signed(c.width), C),
                                        depth=c.weight_depth)
            m.submodules[f"store{r}"] = mem
            rd, wr = mem.read_port(), mem.write_port(granularity=1)
            # a word reaches the RAMs from registers, a cycle after its handshake: that
            # logic (the engine's state, the B stream's valid) ends at registers beside
            # the engine rather than at block RAMs spread over the die (the `ecp5` chip's
            # slowest path); each store has its own enable and address (kept apart)
            en = copy(C, name=f"write_en{r}")
            addr = copy(range(c.weight_depth), name=f"write_addr{r}")
            word = Signal.like(wr.data, name=f"write_word{r}")
            m.d.comb += [rd.addr.eq(self.addr), self.rows[r].eq(rd.data),
                         wr.addr.eq(addr), wr.en.eq(en), wr.data.eq(word)]
            m.d.sync += addr.eq(chunk)
            with m.If(xw):
                m.d.sync += [en.eq(Mux(self.valid & (lane == r), (1 << C) - 1, 0)),
                             word.eq(Cat(*(self.word[x] for x in range(C))))]
            with m.Else():
                m.d.sync += [en.eq(Mux(self.valid, Const(1, C) << col, 0)),
                             word.eq(Cat(*([self.word[r]] * C)))]
            enables.append(en)
        m.d.comb += self.writing.eq(Cat(*enables).any())
        m.d.comb += self.done.eq(self.valid & Mux(xw_done, last_word, col_last & chunk_last))
        with m.If(self.start):
            m.d.sync += [xw.eq(self.op == DCEOp.XW), xw_done.eq(self.op == DCEOp.XW),
                         k.eq(self.k), mcols.eq(self.mcols),
                         lane.eq(0), chunk.eq(0), words.eq(0), col.eq(0),
                         last_word.eq(self.k <= 1), col_last.eq(self.mcols == 1),
                         chunk_last.eq(self.k <= R)]
        with m.Elif(self.valid & xw):
            m.d.sync += [words.eq(words + 1), last_word.eq(words + 2 >= k),
                         lane.eq(Mux(lane == R - 1, 0, lane + 1)),
                         chunk.eq(chunk + (lane == R - 1))]
        with m.Elif(self.valid):
            with m.If(col_last):
                m.d.sync += [col.eq(0), chunk.eq(chunk + 1), col_last.eq(mcols == 1),
                             chunk_last.eq((chunk + 2) * R >= k)]
            with m.Else():
                m.d.sync += [col.eq(col + 1), col_last.eq(col + 2 == mcols)]
        return m


class MACArray(wiring.Component):
    """The R × C MAC cells and the registers around them.

    A word ``accept``-ed in cycle t (``a``: R values, of which the lanes not in ``live``
    are zeroed — past the reduction; ``b``: C values, used by ``XTG``; ``mask``:
    the row's ReLU' bits) enters s1 at t+1, s2 at t+2 and s3 at t+3 (s1 takes whatever is
    on ``a``, ``b`` and ``mask`` every cycle; only an accepted word's flags are valid).
    The weights read
    from the store in cycle t leave its block RAMs at t+1 and are registered twice:
    as they are at t+2 (``stored``, a register with nothing in front of it, which the
    placer can put beside the block RAM: the RAM's slow output then never crosses the
    die in the same cycle), then at t+3 beside s3, where ``XTG``'s operands take their
    place. The cells take s3 and those registers, and their products appear at t+5.

    ``XW``/``XWT``: each column adds its R products in a tree of ⌈log2 R⌉ registered
    levels (products are 2·width bits, the tree grows a bit a level), then a column
    accumulator adds the chunks of a row (``first`` starts a new sum); a word with
    ``row_end`` completes an output row, whose C sums reach ``feed`` at
    t+6+⌈log2 R⌉. ``XTG`` (``xtg``): every word adds an outer product into the R × C
    cells' accumulators (``clear`` zeroes them); ``drain`` (one cycle) sends
    accumulator row 0 to ``feed`` two cycles later and moves every row up one, so the
    j-th drain sends row j (the last when ``drain_row + 1 == k``). Columns at or past
    ``mcols`` leave as zeros. ``empty``: no word in flight; ``in_flight``: the rows
    committed and not yet fed.

    Control fans out through registered copies (:mod:`mixgcn.hdl.timing`): each
    cell's own (its ``clear`` and ``shift`` act a cycle late, see :class:`MACCell`)
    and a copy of ``xtg`` per row of the weights' registers, so ``xtg`` must hold from
    the cycle an operation's first word is accepted (the engine sets it with the
    command, a cycle or more before)."""

    @staticmethod
    def latency(rows: int) -> int:
        """The registers a word's flags pass from s1 to the cycle its column sums leave
        the tree of an array of ``rows`` rows (the products' four, then the tree's)."""
        return 4 + (rows - 1).bit_length()

    def __init__(self, c: DCEConfig, in_layout):
        self.config = c
        R, C = c.rows, c.cols
        super().__init__({
            "accept": In(1), "first": In(1), "row_end": In(1), "last": In(1),
            "a": In(data.ArrayLayout(signed(c.width), R)),
            "b": In(data.ArrayLayout(signed(c.width), C)), "mask": In(C),
            "weights": In(data.ArrayLayout(data.ArrayLayout(signed(c.width), C), R)),
            "xtg": In(1), "clear": In(1), "mcols": In(range(C + 1)),
            "live": In(R), "k": In(range(c.max_k + 1)),
            "drain": In(1), "drain_row": In(range(R + 1)),
            "feed": Out(stream.Signature(in_layout, always_ready=True)), "empty": Out(1),
            "in_flight": Out(range(8 + (R - 1).bit_length())),
        })

    def elaborate(self, platform):
        c = self.config
        R, C = c.rows, c.cols
        m = Module()

        # s1, s2: the word and its flags; weights: the store's output, or the Xᵀ·G
        # gradient row in its place, registered beside s2
        s1_valid, s1_first, s1_end, s1_last = Signal(), Signal(), Signal(), Signal()
        s1_a, s1_b, s1_mask = Signal.like(self.a), Signal.like(self.b), Signal(C)
        m.d.sync += [s1_valid.eq(self.accept), s1_first.eq(self.first),
                     s1_end.eq(self.accept & self.row_end), s1_last.eq(self.last)]
        # s1 takes the word every cycle, accepted or not: its flags say whether it is one,
        # and everything after s1 is gated by them (a cell adds only with `en`, a column
        # keeps a sum only while `valid`, a row leaves only with `end`). So `accept`, the
        # end of the engine's handshake logic, drives a few flag registers rather than
        # the clock enables of R + C words spread over the array (the `ecp5` chip's
        # slowest path at 91.63 MHz)
        m.d.sync += [s1_a[r].eq(Mux(self.live[r], self.a[r], 0)) for r in range(R)]
        m.d.sync += [s1_b.eq(self.b), s1_mask.eq(self.mask)]
        # a word's flags travel beside it: (valid, first, end, last, mask), one register
        # a cycle, from s1 to the cycle its column sums leave the tree
        flags = [(s1_valid, s1_first, s1_end, s1_last, s1_mask)]
        for stage in range(self.latency(R)):
            regs = (Signal(name=f"valid{stage + 2}"), Signal(name=f"first{stage + 2}"),
                    Signal(name=f"end{stage + 2}"), Signal(name=f"last{stage + 2}"),
                    Signal(C, name=f"mask{stage + 2}"))
            m.d.sync += [reg.eq(v) for reg, v in zip(regs, flags[-1], strict=True)]
            flags.append(regs)
        # each row of the weights' registers takes its choice from its own copy of
        # `xtg` (a row's C·width multiplexers)
        xtg = [copy(1, name=f"xtg{r}") for r in range(R)]
        s2_a, s3_a, s2_b = Signal.like(self.a), Signal.like(self.a), Signal.like(self.b)
        # `stored` has no reset (what it holds counts only beside a word's flags): a
        # register straight after a block RAM, with no reset, becomes the RAM's own
        # output register on an ECP5 (mixgcn.gen.netlist)
        stored = Signal.like(self.weights, reset_less=True)
        weights = Signal.like(self.weights)
        m.d.sync += [s2_a.eq(s1_a), s3_a.eq(s2_a), s2_b.eq(s1_b), stored.eq(self.weights),
                     *(x.eq(self.xtg) for x in xtg)]
        m.d.sync += [weights[r].eq(Mux(xtg[r], s2_b, stored[r])) for r in range(R)]

        cells = [[MACCell(c.width, c.acc_width) for _ in range(C)] for _ in range(R)]
        for r in range(R):
            for x in range(C):
                m.submodules[f"mac{r}_{x}"] = cell = cells[r][x]
                m.d.comb += [cell.a.eq(s3_a[r]), cell.b.eq(weights[r][x]),
                             cell.en.eq(flags[2][0] & self.xtg), cell.clear.eq(self.clear),
                             cell.shift.eq(self.drain),
                             cell.below.eq(cells[r + 1][x].acc if r + 1 < R else 0)]

        # products appear four stages after s1; the tree adds one level a stage
        level = [[cells[r][x].product for r in range(R)] for x in range(C)]
        depth = 0
        while len(level[0]) > 1:
            nxt = []
            for x in range(C):
                terms = level[x]
                sums = [a + b for a, b in zip(terms[::2], terms[1::2], strict=False)]
                if len(terms) % 2:
                    sums.append(terms[-1])
                regs = [Signal(signed(2 * c.width + depth + 1), name=f"sum{depth}_{x}_{j}")
                        for j in range(len(sums))]
                m.d.sync += [reg.eq(v) for reg, v in zip(regs, sums, strict=True)]
                nxt.append(regs)
            level, depth = nxt, depth + 1
        valid, first, end, last, mask = flags[-1]

        # the column accumulators add a row's chunks; the row's last chunk's sum leaves
        col_acc = [Signal(signed(c.acc_width), name=f"col_acc{x}") for x in range(C)]
        col_sum = [Mux(first, 0, col_acc[x]) + level[x][0] for x in range(C)]
        with m.If(valid):
            m.d.sync += [col_acc[x].eq(col_sum[x]) for x in range(C)]
        live = Signal(C)  # the columns inside the operation's output tile
        m.d.comb += live.eq(Cat(*(x < self.mcols for x in range(C))))

        # a drain, a cycle after it is asked for: the cells shift at its end (they
        # register the request), so row 0's accumulators leave from here first
        drain, drain_last = Signal(), Signal()
        m.d.sync += [drain.eq(self.drain), drain_last.eq(self.drain_row + 1 == self.k)]

        m.d.comb += [self.empty.eq(~Cat(*(f[0] for f in flags), drain).any()),
                     self.in_flight.eq(sum(f[2] for f in flags) + drain + self.feed.valid)]
        feed = self.feed.payload
        m.d.sync += self.feed.valid.eq(end | drain)
        with m.If(end):
            m.d.sync += [feed.acc[x].eq(Mux(live[x], col_sum[x], 0)) for x in range(C)]
            m.d.sync += [feed.mask.eq(mask), feed.last.eq(last)]
        with m.Elif(drain):
            m.d.sync += [feed.acc[x].eq(Mux(live[x], cells[0][x].acc, 0)) for x in range(C)]
            m.d.sync += [feed.mask.eq(0), feed.last.eq(drain_last)]
        return m


class DenseCombinationEngine(wiring.Component, DCELayouts):
    """See the module docstring: an :class:`OutputPath`, a :class:`WeightStore`, a
    :class:`MACArray` and the state machine that sequences an operation."""

    def __new__(cls, config, *args, **kwargs):
        if not isinstance(config, DCEConfig):  # refused before it is an elaboratable
            raise TypeError(f"expected a DCEConfig, got {config!r}")
        return super().__new__(cls)

    def __init__(self, config: DCEConfig):
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
        self.path = OutputPath(lanes=c.cols, width=c.width, acc_width=c.acc_width,
                               depth=c.out_fifo_depth)
        self.store = WeightStore(c, self.b_layout)
        self.array = MACArray(c, self.path.in_layout)

    def elaborate(self, platform):
        c = self.config
        R, C = c.rows, c.cols
        m = Module()
        m.submodules.out = path = self.path
        wiring.connect(m, path.o, wiring.flipped(self.out))
        m.submodules.weights = store = self.store
        m.submodules.array = array = self.array
        m.submodules.counters = counters = ActivityCounters(c.counter_width)
        # each input enters through a skid buffer, so its ready is a register's: the
        # accept logic below does not reach back through the router into the memory
        # readers. Then through a second one, placed by the accept logic, so that the
        # words taken together (an A word with a B word or a mask) wait side by side:
        # the accept logic sees their `valid`s from registers beside it (with the first
        # buffers' outputs seen directly, one's `valid` crossed the die to the accept
        # logic and back into the other's level in one cycle: docs/boards.md, step 23),
        # and its decision stays there — with a plain register as the second stage it
        # passed straight through into the first buffer's state (step 31). The second
        # is a ring buffer, whose words never move: as a skid buffer, its output word's
        # clock enables were that decision, across the die by the A words (step 36)
        a, b, mask = (accept_buffer(m, f"{name}_accept", input_buffer(m, name, getattr(self, name)))
                      for name in ("a", "b", "mask"))

        op, rows_left, k = Signal(DCEOp), Signal(32), Signal(range(c.max_k + 1))
        # no row / one row left: registers beside the count, as they steer the operands'
        # handshakes (a 32-bit comparison in front of the B buffer's ready was the
        # slowest path of the ecp5 chip on the ULX3S)
        none_left, one_left = Signal(), Signal()
        mcols, drain_row = Signal(range(C + 1)), Signal(range(R + 1))
        base = Signal(range(c.max_k + R + 1))  # the first reduction index of this chunk
        chunk = Signal(range(c.weight_depth + 1))
        # this word ends its row (base + R >= k), kept in a register: it steers every
        # handshake of the stream, so no adder may sit in front of it
        last_chunk = Signal()
        # the rows of this chunk inside the reduction (base + r < k), a register beside
        # `base` for the same reason: an adder and a comparison in front of the zeroing
        # of s1's A words was the `ecp5` chip's slowest path (docs/boards.md, step 22)
        live = Signal(R)

        def rows_below(end):
            """The rows r of a chunk starting at 0 with r < ``end``."""
            return Cat(*(end > r for r in range(R)))
        need_mask = path.mask_en & last_chunk
        inputs_ok = a.valid & (~need_mask | mask.valid)
        self._datapath(m, path, store, array, a=a, b=b, mask=mask, op=op, k=k, mcols=mcols,
                       live=live, chunk=chunk, drain_row=drain_row, last=one_left)
        want, moved, blocked = Signal(), Signal(), Signal()
        with m.FSM():
            with m.State("IDLE"):
                p = self.cmd.payload
                m.d.comb += [self.cmd.ready.eq(1), self.idle.eq(array.empty)]
                with m.If(self.cmd.valid):
                    m.d.sync += [op.eq(p.op), rows_left.eq(p.rows), k.eq(p.k), mcols.eq(p.m),
                                 none_left.eq(p.rows == 0), one_left.eq(p.rows == 1),
                                 path.shift.eq(p.shift), path.relu.eq(p.relu),
                                 path.mask_en.eq(p.mask & (p.op != DCEOp.XTG)),
                                 base.eq(0), chunk.eq(0), drain_row.eq(0),
                                 last_chunk.eq(p.k <= R), live.eq(rows_below(p.k))]
                    m.d.comb += [path.clear.eq(1), store.start.eq(1)]
                    with m.If(p.op == DCEOp.XTG):
                        m.d.comb += array.clear.eq(1)
                        m.next = "REDUCE"
                    with m.Else():
                        m.next = "LOAD"
            with m.State("LOAD"):
                m.d.comb += [want.eq(1), b.ready.eq(1), store.valid.eq(b.valid),
                             moved.eq(b.valid)]
                with m.If(store.done):
                    m.next = "SETTLE"
            with m.State("SETTLE"):
                # the load's last word reaches the store's RAMs (from its registers)
                # this cycle: no row is read before it is there
                m.next = "STREAM"
            with m.State("STREAM"):
                m.d.comb += [want.eq(1), blocked.eq(inputs_ok & ~(~last_chunk | path.credit))]
                with m.If(inputs_ok & (~last_chunk | path.credit)):
                    m.d.comb += [array.accept.eq(1), moved.eq(1), array.first.eq(base == 0),
                                 array.row_end.eq(last_chunk), path.commit.eq(last_chunk),
                                 a.ready.eq(1), mask.ready.eq(need_mask)]
                    m.d.sync += [base.eq(Mux(last_chunk, 0, base + R)),
                                 last_chunk.eq(Mux(last_chunk, k <= R, base + 2 * R >= k)),
                                 live.eq(Mux(last_chunk, rows_below(k),
                                             Cat(*(base + R + r < k for r in range(R))))),
                                 chunk.eq(Mux(last_chunk, 0, chunk + 1)),
                                 rows_left.eq(rows_left - last_chunk)]
                    with m.If(last_chunk):
                        m.d.sync += [none_left.eq(one_left), one_left.eq(rows_left == 2)]
                    with m.If(last_chunk & one_left):
                        m.next = "FLUSH"
                with m.If(none_left):
                    m.next = "FLUSH"
            with m.State("REDUCE"):
                m.d.comb += want.eq(~none_left)
                with m.If(none_left):
                    with m.If(array.empty):
                        m.next = "DRAIN"
                with m.Elif(a.valid & b.valid):
                    m.d.comb += [array.accept.eq(1), moved.eq(1), a.ready.eq(1),
                                 b.ready.eq(1)]
                    m.d.sync += [rows_left.eq(rows_left - 1), none_left.eq(one_left),
                                 one_left.eq(rows_left == 2)]
            with m.State("DRAIN"):
                m.d.comb += [want.eq(1), blocked.eq(~path.credit)]
                with m.If(path.credit):
                    m.d.comb += [array.drain.eq(1), path.commit.eq(1), moved.eq(1)]
                    m.d.sync += drain_row.eq(drain_row + 1)
                    with m.If(drain_row + 1 >= k):
                        m.next = "FLUSH"
            with m.State("FLUSH"):
                # the last rows pass the output stage first, so its settings and
                # statistics belong to this operation alone
                with m.If(array.empty & ~array.feed.valid & ~path.busy):
                    m.next = "IDLE"

        m.d.comb += [counters.start.eq(self.cmd.valid & self.cmd.ready),
                     counters.active.eq(~self.cmd.ready), counters.moved.eq(moved | ~want),
                     counters.blocked.eq(blocked), *counters.drive(self)]
        return m

    def _datapath(self, m, path, store, array, *, a, b, mask, op, k, mcols, live, chunk,
                  drain_row, last):
        """The operands' way through the engine: B words into the weight store, chunk
        reads out of it, A words and masks into the array, its sums into the output
        path, the path's statistics out."""
        C = self.config.cols
        m.d.comb += [
            # the store samples the command's op, k and m with `start`
            store.op.eq(self.cmd.payload.op), store.k.eq(self.cmd.payload.k),
            store.mcols.eq(self.cmd.payload.m), store.word.eq(b.payload),
            store.addr.eq(chunk), array.weights.eq(store.rows), array.xtg.eq(op == DCEOp.XTG),
            array.mcols.eq(mcols), array.drain_row.eq(drain_row), array.live.eq(live),
            array.k.eq(k), array.last.eq(array.row_end & last),
            array.mask.eq(Mux(path.mask_en, mask.payload, 0)), array.a.eq(a.payload),
            array.b.eq(Cat(*(b.payload[x] for x in range(C)))),
            self.max_abs.eq(path.max_abs), self.saturated.eq(path.saturated)]
        wiring.connect(m, array.feed, path.i)
