"""The exchange fabric: the all-to-all of Mixture of Parallelism between P chips
(docs/fabric.md).

Rows are owned cyclically: chip q owns the nodes ``r`` with ``r mod P = q`` (``R_q``),
so every chip's rows interleave and a row never waits for a whole matrix. Chip p holds
the feature columns ``lo_p … lo_p + count_p - 1`` (``S_p``, lanes of a row). The
fabric moves one transfer at a time, in the :data:`route`'s ``mode``:

- ``SCATTER`` (SpMM → GEMM; feature layout → node layout): chip p's SAE emits every
  row of its columns ``S_p``; row ``r`` goes to its owner ``r mod P``, which merges the
  P slices of the row (each zero outside its own lanes) into one word for its DCE as
  soon as all P have arrived;
- ``GATHER`` (GEMM → SpMM; node layout → feature layout): chip q's DCE emits its rows
  ``R_q``; each goes to every chip p, carrying the lanes ``S_p`` only, and chip p takes
  them in row order (from chips 0, 1, …, P-1, 0, …) into its SAE's feature buffer.

A transfer ends with each source's row marked ``last`` (the end of its operation).

Every chip has a :class:`Link` to every chip (itself included). A link carries ``w``
bits a cycle — a row's slice as flits, only the ``w``-bit chunks its lanes touch —
with ``latency`` cycles of delay and credit-based flow control: the sender holds one
credit per free flit of the receiver's buffer and gets it back, ``latency`` cycles
later, when the receiver has taken the flit. A crossbar link is a whole row wide.

The fabric is built of one :class:`FabricEnd` per chip — its links' senders and
receivers and the scatter/gather logic of its rows — whose wires to the other chips'
ends are registers here (:class:`ExchangeFabric`, every chip on one FPGA) and pins
between boards (:class:`~mixgcn.hdl.board.SerialBridge`, a chip per board).
"""

from __future__ import annotations

import functools
import operator

from amaranth import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import SystemConfig
from mixgcn.hdl.output_stage import output_layout

__all__ = ["ExchangeFabric", "FabricEnd", "FabricMode", "Link", "LinkReceiver", "LinkSender",
           "LinkWire", "flit_layout", "join_wire", "route_layout"]


class FabricMode(enum.Enum, shape=1):
    SCATTER = 0
    GATHER = 1


def route_layout(chips: int, lanes: int) -> data.StructLayout:
    """The transfer in progress: its ``mode`` and each chip's lanes (``lo``, ``count``;
    ``count ≥ 1``). Set by the host before the batch, constant during it."""
    return data.StructLayout({
        "mode": FabricMode,
        "lo": data.ArrayLayout(range(lanes), chips),
        "count": data.ArrayLayout(range(lanes + 1), chips),
    })


def _delay(m: Module, name: str, value, stages: int):
    """``value`` ``stages`` cycles later, through a line of registers (no stalls)."""
    for i in range(stages):
        reg = Signal.like(value, name=f"{name}_{i}")
        m.d.sync += reg.eq(value)
        value = reg
    return value


class LinkWire(wiring.Signature):
    """A link's wire, seen from its sender: a flit a cycle (``valid``, ``flit``) one way,
    a credit (the receiver took a flit) the other. Nothing on it waits: the credits
    keep the receiver's buffer from overflowing."""

    def __init__(self, width: int):
        self.width = width
        super().__init__({"valid": Out(1), "flit": Out(flit_layout(width)),
                          "credit": In(1)})


def flit_layout(width: int) -> data.StructLayout:
    return data.StructLayout({"data": unsigned(width), "last": 1})


def _slice_chunks(lanes: int, value_width: int, width: int, lo, count):
    """The first and final ``width``-bit chunk a row's lanes ``lo … lo + count - 1``
    span (from tables by lane: no division in hardware), and the chunk index's range."""
    n = -(-lanes * value_width // width)
    # chunk positions take at least one bit: a zero-width index into a one-chunk
    # (crossbar) row converts to Verilog that writes nothing
    at = range(max(n, 2))
    first_tab = Array(Const((lane * value_width) // width, at) for lane in range(lanes))
    end_tab = Array(Const(max(0, end * value_width - 1) // width, at)
                    for end in range(lanes + 1))
    return first_tab[lo], end_tab[lo + count], at


def _link_end(end: wiring.Component, lanes: int, value_width: int, width: int,
              credits: int, members: dict) -> None:
    """What both ends of a link know: its geometry, and the slice (``lo``, ``count``)
    it carries; ``members``: the end's own ports."""
    end.lanes, end.value_width, end.width, end.credits = lanes, value_width, width, credits
    end.chunks = -(-lanes * value_width // width)
    wiring.Component.__init__(end, {**members, "lo": In(range(lanes)),
                                    "count": In(range(lanes + 1))})


class LinkSender(wiring.Component):
    """A link's sending end: rows in (``i``), each as the flits of its lanes
    ``lo … lo + count - 1`` (the other lanes are dropped), one a cycle while it holds
    a credit. It starts with ``credits`` (the receiver's buffer) and gets one back per
    ``wire.credit``. ``stall``: no flit this cycle (a test's random stalls).
    ``flits``: flits sent since reset."""

    def __init__(self, *, lanes: int, value_width: int, width: int, credits: int):
        self.row_layout = output_layout(value_width, lanes)
        _link_end(self, lanes, value_width, width, credits, {
            "i": In(stream.Signature(self.row_layout)), "wire": Out(LinkWire(width)),
            "stall": In(1), "flits": Out(32)})

    def elaborate(self, platform):
        m = Module()
        L, W, w, n = self.lanes, self.value_width, self.width, self.chunks
        first, final, at = _slice_chunks(L, W, w, self.lo, self.count)
        row_in = data.View(self.row_layout, self.i.payload)
        # lane L-1 is never below lo (a constant comparison lint flags): only the top
        keep = Cat(((self.lo <= lane) if lane < L - 1 else 1) & (lane < self.lo + self.count)
                   for lane in range(L))
        raw = row_in.data.as_value()
        masked = Cat(Mux(keep[lane], raw[lane * W:(lane + 1) * W], 0) for lane in range(L))
        held = Signal(n * w)
        held_last = Signal()
        have = Signal()
        chunk = Signal(at)
        credit = Signal(range(self.credits + 1), init=self.credits)
        send = have & (credit != 0) & ~self.stall
        done = send & (chunk == final)
        m.d.comb += self.i.ready.eq(~have | done)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [held.eq(masked), held_last.eq(row_in.last), have.eq(1),
                         chunk.eq(first)]
        with m.Elif(done):
            m.d.sync += have.eq(0)
        with m.Elif(send):
            m.d.sync += chunk.eq(chunk + 1)
        with m.If(send):
            m.d.sync += self.flits.eq(self.flits + 1)
        m.d.comb += [self.wire.valid.eq(send),
                     self.wire.flit.data.eq(held.word_select(chunk, w)),
                     self.wire.flit.last.eq(held_last & (chunk == final))]
        m.d.sync += credit.eq(credit - send + self.wire.credit)
        return m


class LinkReceiver(wiring.Component):
    """A link's receiving end: flits in (``wire``) to a buffer of ``credits`` flits
    (it never overflows: the sender holds one credit per free place), the rows of lanes
    ``lo … lo + count - 1`` reassembled (``o``, zero outside those lanes); a credit goes
    back for each flit taken from the buffer."""

    def __init__(self, *, lanes: int, value_width: int, width: int, credits: int):
        self.row_layout = output_layout(value_width, lanes)
        _link_end(self, lanes, value_width, width, credits, {
            "wire": In(LinkWire(width)), "o": Out(stream.Signature(self.row_layout))})

    def elaborate(self, platform):
        m = Module()
        w, n = self.width, self.chunks
        first, final, at = _slice_chunks(self.lanes, self.value_width, w, self.lo,
                                         self.count)
        lay = flit_layout(w)
        m.submodules.buffer = buf = SyncFIFO(width=lay.size, depth=self.credits)
        m.d.comb += [buf.w_data.eq(self.wire.flit), buf.w_en.eq(self.wire.valid)]
        got = data.View(lay, buf.r_data)
        acc = Signal(n * w)
        acc_last = Signal()
        full = Signal()  # a whole row waits at the output
        mid = Signal()  # a row is partly in: `rchunk` is the next chunk's position
        rchunk = Signal(at)
        pos = Mux(mid, rchunk, first)
        take = buf.r_rdy & (~full | self.o.ready)
        m.d.comb += [buf.r_en.eq(take), self.wire.credit.eq(take)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += full.eq(0)
        with m.If(take):
            with m.If(~mid):
                m.d.sync += acc.eq(0)  # the lanes outside the slice stay zero
            m.d.sync += acc.word_select(pos, w).eq(got.data)
            with m.If(pos == final):
                m.d.sync += [full.eq(1), acc_last.eq(got.last), mid.eq(0)]
            with m.Else():
                m.d.sync += [rchunk.eq(pos + 1), mid.eq(1)]
        out = data.View(self.row_layout, self.o.payload)
        m.d.comb += [self.o.valid.eq(full),
                     out.data.as_value().eq(acc[:self.lanes * self.value_width]),
                     out.last.eq(acc_last)]
        return m


def join_wire(m: Module, name: str, sender, receiver, latency: int):
    """A wire of ``latency`` cycles each way (registers) from a sender's
    :class:`LinkWire` to a receiver's."""
    m.d.comb += [receiver.valid.eq(_delay(m, f"{name}_valid", sender.valid, latency)),
                 receiver.flit.eq(_delay(m, f"{name}_flit", sender.flit, latency)),
                 sender.credit.eq(_delay(m, f"{name}_credit", receiver.credit, latency))]


class Link(wiring.Component):
    """One point-to-point link (module docstring): a :class:`LinkSender` and a
    :class:`LinkReceiver` joined by a wire of ``latency`` cycles each way. ``i``: rows
    whose lanes ``lo … lo + count - 1`` it carries (the others are dropped); ``o``: the
    same rows, zero outside those lanes. ``stall``: the link sends no flit this cycle
    (a test's random stalls). ``flits``: flits sent since reset."""

    def __init__(self, *, lanes: int, value_width: int, width: int, latency: int,
                 credits: int):
        self.latency = latency
        self.sender = LinkSender(lanes=lanes, value_width=value_width, width=width,
                                 credits=credits)
        self.receiver = LinkReceiver(lanes=lanes, value_width=value_width, width=width,
                                     credits=credits)
        self.row_layout = self.sender.row_layout
        super().__init__({
            "i": In(stream.Signature(self.row_layout)),
            "o": Out(stream.Signature(self.row_layout)),
            "lo": In(range(lanes)), "count": In(range(lanes + 1)),
            "stall": In(1), "flits": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.sender = tx = self.sender
        m.submodules.receiver = rx = self.receiver
        wiring.connect(m, wiring.flipped(self.i), tx.i)
        wiring.connect(m, rx.o, wiring.flipped(self.o))
        m.d.comb += [tx.lo.eq(self.lo), tx.count.eq(self.count), rx.lo.eq(self.lo),
                     rx.count.eq(self.count), tx.stall.eq(self.stall),
                     self.flits.eq(tx.flits)]
        join_wire(m, "wire", tx.wire, rx.wire, self.latency)
        return m


class FabricEnd(wiring.Component):
    """Chip ``chip``'s end of the fabric: the senders of its links to every chip, the
    receivers of every chip's link to it, and the logic between them and the chip.
    ``src`` takes the chip's outgoing rows (its ``xchg_o``), ``dst`` gives it its
    incoming rows (its ``xchg_i``). Its link to itself is inside; those to and from the
    other chips q end at the wires ``to_q`` and ``from_q`` — joined by registers in
    :class:`ExchangeFabric`, by pins between boards (:mod:`mixgcn.hdl.board`).
    ``stall[q]`` holds back its link to chip q; ``flits[q]`` counts that link's flits."""

    def __init__(self, config: SystemConfig, chip: int):
        P, L, W = config.chips, config.chip.lanes, config.chip.sae.width
        if not 0 <= chip < P:
            raise ValueError(f"chip must be in 0..{P - 1}, got {chip}")
        self.config, self.chip = config, chip
        self.row_layout = output_layout(W, L)
        self.peers = [q for q in range(P) if q != chip]
        members = {
            "route": In(route_layout(P, L)),
            "src": In(stream.Signature(self.row_layout)),
            "dst": Out(stream.Signature(self.row_layout)),
            "stall": In(P),
            "flits": Out(data.ArrayLayout(32, P)),
        }
        for q in self.peers:
            members[f"to_{q}"] = Out(LinkWire(config.link_width(chip, q)))
            members[f"from_{q}"] = In(LinkWire(config.link_width(q, chip)))
        super().__init__(members)

        def end(cls, src, dst):
            return cls(lanes=L, value_width=W, width=config.link_width(src, dst),
                       credits=config.link_credits(src, dst))
        self.senders = [end(LinkSender, chip, q) for q in range(P)]
        self.receivers = [end(LinkReceiver, r, chip) for r in range(P)]

    def elaborate(self, platform):
        m = Module()
        P, p = self.config.chips, self.chip
        route = self.route
        gather = route.mode == FabricMode.GATHER
        lo, count = Array(route.lo), Array(route.count)
        senders, receivers = self.senders, self.receivers
        for q in range(P):
            m.submodules[f"to_{q}"] = tx = senders[q]
            m.submodules[f"from_{q}"] = rx = receivers[q]
            # whose lanes a link carries: the source's (scatter), the destination's (gather)
            tx_owner, rx_owner = Mux(gather, q, p), Mux(gather, p, q)
            m.d.comb += [tx.lo.eq(lo[tx_owner]), tx.count.eq(count[tx_owner]),
                         rx.lo.eq(lo[rx_owner]), rx.count.eq(count[rx_owner]),
                         tx.stall.eq(self.stall[q]), self.flits[q].eq(tx.flits)]
            if q == p:
                join_wire(m, "self", tx.wire, rx.wire, self.config.link_latency(p, p))
            else:
                wiring.connect(m, tx.wire, wiring.flipped(getattr(self, f"to_{q}")))
                wiring.connect(m, wiring.flipped(getattr(self, f"from_{q}")), rx.wire)

        # ---- source: scatter sends row r to chip r mod P; gather forks it to all
        src, links = self.src, [tx.i for tx in senders]
        dest = Signal(range(P))  # scatter: the next row's owner
        taken = Signal(P)  # gather: links that have the row
        wants = [gather | (dest == q) for q in range(P)]
        for q, link in enumerate(links):
            m.d.comb += [link.valid.eq(src.valid & wants[q] & ~taken[q]),
                         link.payload.eq(src.payload)]
        m.d.comb += src.ready.eq(Cat(~wants[q] | taken[q] | links[q].ready
                                     for q in range(P)).all())
        row = data.View(self.row_layout, src.payload)
        with m.If(src.valid & src.ready):
            m.d.sync += [taken.eq(0),
                         dest.eq(Mux(row.last | (dest == P - 1), 0, dest + 1))]
        with m.Else():
            m.d.sync += taken.eq(taken | Cat(links[q].valid & links[q].ready
                                             for q in range(P)))

        # ---- destination: scatter merges the P slices of a row; gather takes the
        # sources' rows in turn (row order), back to chip 0 after every source's last
        dst, links = self.dst, [rx.o for rx in receivers]
        turn = Signal(range(P))
        ended = Signal(range(P + 1))
        rows = [data.View(self.row_layout, link.payload) for link in links]
        all_valid = Cat(link.valid for link in links).all()
        merged = Signal(self.row_layout.size)
        m.d.comb += merged.eq(functools.reduce(operator.or_, [link.payload.as_value()
                                                              for link in links]))
        m.d.comb += [dst.valid.eq(Mux(gather, Array(link.valid for link in links)[turn],
                                      all_valid)),
                     dst.payload.eq(Mux(gather, Array(link.payload for link in links)[turn],
                                        merged))]
        for r, link in enumerate(links):
            m.d.comb += link.ready.eq(Mux(gather, (turn == r) & dst.ready,
                                          all_valid & dst.ready))
        last = Array(row.last for row in rows)[turn]
        with m.If(gather & dst.valid & dst.ready):
            with m.If(last & (ended == P - 1)):
                m.d.sync += [turn.eq(0), ended.eq(0)]
            with m.Else():
                m.d.sync += [turn.eq(Mux(turn == P - 1, 0, turn + 1)),
                             ended.eq(ended + last)]
        return m


class ExchangeFabric(wiring.Component):
    """P chips' exchange ports joined: a :class:`FabricEnd` per chip, the ends' wires
    joined by registers of each link's latency (module docstring). ``src[p]`` takes chip
    p's outgoing rows (its ``xchg_o``), ``dst[q]`` gives chip q its incoming rows (its
    ``xchg_i``). ``stall`` holds back link ``p·P + q`` (chip p to chip q) in a cycle;
    ``flits`` counts each link's flits."""

    def __init__(self, config: SystemConfig):
        self.config = config
        P, L, W = config.chips, config.chip.lanes, config.chip.sae.width
        self.row_layout = output_layout(W, L)
        super().__init__({
            "route": In(route_layout(P, L)),
            "src": In(stream.Signature(self.row_layout)).array(P),
            "dst": Out(stream.Signature(self.row_layout)).array(P),
            "stall": In(P * P),
            "flits": Out(data.ArrayLayout(32, P * P)),
        })
        self.ends = [FabricEnd(config, p) for p in range(P)]

    def elaborate(self, platform):
        m = Module()
        P = self.config.chips
        for p, end in enumerate(self.ends):
            m.submodules[f"end_{p}"] = end
            m.d.comb += [end.route.eq(self.route),
                         end.stall.eq(self.stall[p * P:(p + 1) * P])]
            m.d.comb += [self.flits[p * P + q].eq(end.flits[q]) for q in range(P)]
            wiring.connect(m, wiring.flipped(self.src[p]), end.src)
            wiring.connect(m, end.dst, wiring.flipped(self.dst[p]))
            for q in end.peers:
                join_wire(m, f"wire_{p}_{q}", getattr(end, f"to_{q}"),
                          getattr(self.ends[q], f"from_{p}"), self.config.link_latency(p, q))
        return m
