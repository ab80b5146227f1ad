"""One accelerator chip: the SAE and the DCE, the pipeline FIFO and exchange port between
them, a descriptor-driven controller and the memory port (docs/architecture.md).

::

    desc ─▶ queue ─▶ controller ──cmd──▶ SAE ──out──┬──────────────▶ write channel (sae)
                        │                 ▲ ▲ ▲      │
                        ▼               x csr mask   ├─▶ pipeline FIFO ─▶ xchg_o
                      status        (read channels)  │   (rows of either engine)  │
                                          │          │                 one chip:  │ loopback
                                     x ◀──┴──────────┼──────────────── xchg_i ◀───┘
                                     a ◀─────────────┘ (to the SAE's x or the DCE's a)
                      cmd ──▶ DCE ◀── a, b, mask (read channels)
                                └──out──┬──▶ write channel (dce)
                                        └──▶ pipeline FIFO

**Descriptors** (:attr:`ChipLayouts.desc_layout`) name a unit and its operands:

- ``LOAD`` — fill feature-buffer ``bank`` of the SAE with ``rows`` words from ``src``,
  or from the exchange port (``from_xchg``: a GEMM's output rows);
- ``SPMM`` — ``rows`` output rows of S·X from ``bank``; the CSR beats (``src_len``) from
  ``src``, ReLU' masks from ``mask_addr``; with ``follow`` it starts while the ``LOAD``
  before it still fills the bank (see :mod:`mixgcn.hdl.sae`);
- ``GEMM`` — one DCE operation (``op``, ``rows``, ``k``, ``m``); ``a`` words from ``src``
  (``src_len``), or one word a row from the exchange port (``from_xchg``, needs
  ``k <= lanes``); ``b`` words from ``src_b`` (``b_len``);
- ``FENCE`` — nothing; with ``fence`` it reports once everything before it completed.

SPMM and GEMM rows go to memory at ``dst`` (``to_mem``) and/or into the pipeline FIFO
towards the exchange port (``to_xchg``). Each descriptor also carries the output
stage's ``shift``, ``relu`` and ``mask``. Descriptors issue in order, each as soon as
its unit is free, so a ``LOAD`` overlaps the previous ``SPMM`` (the other bank), and
the two halves of a layer run together: an SpMM feeding a GEMM through the exchange
port (the DCE takes each row as soon as the SAE finishes it), or a GEMM feeding the
LOAD of a following SpMM (the SAE gathers each row once its neighbours have arrived).
``fence`` holds a descriptor until every earlier one has completed, which orders a
read after the write it depends on.

A unit completes when its output is in memory (or, for ``to_xchg`` only, in the
pipeline FIFO); it then sends a **status** record: its sequence number, the cycles from
issue to completion and the output stage's statistics. Counters the host reads:
``cycles`` since reset, descriptors ``issued`` and ``completed``, and each engine's
busy / starved / blocked cycles.
"""

from __future__ import annotations

from amaranth import Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import ChipConfig
from mixgcn.hdl.dce import DCELayouts, DCEOp, DenseCombinationEngine
from mixgcn.hdl.memport import ReadChannel, StreamReader, StreamWriter, WriteChannel
from mixgcn.hdl.sae import SAELayouts, SAEOp, SparseAggregationEngine

__all__ = ["READ_CHANNELS", "WRITE_CHANNELS", "Chip", "ChipLayouts", "Unit"]

# the memory port's channels, in the order the simulation's memory model numbers them
READ_CHANNELS = ("x", "csr", "smask", "a", "b", "dmask")
WRITE_CHANNELS = ("sae", "dce")
ENGINE_COUNTERS = ("busy_cycles", "starved_cycles", "blocked_cycles")


class Unit(enum.Enum, shape=2):
    LOAD = 0
    SPMM = 1
    GEMM = 2
    FENCE = 3  # does nothing; with ``fence`` set, reports once all before it completed


class ChipLayouts:
    """Descriptor, status and memory-word formats of a chip configuration."""

    def __init__(self, c: ChipConfig):
        self.sae_layouts = SAELayouts(c.sae)
        self.dce_layouts = DCELayouts(c.dce)
        aw = c.addr_width
        self.desc_layout = data.StructLayout({
            "unit": Unit, "op": DCEOp, "bank": 1,
            "rows": unsigned(32), "k": range(c.dce.max_k + 1), "m": range(c.dce.cols + 1),
            "shift": range(c.sae.acc_width), "relu": 1, "mask": 1,
            "src": unsigned(aw), "src_len": unsigned(32),
            "src_b": unsigned(aw), "b_len": unsigned(32),
            "mask_addr": unsigned(aw), "dst": unsigned(aw),
            "to_mem": 1, "to_xchg": 1, "from_xchg": 1, "follow": 1, "fence": 1,
        })
        self.status_layout = data.StructLayout({
            "seq": unsigned(32), "unit": Unit, "cycles": unsigned(32),
            "max_abs": unsigned(c.sae.acc_width), "saturated": unsigned(32),
        })
        s, d = self.sae_layouts, self.dce_layouts
        self.row_layout = s.out_layout  # a row on the exchange port: L values + last
        self.stream_layouts = {"x": s.x_layout, "csr": s.csr_layout,
                               "smask": unsigned(c.sae.lanes), "a": d.a_layout,
                               "b": d.b_layout, "dmask": unsigned(c.dce.cols)}
        self.mem_width = max(Shape.cast(x).width for x in
                             [*self.stream_layouts.values(), s.out_layout["data"].shape,
                              d.out_layout["data"].shape])


class Chip(wiring.Component):
    """See the module docstring. ``loopback``: the exchange port's output feeds its
    input inside the chip (a one-chip system); otherwise ``xchg_o`` / ``xchg_i`` are
    ports for the multi-chip fabric."""

    def __init__(self, config: ChipConfig, *, loopback: bool = True):
        if not isinstance(config, ChipConfig):
            self._MustUse__silence = True
            raise TypeError(f"expected a ChipConfig, got {config!r}")
        self.config = c = config
        self.loopback = loopback
        self.layouts = lay = ChipLayouts(c)
        aw, mw = c.addr_width, lay.mem_width
        members = {
            "desc": In(stream.Signature(lay.desc_layout)),
            "status": Out(stream.Signature(lay.status_layout)),
            **{f"rd_{n}": Out(ReadChannel(aw, mw)) for n in READ_CHANNELS},
            **{f"wr_{n}": Out(WriteChannel(aw, mw)) for n in WRITE_CHANNELS},
            "idle": Out(1),
            "cycles": Out(unsigned(c.sae.counter_width)),
            "issued": Out(unsigned(32)), "completed": Out(unsigned(32)),
            "load_cycles": Out(unsigned(c.sae.counter_width)),
        }
        for eng, cw in (("sae", c.sae.counter_width), ("dce", c.dce.counter_width)):
            members.update({f"{eng}_{n}": Out(unsigned(cw)) for n in ENGINE_COUNTERS})
        if not loopback:
            members["xchg_o"] = Out(stream.Signature(lay.row_layout))
            members["xchg_i"] = In(stream.Signature(lay.row_layout))
        super().__init__(members)

    def elaborate(self, platform):
        c, lay = self.config, self.layouts
        aw, mw = c.addr_width, lay.mem_width
        m = Module()
        m.submodules.sae = sae = SparseAggregationEngine(c.sae)
        m.submodules.dce = dce = DenseCombinationEngine(c.dce)

        # --------------------------------------------------------------- memory port
        readers = {}
        for name in READ_CHANNELS:
            r = StreamReader(lay.stream_layouts[name], addr_width=aw, mem_width=mw,
                             depth=c.reader_depth)
            m.submodules[f"read_{name}"] = readers[name] = r
            wiring.connect(m, r.mem, wiring.flipped(getattr(self, f"rd_{name}")))
        writers = {}
        for name, eng in (("sae", sae), ("dce", dce)):
            w = StreamWriter(eng.out_layout, addr_width=aw, mem_width=mw, field="data")
            m.submodules[f"write_{name}"] = writers[name] = w
            wiring.connect(m, w.mem, wiring.flipped(getattr(self, f"wr_{name}")))
        wiring.connect(m, readers["csr"].o, sae.csr)
        wiring.connect(m, readers["smask"].o, sae.mask)
        wiring.connect(m, readers["b"].o, dce.b)
        wiring.connect(m, readers["dmask"].o, dce.mask)

        # ------------------------------------ engine outputs: memory and/or the pipeline
        # The pipeline FIFO carries rows from one engine to the other through the
        # exchange port: SAE → DCE (an SpMM's rows are a GEMM's input) or DCE → SAE (a
        # GEMM's rows fill the feature buffer an SpMM gathers from). Descriptors pick
        # the producer (``to_xchg``) and the consumer (``from_xchg``); one of each at a
        # time, which the driver keeps to.
        m.submodules.pipe = pipe = SyncFIFOBuffered(width=lay.row_layout.size,
                                                    depth=c.pipeline_depth)
        route = {}  # engine -> (to_mem, to_xchg) of its current operation
        pipe_writes = []
        for name, eng in (("sae", sae), ("dce", dce)):
            to_mem = Signal(name=f"{name}_to_mem")
            to_xchg = Signal(name=f"{name}_to_xchg")
            route[name] = (to_mem, to_xchg)
            w = writers[name]
            mem_ok = ~to_mem | w.i.ready
            pipe_ok = ~to_xchg | pipe.w_rdy
            m.d.comb += [eng.out.ready.eq(mem_ok & pipe_ok),
                         w.i.valid.eq(eng.out.valid & to_mem & pipe_ok),
                         w.i.payload.eq(eng.out.payload)]
            pipe_writes.append((eng.out.valid & to_xchg & mem_ok, eng.out.payload))
        (sae_put, sae_row), (dce_put, dce_row) = pipe_writes
        m.d.comb += [pipe.w_en.eq(sae_put | dce_put),
                     pipe.w_data.eq(Mux(sae_put, Value.cast(sae_row), Value.cast(dce_row)))]
        if self.loopback:
            xchg = pipe.r_stream
        else:
            m.d.comb += [self.xchg_o.valid.eq(pipe.r_rdy), self.xchg_o.payload.eq(pipe.r_data),
                         pipe.r_en.eq(self.xchg_o.ready)]
            xchg = self.xchg_i
        row = data.View(lay.row_layout, xchg.payload) if self.loopback else xchg.payload
        a_from_xchg, x_from_xchg = Signal(), Signal()
        for eng_in, reader, sel in ((dce.a, readers["a"].o, a_from_xchg),
                                    (sae.x, readers["x"].o, x_from_xchg)):
            m.d.comb += [
                eng_in.valid.eq(Mux(sel, xchg.valid, reader.valid)),
                eng_in.payload.eq(Mux(sel, Value.cast(row.data), Value.cast(reader.payload))),
                reader.ready.eq(~sel & eng_in.ready),
            ]
        m.d.comb += xchg.ready.eq((a_from_xchg & dce.a.ready) | (x_from_xchg & sae.x.ready))

        # ---------------------------------------------------------------- controller
        m.submodules.queue = queue = SyncFIFOBuffered(width=lay.desc_layout.size,
                                                      depth=c.desc_depth)
        m.d.comb += [queue.w_en.eq(self.desc.valid), queue.w_data.eq(self.desc.payload),
                     self.desc.ready.eq(queue.w_rdy)]
        head = data.View(lay.desc_layout, queue.r_data)

        units = list(Unit)
        busy = {u: Signal(name=f"{u.name.lower()}_busy") for u in units}
        sent = {u: Signal(name=f"{u.name.lower()}_sent") for u in units}  # engine took cmd
        report = {u: Signal(name=f"{u.name.lower()}_report") for u in units}  # status due
        record = {u: Signal(lay.status_layout, name=f"{u.name.lower()}_record")
                  for u in units}
        t0 = {u: Signal.like(self.cycles, name=f"{u.name.lower()}_t0") for u in units}
        seq = {u: Signal(32, name=f"{u.name.lower()}_seq") for u in units}

        # one command register per engine: the engine takes it when it can
        sae_cmd, dce_cmd = sae.cmd, dce.cmd
        sae_owner = Signal(Unit)  # which SAE unit the pending command belongs to
        with m.If(sae_cmd.valid & sae_cmd.ready):
            m.d.sync += sae_cmd.valid.eq(0)
            with m.If(sae_owner == Unit.LOAD):
                m.d.sync += sent[Unit.LOAD].eq(1)
            with m.Else():
                m.d.sync += sent[Unit.SPMM].eq(1)
        with m.If(dce_cmd.valid & dce_cmd.ready):
            m.d.sync += [dce_cmd.valid.eq(0), sent[Unit.GEMM].eq(1)]

        free = {u: ~busy[u] & ~report[u] for u in units}
        all_done = ~(busy[Unit.LOAD] | busy[Unit.SPMM] | busy[Unit.GEMM])
        can = Signal()  # the head's unit (and its engine's command register) is free
        with m.Switch(head.unit):
            with m.Case(Unit.LOAD, Unit.SPMM):
                m.d.comb += can.eq(Mux(head.unit == Unit.LOAD, free[Unit.LOAD],
                                       free[Unit.SPMM]) & ~sae_cmd.valid)
            with m.Case(Unit.GEMM):
                m.d.comb += can.eq(free[Unit.GEMM] & ~dce_cmd.valid)
            with m.Case(Unit.FENCE):
                m.d.comb += can.eq(free[Unit.FENCE])
        issue = Signal()
        m.d.comb += [issue.eq(queue.r_rdy & can & (~head.fence | all_done)),
                     queue.r_en.eq(issue)]

        # progress of each unit's operation, counted where its words leave or arrive
        rows_out, spmm_rows = Signal(32), Signal(32)  # SPMM rows out / expected
        gemm_out, gemm_rows = Signal(32), Signal(32)  # GEMM rows out / expected
        loaded, load_rows = Signal(32), Signal(32)  # LOAD rows taken / expected
        with m.If(issue):
            m.d.sync += self.issued.eq(self.issued + 1)
            for u in units:
                with m.If(head.unit == u):
                    m.d.sync += [busy[u].eq(1), sent[u].eq(0), t0[u].eq(self.cycles),
                                 seq[u].eq(self.issued)]
            with m.Switch(head.unit):
                with m.Case(Unit.LOAD):
                    r = readers["x"]
                    m.d.comb += [r.start.eq(1), r.base.eq(head.src),
                                 r.count.eq(Mux(head.from_xchg, 0, head.rows))]
                    m.d.sync += [sae_cmd.valid.eq(1), sae_owner.eq(Unit.LOAD),
                                 sae_cmd.payload.op.eq(SAEOp.LOAD),
                                 sae_cmd.payload.bank.eq(head.bank),
                                 sae_cmd.payload.rows.eq(head.rows),
                                 x_from_xchg.eq(head.from_xchg), load_rows.eq(head.rows),
                                 loaded.eq(0)]
                with m.Case(Unit.SPMM):
                    for name, base, count in (("csr", head.src, head.src_len),
                                              ("smask", head.mask_addr,
                                               Mux(head.mask, head.rows, 0))):
                        r = readers[name]
                        m.d.comb += [r.start.eq(1), r.base.eq(base), r.count.eq(count)]
                    m.d.comb += [writers["sae"].start.eq(1), writers["sae"].base.eq(head.dst)]
                    p = sae_cmd.payload
                    m.d.sync += [sae_cmd.valid.eq(1), sae_owner.eq(Unit.SPMM),
                                 p.op.eq(SAEOp.SPMM), p.bank.eq(head.bank), p.rows.eq(head.rows),
                                 p.shift.eq(head.shift), p.relu.eq(head.relu),
                                 p.mask.eq(head.mask), p.follow.eq(head.follow),
                                 route["sae"][0].eq(head.to_mem),
                                 route["sae"][1].eq(head.to_xchg), rows_out.eq(0),
                                 spmm_rows.eq(head.rows)]
                with m.Case(Unit.GEMM):
                    for name, base, count in (
                            ("a", head.src, Mux(head.from_xchg, 0, head.src_len)),
                            ("b", head.src_b, head.b_len),
                            ("dmask", head.mask_addr, Mux(head.mask, head.rows, 0))):
                        r = readers[name]
                        m.d.comb += [r.start.eq(1), r.base.eq(base), r.count.eq(count)]
                    m.d.comb += [writers["dce"].start.eq(1), writers["dce"].base.eq(head.dst)]
                    p = dce_cmd.payload
                    m.d.sync += [dce_cmd.valid.eq(1), p.op.eq(head.op), p.rows.eq(head.rows),
                                 p.k.eq(head.k), p.m.eq(head.m), p.shift.eq(head.shift),
                                 p.relu.eq(head.relu), p.mask.eq(head.mask),
                                 a_from_xchg.eq(head.from_xchg),
                                 route["dce"][0].eq(head.to_mem),
                                 route["dce"][1].eq(head.to_xchg), gemm_out.eq(0),
                                 gemm_rows.eq(Mux(head.op == DCEOp.XTG, head.k, head.rows))]

        for count, strm in ((rows_out, sae.out), (gemm_out, dce.out), (loaded, sae.x)):
            with m.If(strm.valid & strm.ready):
                m.d.sync += count.eq(count + 1)

        finished = {
            Unit.LOAD: sent[Unit.LOAD] & (loaded == load_rows),
            Unit.SPMM: sent[Unit.SPMM] & (rows_out == spmm_rows),
            Unit.GEMM: sent[Unit.GEMM] & (gemm_out == gemm_rows),
            Unit.FENCE: 1,
        }
        stats = {Unit.LOAD: (0, 0), Unit.SPMM: (sae.max_abs, sae.saturated),
                 Unit.GEMM: (dce.max_abs, dce.saturated), Unit.FENCE: (0, 0)}
        for u in units:
            with m.If(busy[u] & finished[u]):
                rec = record[u]
                m.d.sync += [busy[u].eq(0), report[u].eq(1), rec.seq.eq(seq[u]),
                             rec.unit.eq(u), rec.cycles.eq(self.cycles - t0[u]),
                             rec.max_abs.eq(stats[u][0]), rec.saturated.eq(stats[u][1])]

        # status records leave one a cycle (LOAD first); a unit with a record still to
        # send takes no new descriptor, so none is ever lost
        with m.If(~self.status.valid | self.status.ready):
            m.d.sync += self.status.valid.eq(0)
            for i, u in enumerate(units):
                with (m.If if i == 0 else m.Elif)(report[u]):
                    m.d.sync += [self.status.valid.eq(1), self.status.payload.eq(record[u]),
                                 report[u].eq(0), self.completed.eq(self.completed + 1)]

        # ------------------------------------------------------------------- counters
        m.d.sync += self.cycles.eq(self.cycles + 1)
        m.d.comb += [self.load_cycles.eq(sae.load_cycles),
                     self.idle.eq(all_done & ~busy[Unit.FENCE] & ~queue.r_rdy
                                  & ~self.status.valid
                                  & ~(report[Unit.LOAD] | report[Unit.SPMM]
                                      | report[Unit.GEMM] | report[Unit.FENCE]))]
        for eng, e in (("sae", sae), ("dce", dce)):
            for n in ENGINE_COUNTERS:
                m.d.comb += getattr(self, f"{eng}_{n}").eq(getattr(e, n))
        return m
