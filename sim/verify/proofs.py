"""The chip's formal proofs (:mod:`mixgcn.sim.verify.formal`), one function each.

Each builds its design at a small configuration (a proof's state space grows with
widths and depths; the properties do not depend on them), states what the
environment may do as assumptions, and asserts the stream rules on every stream the
design drives plus the invariant that keeps it from losing or duplicating data.
:data:`PROOFS` lists them with the induction depth each needs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from amaranth import Cat, Mux, Signal, signed, unsigned
from amaranth.hdl import Assert, Assume, Cover

from mixgcn.gen.config import ChipConfig, DCEConfig, SAEConfig
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.hdl.controller import Controller
from mixgcn.hdl.dce import DenseCombinationEngine
from mixgcn.hdl.mac import Multiplier
from mixgcn.hdl.memport import StreamReader, StreamWriter
from mixgcn.hdl.output_stage import OutputPath
from mixgcn.hdl.router import ExchangeRouter, Route
from mixgcn.hdl.sae import SAEOp, SparseAggregationEngine
from mixgcn.hdl.timing import BlockRamFifo, RingBuffer, SkidBuffer
from mixgcn.sim.verify.formal import Proof, free_inputs, past, stream_rules

__all__ = ["PROOFS", "models", "proof"]

# Verilog models of the FPGA blocks that a proof instantiates
MODELS = Path(__file__).parent / "models"


def _count(m, event, width=6, name=None) -> Signal:
    """How many cycles ``event`` was high (modulo 2**width)."""
    n = Signal(width, name=name)
    m.d.sync += n.eq(n + event)
    return n


def _fire(s) -> object:
    return s.valid & s.ready


def _two_word_buffer(m, first, buf, slot_of=None):
    """What the two-word buffers' proofs share: ``buf``'s input obeys the stream rules
    (assumed) and its output must (asserted); the word that arrives ``pick``-th (any
    one, fixed from the first cycle) is recorded, and where it was written
    (``slot_of`` then) if given. Returns ``pick``, the word, its slot, whether it has
    arrived, the words held and the picked word's place in line (0: next to leave)."""
    stream_rules(m, buf.i, first, Assume, "i")
    stream_rules(m, buf.o, first, Assert, "o")
    pick = Signal(6)
    m.d.comb += Assume(first | (pick == past(m, pick)))
    came, left = _count(m, _fire(buf.i)), _count(m, _fire(buf.o))
    word, slot, recorded = Signal(4), Signal(3), Signal()
    with m.If(_fire(buf.i) & (came == pick)):
        m.d.sync += [word.eq(buf.i.payload), recorded.eq(1)]
        if slot_of is not None:
            m.d.sync += slot.eq(slot_of)
    return pick, word, slot, recorded, (came - left)[:6], (pick - left)[:6]


def skid_buffer(m, first):
    """The input buffer (a skid buffer): its output obeys the stream rules when its
    input does, it holds at most two words, and words leave in the order they came, none
    lost or duplicated: the word that arrives ``pick``-th (any one) is the one that
    leaves ``pick``-th."""
    m.submodules.buf = buf = SkidBuffer(4)
    pick, word, _, recorded, held, ahead = _two_word_buffer(m, first, buf)
    m.d.comb += Assert(held == buf.o.valid + buf.spare_valid, "words_held")
    m.d.comb += Assert(buf.o.valid | ~buf.spare_valid, "spare_behind_the_output")
    m.d.comb += Assert(buf.i.ready == ~buf.spare_valid, "ready_is_a_register")
    m.d.comb += Assert((buf.o_valid_copy == buf.o.valid)
                       & (buf.spare_valid_copy == buf.spare_valid), "copies_agree")
    # the picked word, while held, is the output's (the oldest) or the spare's
    with m.If((ahead == 0) & buf.o.valid):
        m.d.comb += Assert(recorded & (buf.o.payload == word), "oldest_word_in_order")
    with m.If((ahead == 1) & buf.spare_valid):
        m.d.comb += Assert(recorded & (buf.spare == word), "spare_word_in_order")
    return [*free_inputs(buf), pick]


def ring_buffer(m, first):
    """The accept buffer (a ring buffer): its output obeys the stream rules when its
    input does, it holds at most two words, its rings stay one-hot with the slot at
    ``produce`` always free, and words leave in the order they came, none lost or
    duplicated: the word that arrives ``pick``-th (any one) is the one that leaves
    ``pick``-th, read from the slot it was written to."""
    m.submodules.buf = buf = RingBuffer(4)
    pick, word, slot, recorded, held, ahead = _two_word_buffer(m, first, buf, buf.produce)
    m.d.comb += Assert(held == buf.o.valid + buf.two, "words_held")
    m.d.comb += Assert(buf.o.valid | ~buf.two, "two_behind_the_output")
    m.d.comb += Assert(buf.i.ready == ~buf.two, "ready_is_a_register")

    def one_hot(ring):
        return (ring == 1) | (ring == 2) | (ring == 4)
    m.d.comb += Assert(one_hot(buf.produce) & one_hot(buf.consume), "rings_one_hot")
    # the words held are the slots from `consume` on; `produce` is the next after them
    m.d.comb += Assert(buf.produce == Mux(buf.two, buf.consume.rotate_left(2),
                                          Mux(buf.o.valid, buf.consume.rotate_left(1),
                                              buf.consume)), "produce_after_the_words")
    with m.If((ahead == 0) & buf.o.valid):
        m.d.comb += Assert(recorded & (buf.o.payload == word) & (slot == buf.consume),
                           "oldest_word_in_order")
    with m.If((ahead == 1) & buf.two):
        m.d.comb += Assert(recorded & (slot == buf.consume.rotate_left(1))
                           & (Mux(slot[0], buf.slots[0],
                                  Mux(slot[1], buf.slots[1], buf.slots[2])) == word),
                           "second_word_in_order")
    return [*free_inputs(buf), pick]


def _block_ram_fifo_addresses(m, fifo):
    """A :class:`BlockRamFifo`'s addresses agree with the words its RAM holds (its
    invariant; a proof with one inside needs it to rule out unreachable states)."""
    depth = fifo.depth
    m.d.comb += [Assert((fifo.produce < depth) & (fifo.consume < depth),
                        "fifo_addresses_in_range"),
                 Assert(fifo.stored <= depth, "fifo_ram_not_overfilled"),
                 Assert(fifo.has_room == (fifo.stored != depth), "fifo_room_registered"),
                 Assert(fifo.produce == (fifo.consume + fifo.stored) % depth,
                        "fifo_ram_words_between_the_addresses")]


def block_ram_fifo(m, first):
    """The block-RAM FIFO: its output obeys the stream rules when its input does; the
    words it holds are those that came and did not leave, in order, none lost or
    duplicated (the word that arrives ``pick``-th is in the output register, in the
    RAM's read register, or in the RAM where it was written, as its place in line
    says, and leaves ``pick``-th); no word waits behind an empty register; and its RAM
    is collision-free: no read in a cycle the address read is written."""
    depth = 3
    m.submodules.fifo = fifo = BlockRamFifo(4, depth)
    w, r = fifo.w_stream, fifo.r_stream
    stream_rules(m, w, first, Assume, "w")
    stream_rules(m, r, first, Assert, "r")
    pick = Signal(6)
    m.d.comb += Assume(first | (pick == past(m, pick)))
    came, left = _count(m, _fire(w)), _count(m, _fire(r))
    word, slot, recorded = Signal(4), Signal(range(depth)), Signal()
    with m.If(_fire(w) & (came == pick)):
        m.d.sync += [word.eq(w.payload), slot.eq(fifo.produce), recorded.eq(1)]
    held = (came - left)[:6]
    m.d.comb += Assert(held == fifo.level, "level_counts_the_words_held")
    _block_ram_fifo_addresses(m, fifo)
    # the RAM is read (for the proof) where the picked word was written
    probe = fifo.storage.read_port(domain="comb")
    m.d.comb += probe.addr.eq(slot)
    in_registers = fifo.head_valid + r.valid
    ahead = (pick - left)[:6]  # the picked word's place in line (0: next to leave)
    with m.If((ahead == 0) & r.valid):
        m.d.comb += Assert(recorded & (r.payload == word), "oldest_word_in_order")
    with m.If((ahead == r.valid) & fifo.head_valid):
        m.d.comb += Assert(recorded & (fifo.read_port.data == word), "head_word_in_order")
    with m.If((ahead >= in_registers) & (ahead < held)):
        m.d.comb += Assert(recorded & (probe.data == word) &
                           (slot == (fifo.consume + ahead - in_registers) % depth),
                           "ram_word_in_order")
    # full rate: a word never waits behind an empty register
    leaving = ~fifo.head_valid | ~r.valid | r.ready  # the head is free or moves on
    m.d.comb += [Assert(first | ~past(m, (fifo.stored != 0) & leaving) | fifo.head_valid,
                        "ram_read_into_a_free_head"),
                 Assert(first | ~past(m, fifo.head_valid & ~r.valid) | r.valid,
                        "head_moved_to_a_free_output")]
    wp, rp = fifo.write_port, fifo.read_port
    m.d.comb += Assert(~(wp.en & rp.en & (wp.addr == rp.addr)), "reads_no_word_being_written")
    return [*free_inputs(fifo), pick]


def output_path(m, first):
    """An engine's output path: a row that arrives is always taken (its input has no
    ready), the credit counts exactly the rows admitted and not yet out (the free
    space), the FIFO always takes the row leaving the stage (which never stops), and
    the output obeys the stream rules. The environment is an engine: it
    commits a row only with credit, and a committed row arrives a cycle or more later."""
    m.submodules.path = path = OutputPath(lanes=2, width=4, acc_width=10, depth=3)
    pending = Signal(3)  # committed rows not yet arrived: the engine's pipeline
    m.d.sync += pending.eq(pending + path.commit - path.i.valid)
    m.d.comb += [Assume(~path.commit | path.credit), Assume(~path.i.valid | (pending != 0))]
    m.d.comb += [Assert(~path.i.valid | path.stage.i.ready, "row_taken"),
                 Assert(path.inflight == pending + path.occupancy, "credit_is_free_space"),
                 Assert(~path.stage.o.valid | path.stage.o.ready, "stage_never_stalls")]
    stream_rules(m, path.o, first, Assert, "o")
    return free_inputs(path)


def stream_reader(m, first):
    """A memory-port reader on a memory that answers one cycle after taking a request
    and stalls at will: requests and words obey the stream rules, and no word arrives
    without room in the reader's FIFO."""
    m.submodules.r = r = StreamReader(unsigned(5), addr_width=4, mem_width=5, depth=3)
    answer = past(m, _fire(r.mem.req))
    m.d.comb += [Assume(r.mem.resp.valid == answer), Assume(~r.ctrl.start | r.done)]
    m.d.comb += [Assert(~r.mem.resp.valid | r.fifo.w_rdy, "room_for_every_word"),
                 Assert(r.inflight == answer, "one_word_in_flight_a_cycle"),
                 Assert(r.fifo.level + r.inflight <= 3, "reserved_room"),
                 Assert(r.asking == (r.to_ask != 0), "asking_while_words_to_ask"),
                 Assert(r.to_give == r.to_ask + r.inflight + r.fifo.level + r.o.valid,
                        "words_conserved")]
    stream_rules(m, r.mem.req, first, Assert, "req")
    stream_rules(m, r.o, first, Assert, "o")
    return free_inputs(r)


def stream_writer(m, first):
    """A memory-port writer: its writes obey the stream rules when its rows do and it
    is started between operations."""
    m.submodules.w = w = StreamWriter(unsigned(5), addr_width=4, mem_width=5)
    stream_rules(m, w.i, first, Assume, "i")
    m.d.comb += Assume(~w.ctrl.start | ~w.i.valid)
    stream_rules(m, w.mem.wr, first, Assert, "wr")
    return free_inputs(w)


_TINY = ChipConfig(sae=SAEConfig(lanes=1, edges=1, width=4, acc_width=12, max_nodes=4,
                                 max_degree=8, partial_rows=4, out_fifo_depth=2,
                                 counter_width=16),
                   dce=DCEConfig(rows=1, cols=1, width=4, acc_width=12, max_k=4, max_rows=8,
                                 out_fifo_depth=2, counter_width=16),
                   pipeline_depth=2, desc_depth=2, addr_width=8, reader_depth=2)


def _router(m, first, **kwargs):
    """An exchange router at the small configuration, its routes any that do not change
    under it (the controller changes routes only between operations), every stream it
    takes obeying the stream rules."""
    lay = ChipLayouts(_TINY)
    m.submodules.router = r = ExchangeRouter(row_layout=lay.row_layout,
                                             x_layout=lay.stream_layouts["x"],
                                             a_layout=lay.stream_layouts["a"],
                                             pipeline_depth=2, **kwargs)
    for name in Route.NAMES:
        m.d.comb += Assume(first | (getattr(r.route, name) == past(m, getattr(r.route, name))))
    for name in ("sae_out", "dce_out", "x_mem", "a_mem"):
        stream_rules(m, getattr(r, name), first, Assume, name)
    _block_ram_fifo_addresses(m, r.pipe)
    return r


def pipeline_fifo(m, first):
    """The exchange path through the pipeline FIFO: each row an engine routes to the
    exchange (as it leaves the router's input buffer, ``routed``) enters the FIFO once;
    rows in = rows out to the engine inputs + rows held (none lost or duplicated); the
    engine inputs it feeds obey the stream rules."""
    r = _router(m, first)
    into = r.pipe.w_stream
    for engine, routed, has in (("sae", r.sae_routed, r.route.sae_to_xchg),
                                ("dce", r.dce_routed,
                                 r.route.dce_to_xchg & ~r.route.sae_to_xchg)):
        ahead = (_count(m, _fire(into) & has) - _count(m, routed & has))[:6]
        _, pipe_taken = r.taken[engine]
        m.d.comb += Assert(~has | (ahead == pipe_taken), f"{engine}_rows_into_exchange_once")
    taken = r.pipe.r_stream
    held = (_count(m, _fire(into)) - _count(m, _fire(taken)))[:6]
    m.d.comb += Assert(held == r.pipe.level, "exchange_rows_conserved")
    for name in ("sae_x", "dce_a"):
        stream_rules(m, getattr(r, name), first, Assert, name)
    return free_inputs(r)


def exchange_router(m, first):
    """The exchange router with any routes that do not change under it: every stream it
    drives obeys the stream rules when the ones it takes do; an engine's rows reach
    memory once each as they leave the router's input buffer (none lost or duplicated by
    the fork), and with two producers none of the DCE's is routed."""
    r = _router(m, first)
    for name in ("sae_mem", "dce_mem", "sae_x", "dce_a"):
        stream_rules(m, getattr(r, name), first, Assert, name)
    for engine, routed, mem, to_mem in (("sae", r.sae_routed, r.sae_mem, r.route.sae_to_mem),
                                        ("dce", r.dce_routed, r.dce_mem, r.route.dce_to_mem)):
        ahead = (_count(m, _fire(mem)) - _count(m, routed))[:6]
        mem_taken, _ = r.taken[engine]
        # memory is one row ahead exactly while the fork holds a row it has given it
        m.d.comb += Assert(~to_mem | (ahead == mem_taken), "each_row_to_memory_once")
    both = r.route.sae_to_xchg & r.route.dce_to_xchg
    m.d.comb += Assert(~both | ~r.dce_routed, "second_producer_held")
    m.d.comb += Assert(first | past(m, first) | ~past(m, both) | r.error.producers,
                       "error_raised")
    return free_inputs(r)


def controller(m, first):
    """The controller, with engines that take commands and report rows at will: its
    status records and engine commands obey the stream rules."""
    lay = ChipLayouts(_TINY)
    m.submodules.c = c = Controller(lay, desc_depth=2, counter_width=16, acc_width=12)
    stream_rules(m, c.desc, first, Assume, "desc")
    for name in ("status", "sae_cmd", "dce_cmd"):
        stream_rules(m, getattr(c, name), first, Assert, name)
    return free_inputs(c)


def _engine(m, first, engine, inputs, inner):
    """An engine's rows obey the stream rules and none is ever lost: the output path's
    credit equals the rows ``inner`` (its pipeline or MAC array) holds plus those the
    path holds, so a row reaching the output stage always finds room."""
    for name in inputs:
        stream_rules(m, getattr(engine, name), first, Assume, name)
    stream_rules(m, engine.out, first, Assert, "out")
    path = engine.path
    m.d.comb += [Assert(path.inflight == inner.in_flight + path.occupancy,
                        "credit_is_free_space"),
                 Assert(~path.i.valid | path.stage.i.ready, "row_taken"),
                 Assert(~path.stage.o.valid | path.stage.o.ready, "stage_never_stalls")]
    return free_inputs(engine)


def sparse_engine(m, first):
    """The sparse engine (:func:`_engine`, over its aggregation pipeline); and its
    buffer is collision-free (:func:`mixgcn.hdl.timing.collision_free_memory`): no row
    a beat gathers and uses is being written by the loader into that bank in the same
    cycle, nor a partial sum read to be added while it is written back. The host loads
    no more rows than a bank holds, and a command in column windows has no more rows
    than the partial sums (the driver's windows); more would wrap around."""
    m.submodules.sae = sae = SparseAggregationEngine(_TINY.sae)
    cmd = sae.cmd.payload
    c = _TINY.sae
    m.d.comb += [Assume(~sae.cmd.valid | (cmd.op != SAEOp.LOAD) | (cmd.rows <= c.max_nodes)),
                 Assume(~sae.cmd.valid | (cmd.op != SAEOp.SPMM) | ~(cmd.keep | cmd.accumulate)
                        | (cmd.rows <= c.partial_rows))]
    pipe = sae.pipe
    # the buffer's write as it reaches the bank the pipeline reads
    loading = sae.buffer_write_en.bit_select(pipe.bank, 1)
    for e in range(_TINY.sae.edges):
        m.d.comb += Assert(~(pipe.gathered[e] & loading
                             & (pipe.gather.addr[e] == sae.buffer_write_addr)),
                           "gathers_no_row_being_loaded")
    # why: a held beat belongs to the running command, and while its bank is being
    # filled, every row it gathers is below the rows loaded (which only grow)
    beat, loader = pipe.beat, sae.loader
    m.d.comb += [Assert(~loader.busy | (loader.loaded + loader.left <= _TINY.sae.max_nodes),
                        "load_fits_its_bank"),
                 Assert(~loader.busy | (loader.more == (loader.left != 0)), "more_is_left"),
                 Assert(~pipe.held | pipe.active, "held_beat_is_running"),
                 Assert(~(pipe.held & pipe.rows_in & pipe.filling) | Cat(
                     (e >= beat.count) | (beat.col[e] < pipe.loaded)
                     for e in range(_TINY.sae.edges)).all(), "held_beat_is_loaded")]
    # and its partial sums: the row whose kept sum is read (to be added) is never the
    # row being written back, as a command's rows are distinct
    m.d.comb += [Assert(~(pipe.sum_read_used & pipe.kept
                          & (pipe.sum_read_row == pipe.sum_write_row)),
                        "adds_no_sum_being_kept"),
                 Assert(~(pipe.keep | pipe.accumulate)
                        | (pipe.row_at + sae.rows_left <= c.partial_rows), "rows_fit_the_sums"),
                 Assert(~sae.busy | ((sae.none_left == (sae.rows_left == 0))
                                     & (sae.one_left == (sae.rows_left == 1))),
                        "rows_left_flags")]
    return _engine(m, first, sae, ("cmd", "x", "csr", "mask"), sae.pipe)


def dense_engine(m, first):
    """The dense engine (:func:`_engine`, over its MAC array), with two reduction lanes
    so that the column-sum tree has a level; and its weight store is collision-free
    (:func:`mixgcn.hdl.timing.collision_free_memory`): no word is accepted into the
    array, which uses the rows read for it, in a cycle a word goes into the store's
    RAMs."""
    m.submodules.dce = dce = DenseCombinationEngine(
        dataclasses.replace(_TINY.dce, rows=2))
    m.d.comb += Assert(~(dce.store.writing & dce.array.accept), "reads_no_weight_being_loaded")
    return _engine(m, first, dce, ("cmd", "a", "b", "mask"), dce.array)


def _dsp_multiplier(width: int, *, one_hot: bool = False):
    def build(m, first):
        """The ECP5 multiplier (a MULT18X18D with its input and output registers, as
        models/MULT18X18D.v has it) is the generic one: once reset, both give the
        same product every cycle, for any operands — so simulating the generic form
        verifies the board's. At ``width`` bits the operands are sign-extended to the
        block's 18. A solver proves all operands at small widths; at the engines' width
        (``one_hot``) one operand has a single bit set, which still reaches every pin
        of A, B and P."""
        m.submodules.generic = generic = Multiplier(width, target="generic")
        m.submodules.dsp = dsp = Multiplier(width, target="ecp5")
        a, b = Signal(signed(width)), Signal(signed(width))
        m.d.comb += [generic.a.eq(a), generic.b.eq(b), dsp.a.eq(a), dsp.b.eq(b)]
        if one_hot:
            # full width, every pin, where a solver can follow: one operand a single
            # bit (a power of two, or the most negative value), the other free
            def single_bit(v):
                bits = v.as_unsigned()
                return (bits != 0) & ((bits & (bits - 1)) == 0)
            m.d.comb += Assume(single_bit(a) | single_bit(b))
        # the block's registers hold no initial value: from the first cycle after reset
        with m.If(~first):
            m.d.comb += Assert(dsp.product == generic.product, "same_product")
        # the corners of the signed range must pass through (not a vacuous zero)
        low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
        m.d.comb += [Cover(dsp.product == low * low, "most_negative_squared"),
                     Cover(dsp.product == low * high, "most_negative_times_most_positive")]
        return [a, b]
    return build


# name -> (builder, induction depth)
PROOFS = {
    "skid_buffer": (skid_buffer, 6),
    "ring_buffer": (ring_buffer, 6),
    "block_ram_fifo": (block_ram_fifo, 8),
    "pipeline_fifo": (pipeline_fifo, 8),
    "output_path": (output_path, 8),
    "stream_reader": (stream_reader, 8),
    "stream_writer": (stream_writer, 6),
    "exchange_router": (exchange_router, 8),
    "controller": (controller, 8),
    "sparse_engine": (sparse_engine, 10),
    "dense_engine": (dense_engine, 10),
    "dsp_multiplier_5": (_dsp_multiplier(5), 4),
    "dsp_multiplier_8": (_dsp_multiplier(8), 4),
    "dsp_multiplier_16_one_hot": (_dsp_multiplier(16, one_hot=True), 4),
}


def models(name: str) -> tuple[Path, ...]:
    """The Verilog models proof ``name`` needs, for :func:`~.formal.prove`."""
    return (MODELS / "MULT18X18D.v",) if name.startswith("dsp_multiplier") else ()


def proof(name: str) -> Proof:
    """The proof ``name`` of :data:`PROOFS`, ready for :func:`~.formal.prove`."""
    return Proof(PROOFS[name][0])
