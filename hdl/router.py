"""The exchange router: where each engine's output rows go, and where each engine's
input rows come from.

::

    sae_out ──┬─ to_mem ─▶ sae_mem (the SAE's write channel)
              └─ to_xchg ─▶ pipeline FIFO ─▶ xchg_o ···▶ xchg_i ─┬─ x_from_xchg ─▶ sae_x
    dce_out ──┬─ to_mem ─▶ dce_mem                  (one chip:    └─ a_from_xchg ─▶ dce_a
              └─ to_xchg ─▶ pipeline FIFO            looped back)
    x_mem ─────────────────────────────────────────▶ sae_x   (when not from the exchange)
    a_mem ─────────────────────────────────────────▶ dce_a
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.hdl.timing import BlockRamFifo, input_buffer

__all__ = ["ExchangeRouter", "Route", "RouterError"]


class Route(wiring.Signature):
    """The routes of the operations in progress, seen from the controller: for each
    engine whether its rows go to memory and/or the exchange (``sae_to_mem``,
    ``sae_to_xchg``, ``dce_to_mem``, ``dce_to_xchg``), and which engine input takes its
    rows from the exchange (``x_from_xchg``: the SAE's feature buffer, ``a_from_xchg``:
    the DCE's rows). The controller sets them when it issues an operation and clears
    them when the operation completes."""

    NAMES = ("sae_to_mem", "sae_to_xchg", "dce_to_mem", "dce_to_xchg", "x_from_xchg",
             "a_from_xchg")

    def __init__(self):
        super().__init__({name: Out(1) for name in self.NAMES})


# What broke the exchange contract (sticky until reset): ``producers``, both engines
# routed rows into the exchange at once; ``consumers``, both engine inputs took rows from
# it at once.
RouterError = data.StructLayout({"producers": 1, "consumers": 1})


class ExchangeRouter(wiring.Component):
    """Routes rows between the engines, their write channels and the exchange port.

    Contract: at any time at most one engine produces into the exchange and at most one
    engine input consumes from it (the driver keeps to it). A broken contract sets
    ``error`` (sticky until reset) and never loses or duplicates a row: with two
    producers the SAE's rows go first and the DCE waits (its rows stay in its input
    buffer here); with two consumers the SAE's buffer is fed and the DCE sees no rows.

    Each engine's rows enter through a two-row skid buffer, and leave it only when every
    destination its route names can take them (``ready`` is the AND of theirs);
    ``sae_routed`` / ``dce_routed`` are high in the cycle one does (a row counts as
    done there, not as it leaves the engine: the buffer's rows have no route yet).
    ``pipeline_depth`` rows wait in the pipeline FIFO's block RAM, and up to four more
    in the FIFO's two registers and the skid buffer after them. With
    ``loopback`` the skid buffer's output feeds the exchange input inside the router;
    otherwise both are ports (``xchg_o``, ``xchg_i``) for a fabric.
    """

    def __init__(self, *, row_layout, x_layout, a_layout, pipeline_depth: int,
                 loopback: bool = True):
        self.row_layout, self.depth, self.loopback = row_layout, pipeline_depth, loopback
        members = {
            "route": In(Route()),
            "sae_out": In(stream.Signature(row_layout)),
            "dce_out": In(stream.Signature(row_layout)),
            "sae_mem": Out(stream.Signature(row_layout)),
            "dce_mem": Out(stream.Signature(row_layout)),
            "x_mem": In(stream.Signature(x_layout)),
            "a_mem": In(stream.Signature(a_layout)),
            "sae_x": Out(stream.Signature(x_layout)),
            "dce_a": Out(stream.Signature(a_layout)),
            "error": Out(RouterError),
            "sae_routed": Out(1), "dce_routed": Out(1),
        }
        if not loopback:
            members["xchg_o"] = Out(stream.Signature(row_layout))
            members["xchg_i"] = In(stream.Signature(row_layout))
        super().__init__(members)
        self.pipe = BlockRamFifo(row_layout.size, pipeline_depth)
        # each engine's fork: its current row already taken by memory / by the pipe
        self.taken = {engine: (Signal(name=f"{engine}_mem_taken"),
                               Signal(name=f"{engine}_pipe_taken"))
                      for engine in ("sae", "dce")}

    def elaborate(self, platform):
        m = Module()
        route = self.route
        m.submodules.pipe = pipe = self.pipe
        into_pipe = pipe.w_stream

        # producers: when both claim the exchange the SAE has it and the DCE is held.
        # An engine's row forks to memory and/or the pipe eagerly: each branch takes it
        # when it can and remembers it did; the row leaves the engine once every branch
        # has it (a branch's valid is never withdrawn before its ready).
        sae_xchg = route.sae_to_xchg
        dce_xchg = route.dce_to_xchg & ~route.sae_to_xchg
        # each engine's rows enter through a skid buffer whose `ready` is a register
        # (hdl/timing.py): the fork's decision, which looks at the pipe's room,
        # stays here and does not cross the die into the engine's output FIFO (the
        # pipe's level to the DCE's output FIFO's level was the `ecp5` chip's slowest
        # path, docs/boards.md, step 24)
        sae_out = input_buffer(m, "sae_out", self.sae_out)
        dce_out = input_buffer(m, "dce_out", self.dce_out)
        to_pipe = []
        for engine, out, mem, to_mem, wants, has in (
                ("sae", sae_out, self.sae_mem, route.sae_to_mem, route.sae_to_xchg,
                 sae_xchg),
                ("dce", dce_out, self.dce_mem, route.dce_to_mem, route.dce_to_xchg,
                 dce_xchg)):
            mem_taken, pipe_taken = self.taken[engine]
            live = out.valid & ~(wants & ~has)
            pipe_valid = live & has & ~pipe_taken
            mem_done = ~to_mem | mem_taken | mem.ready
            pipe_done = ~has | pipe_taken | into_pipe.ready
            # `ready` does not look at the engine's `valid` (a row leaves on both, as
            # before): the path from the engine's output FIFO through the fork and back
            # into the FIFO was the `ecp5` chip's slowest (docs/boards.md, step 19)
            m.d.comb += [mem.valid.eq(live & to_mem & ~mem_taken), mem.payload.eq(out.payload),
                         out.ready.eq(~(wants & ~has) & (to_mem | has) & mem_done & pipe_done)]
            m.d.comb += getattr(self, f"{engine}_routed").eq(out.valid & out.ready)
            with m.If(out.valid & out.ready):
                m.d.sync += [mem_taken.eq(0), pipe_taken.eq(0)]
            with m.Else():
                m.d.sync += [mem_taken.eq(mem_taken | (mem.valid & mem.ready)),
                             pipe_taken.eq(pipe_taken | (pipe_valid & into_pipe.ready))]
            to_pipe.append(pipe_valid)
        m.d.comb += [into_pipe.valid.eq(Mux(sae_xchg, to_pipe[0], to_pipe[1])),
                     into_pipe.payload.eq(Mux(sae_xchg, sae_out.payload, dce_out.payload))]

        # the pipe's words leave its block RAM from the RAM's own output register
        # (hdl/timing.py), then pass a skid buffer whose `ready` is a register: neither
        # the RAM's slow output nor the consumers' `ready` crosses the die in one cycle
        # (steps 20, 21 and 29 of docs/boards.md)
        piped = input_buffer(m, "pipe_out", pipe.r_stream)
        if self.loopback:
            xchg = piped
        else:
            wiring.connect(m, piped, wiring.flipped(self.xchg_o))
            xchg = self.xchg_i
        row = data.View(self.row_layout, xchg.payload)

        # consumers: when both claim the exchange the SAE's buffer has it and the DCE
        # sees no rows
        x_xchg = route.x_from_xchg
        a_xchg = route.a_from_xchg & ~route.x_from_xchg
        for dst, src, wants, has in ((self.sae_x, self.x_mem, route.x_from_xchg, x_xchg),
                                     (self.dce_a, self.a_mem, route.a_from_xchg, a_xchg)):
            m.d.comb += [dst.valid.eq(Mux(has, xchg.valid, src.valid & ~wants)),
                         dst.payload.eq(Mux(has, row.data, src.payload)),
                         src.ready.eq(~wants & dst.ready)]
        m.d.comb += xchg.ready.eq(Mux(x_xchg, self.sae_x.ready, a_xchg & self.dce_a.ready))

        with m.If(route.sae_to_xchg & route.dce_to_xchg):
            m.d.sync += self.error.producers.eq(1)
        with m.If(route.x_from_xchg & route.a_from_xchg):
            m.d.sync += self.error.consumers.eq(1)
        return m
