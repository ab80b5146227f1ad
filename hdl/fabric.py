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

__all__ = ["ExchangeFabric", "FabricMode", "Link", "route_layout"]


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


class Link(wiring.Component):
    """One point-to-point link (module docstring). ``i``: rows whose lanes
    ``lo … lo + count - 1`` it carries (the others are dropped); ``o``: the same rows,
    zero outside those lanes. ``stall``: the link sends no flit this cycle (a test's
    random stalls). ``flits``: flits sent since reset."""

    def __init__(self, *, lanes: int, value_width: int, width: int, latency: int,
                 credits: int):
        self.row_layout = output_layout(value_width, lanes)
        self.lanes, self.value_width = lanes, value_width
        self.width, self.latency, self.credits = width, latency, credits
        self.bits = lanes * value_width
        self.chunks = -(-self.bits // width)
        super().__init__({
            "i": In(stream.Signature(self.row_layout)),
            "o": Out(stream.Signature(self.row_layout)),
            "lo": In(range(lanes)), "count": In(range(lanes + 1)),
            "stall": In(1), "flits": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        L, W, w, n = self.lanes, self.value_width, self.width, self.chunks
        # chunk positions take at least one bit: a zero-width index into a one-chunk
        # (crossbar) row converts to Verilog that writes nothing
        at = range(max(n, 2))
        # the chunks a slice's bits span: tables by lane, no division in hardware
        first_tab = Array(Const((lane * W) // w, at) for lane in range(L))
        end_tab = Array(Const(max(0, end * W - 1) // w, at) for end in range(L + 1))
        first, final = first_tab[self.lo], end_tab[self.lo + self.count]
        flit_layout = data.StructLayout({"data": unsigned(w), "last": 1})

        # ---- sender: a row at a time, one flit a cycle while it holds a credit
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
        flit = Signal(flit_layout)
        m.d.comb += [flit.data.eq(held.word_select(chunk, w)),
                     flit.last.eq(held_last & (chunk == final))]

        # ---- the wire: `latency` cycles each way, no backpressure on it
        arrive_valid = _delay(m, "fwd_valid", send, self.latency)
        arrive = _delay(m, "fwd_flit", flit, self.latency)

        # ---- receiver: a buffer of `credits` flits (never overflows: the sender
        # holds one credit per free place), then the row reassembled
        m.submodules.buffer = buf = SyncFIFO(width=flit_layout.size,
                                                     depth=self.credits)
        m.d.comb += [buf.w_data.eq(arrive), buf.w_en.eq(arrive_valid)]
        got = data.View(flit_layout, buf.r_data)
        acc = Signal(n * w)
        acc_last = Signal()
        full = Signal()  # a whole row waits at the output
        mid = Signal()  # a row is partly in: `rchunk` is the next chunk's position
        rchunk = Signal(at)
        pos = Mux(mid, rchunk, first)
        take = buf.r_rdy & (~full | self.o.ready)
        m.d.comb += buf.r_en.eq(take)
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
        m.d.comb += [self.o.valid.eq(full), out.data.as_value().eq(acc[:self.bits]),
                     out.last.eq(acc_last)]

        # ---- credits come back `latency` cycles after the receiver takes a flit
        returned = _delay(m, "credit", take, self.latency)
        m.d.sync += credit.eq(credit - send + returned)
        return m


class ExchangeFabric(wiring.Component):
    """P chips' exchange ports joined by P × P :class:`Link`\\ s (module docstring).
    ``src[p]`` takes chip p's outgoing rows (its ``xchg_o``), ``dst[q]`` gives chip q its
    incoming rows (its ``xchg_i``). ``stall`` holds back link ``p·P + q`` (chip p to
    chip q) in a cycle; ``flits`` counts each link's flits."""

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
        self.links = [[Link(lanes=L, value_width=W, width=config.link_width(p, q),
                            latency=config.link_latency(p, q),
                            credits=config.link_credits(p, q)) for q in range(P)]
                      for p in range(P)]

    def elaborate(self, platform):
        m = Module()
        P = self.config.chips
        route = self.route
        gather = route.mode == FabricMode.GATHER
        for p in range(P):
            for q in range(P):
                link = self.links[p][q]
                m.submodules[f"link_{p}_{q}"] = link
                owner = Mux(gather, q, p)  # whose lanes the link carries
                m.d.comb += [link.lo.eq(Array(route.lo)[owner]),
                             link.count.eq(Array(route.count)[owner]),
                             link.stall.eq(self.stall[p * P + q]),
                             self.flits[p * P + q].eq(link.flits)]

        # ---- sources: scatter sends row r to chip r mod P; gather forks it to all
        for p in range(P):
            src, links = self.src[p], [self.links[p][q].i for q in range(P)]
            dest = Signal(range(P), name=f"src{p}_dest")  # scatter: the next row's owner
            taken = Signal(P, name=f"src{p}_taken")  # gather: links that have the row
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

        # ---- destinations: scatter merges the P slices of a row; gather takes the
        # sources' rows in turn (row order), back to chip 0 after every source's last
        for q in range(P):
            dst, links = self.dst[q], [self.links[p][q].o for p in range(P)]
            turn = Signal(range(P), name=f"dst{q}_turn")
            ended = Signal(range(P + 1), name=f"dst{q}_ended")
            rows = [data.View(self.row_layout, link.payload) for link in links]
            all_valid = Cat(link.valid for link in links).all()
            merged = Signal(self.row_layout.size, name=f"dst{q}_merged")
            m.d.comb += merged.eq(functools.reduce(operator.or_, [link.payload.as_value()
                                                                  for link in links]))
            m.d.comb += [dst.valid.eq(Mux(gather, Array(link.valid for link in links)[turn],
                                          all_valid)),
                         dst.payload.eq(Mux(gather, Array(link.payload for link in links)[turn],
                                            merged))]
            for p, link in enumerate(links):
                m.d.comb += link.ready.eq(Mux(gather, (turn == p) & dst.ready,
                                              all_valid & dst.ready))
            last = Array(r.last for r in rows)[turn]
            with m.If(gather & dst.valid & dst.ready):
                with m.If(last & (ended == P - 1)):
                    m.d.sync += [turn.eq(0), ended.eq(0)]
                with m.Else():
                    m.d.sync += [turn.eq(Mux(turn == P - 1, 0, turn + 1)),
                                 ended.eq(ended + last)]
        return m
