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
  before it still fills the bank (see :mod:`mixgcn.hdl.sae`); ``keep`` / ``accumulate``
  (a chip with ``SAEConfig.partial_rows``): the rows' sums go into / start from the
  SAE's partial sums, for an SpMM in column windows (docs/tiling.md);
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
busy / starved / blocked cycles; ``error`` flags a broken exchange contract.

Components: :class:`~mixgcn.hdl.controller.Controller` (queue, issue, status records),
:class:`~mixgcn.hdl.sae.SparseAggregationEngine`,
:class:`~mixgcn.hdl.dce.DenseCombinationEngine`,
:class:`~mixgcn.hdl.router.ExchangeRouter` (the pipeline FIFO and exchange port, one
producer and one consumer enforced) and :class:`~mixgcn.hdl.memport.MemoryPort`.
"""

from __future__ import annotations

from amaranth import Module, Shape, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import ChipConfig
from mixgcn.hdl.controller import Controller, Unit
from mixgcn.hdl.dce import DCELayouts, DCEOp, DenseCombinationEngine
from mixgcn.hdl.memport import READ_CHANNELS, WRITE_CHANNELS, MemoryBus, MemoryPort
from mixgcn.hdl.router import ExchangeRouter, RouterError
from mixgcn.hdl.sae import SAELayouts, SparseAggregationEngine

__all__ = ["ENGINE_COUNTERS", "READ_CHANNELS", "WRITE_CHANNELS", "Chip", "ChipCounters",
           "ChipLayouts", "EngineCounters", "Unit"]

ENGINE_COUNTERS = ("busy_cycles", "starved_cycles", "blocked_cycles")


class ChipLayouts:
    """Descriptor, status and memory-word formats of a chip configuration."""

    def __init__(self, c: ChipConfig):
        self.sae_layouts = SAELayouts(c.sae)
        self.dce_layouts = DCELayouts(c.dce)
        self.addr_width = aw = c.addr_width
        self.desc_layout = data.StructLayout({
            "unit": Unit, "op": DCEOp, "bank": 1,
            "rows": unsigned(32), "k": range(c.dce.max_k + 1), "m": range(c.dce.cols + 1),
            "shift": range(c.sae.acc_width), "relu": 1, "mask": 1,
            "src": unsigned(aw), "src_len": unsigned(32),
            "src_b": unsigned(aw), "b_len": unsigned(32),
            "mask_addr": unsigned(aw), "dst": unsigned(aw),
            "to_mem": 1, "to_xchg": 1, "from_xchg": 1, "follow": 1, "fence": 1,
            **({"keep": 1, "accumulate": 1} if c.sae.partial_rows else {}),
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
        self.write_layouts = {"sae": s.out_layout, "dce": d.out_layout}
        self.mem_width = max(Shape.cast(x).width for x in
                             [*self.stream_layouts.values(), s.out_layout["data"].shape,
                              d.out_layout["data"].shape])


class EngineCounters(wiring.Signature):
    """An engine's cycles while an operation is in progress: ``busy_cycles`` (it moved
    data), ``starved_cycles`` (waiting for an input), ``blocked_cycles`` (waiting for
    room at its output)."""

    def __init__(self, counter_width: int):
        super().__init__({n: Out(unsigned(counter_width)) for n in ENGINE_COUNTERS})


class ChipCounters(wiring.Signature):
    """The counters the host reads: ``cycles`` since reset, descriptors ``issued`` and
    ``completed``, the SAE's ``load_cycles`` and each engine's :class:`EngineCounters`
    (``sae``, ``dce``)."""

    def __init__(self, counter_width: int):
        super().__init__({"cycles": Out(unsigned(counter_width)), "issued": Out(32),
                          "completed": Out(32), "load_cycles": Out(unsigned(counter_width)),
                          "sae": Out(EngineCounters(counter_width)),
                          "dce": Out(EngineCounters(counter_width))})


class Chip(wiring.Component):
    """See the module docstring. ``loopback``: the exchange port's output feeds its
    input inside the chip (a one-chip system); otherwise ``xchg_o`` / ``xchg_i`` are
    ports for the multi-chip fabric. ``memory``: the memory port's channels
    (:class:`~mixgcn.hdl.memport.MemoryBus`)."""

    def __new__(cls, config, *args, **kwargs):
        if not isinstance(config, ChipConfig):  # refused before it is an elaboratable
            raise TypeError(f"expected a ChipConfig, got {config!r}")
        return super().__new__(cls)

    def __init__(self, config: ChipConfig, *, loopback: bool = True):
        self.config = c = config
        self.loopback = loopback
        self.layouts = lay = ChipLayouts(c)
        members = {
            "desc": In(stream.Signature(lay.desc_layout)),
            "status": Out(stream.Signature(lay.status_layout)),
            "memory": Out(MemoryBus(c.addr_width, lay.mem_width)),
            "counters": Out(ChipCounters(c.sae.counter_width)),
            "error": Out(RouterError), "idle": Out(1),
        }
        if not loopback:
            members["xchg_o"] = Out(stream.Signature(lay.row_layout))
            members["xchg_i"] = In(stream.Signature(lay.row_layout))
        super().__init__(members)

    def elaborate(self, platform):
        c, lay = self.config, self.layouts
        m = Module()
        m.submodules.sae = sae = SparseAggregationEngine(c.sae)
        m.submodules.dce = dce = DenseCombinationEngine(c.dce)
        m.submodules.port = port = MemoryPort(lay.stream_layouts, lay.write_layouts,
                                              addr_width=c.addr_width,
                                              mem_width=lay.mem_width, depth=c.reader_depth)
        m.submodules.router = router = ExchangeRouter(
            row_layout=lay.row_layout, x_layout=lay.stream_layouts["x"],
            a_layout=lay.stream_layouts["a"], pipeline_depth=c.pipeline_depth,
            loopback=self.loopback)
        m.submodules.controller = ctrl = Controller(
            lay, desc_depth=c.desc_depth, counter_width=c.sae.counter_width,
            acc_width=c.sae.acc_width)

        wiring.connect(m, wiring.flipped(self.desc), ctrl.desc)
        wiring.connect(m, ctrl.status, wiring.flipped(self.status))
        wiring.connect(m, port.bus, wiring.flipped(self.memory))
        wiring.connect(m, ctrl.memory, port.control)
        wiring.connect(m, ctrl.route, router.route)
        wiring.connect(m, ctrl.sae_cmd, sae.cmd)
        wiring.connect(m, ctrl.dce_cmd, dce.cmd)
        # operands: straight from memory, or through the router (from the exchange)
        wiring.connect(m, port.read.csr, sae.csr)
        wiring.connect(m, port.read.smask, sae.mask)
        wiring.connect(m, port.read.b, dce.b)
        wiring.connect(m, port.read.dmask, dce.mask)
        wiring.connect(m, port.read.x, router.x_mem)
        wiring.connect(m, port.read.a, router.a_mem)
        wiring.connect(m, router.sae_x, sae.x)
        wiring.connect(m, router.dce_a, dce.a)
        # results: to memory and/or the exchange
        wiring.connect(m, sae.out, router.sae_out)
        wiring.connect(m, dce.out, router.dce_out)
        wiring.connect(m, router.sae_mem, port.write.sae)
        wiring.connect(m, router.dce_mem, port.write.dce)
        if not self.loopback:
            wiring.connect(m, router.xchg_o, wiring.flipped(self.xchg_o))
            wiring.connect(m, wiring.flipped(self.xchg_i), router.xchg_i)

        # progress and statistics for the controller's status records
        m.d.comb += [ctrl.load.row.eq(sae.x.valid & sae.x.ready),
                     # an SPMM's row leaves the router for its destinations, or (`keep`)
                     # goes into the SAE's partial sums
                     ctrl.sae.row.eq(router.sae_routed | sae.kept),
                     ctrl.dce.row.eq(router.dce_routed)]
        for report, engine in ((ctrl.sae, sae), (ctrl.dce, dce)):
            m.d.comb += [report.max_abs.eq(engine.max_abs),
                         report.saturated.eq(engine.saturated)]

        counters = self.counters
        m.d.comb += [counters.cycles.eq(ctrl.cycles), counters.issued.eq(ctrl.issued),
                     counters.completed.eq(ctrl.completed),
                     counters.load_cycles.eq(sae.load_cycles),
                     self.idle.eq(ctrl.idle), self.error.eq(router.error)]
        for mine, engine in ((counters.sae, sae), (counters.dce, dce)):
            m.d.comb += [mine.busy_cycles.eq(engine.busy_cycles),
                         mine.starved_cycles.eq(engine.starved_cycles),
                         mine.blocked_cycles.eq(engine.blocked_cycles)]
        return m
