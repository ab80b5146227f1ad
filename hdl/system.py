"""P chips joined by an exchange fabric (docs/fabric.md).

::

    chip 0 ─ xchg_o ─▶ ┌──────────────────────┐ ─▶ xchg_i ─ chip 0
    chip 1 ─ xchg_o ─▶ │  ExchangeFabric       │ ─▶ xchg_i ─ chip 1
      ⋮                 │  P × P links, route   │       ⋮
    chip P-1 ─────────▶ └──────────────────────┘ ─▶ ──────── chip P-1

Each chip keeps its own descriptor queue, status records, counters and memory port
(``chips[p]``): the host drives every chip as it drives one, and sets the fabric's
``route`` before a batch whose rows cross between chips.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from mixgcn.gen.config import SystemConfig
from mixgcn.hdl.chip import Chip, ChipCounters
from mixgcn.hdl.fabric import ExchangeFabric, route_layout
from mixgcn.hdl.memport import MemoryBus
from mixgcn.hdl.router import RouterError

__all__ = ["ChipPorts", "System"]


class ChipPorts(wiring.Signature):
    """One chip's ports in a system: those of a :class:`~mixgcn.hdl.chip.Chip` but the
    exchange port (the fabric's)."""

    def __init__(self, chip: Chip):
        lay, c = chip.layouts, chip.config
        super().__init__({
            "desc": In(stream.Signature(lay.desc_layout)),
            "status": Out(stream.Signature(lay.status_layout)),
            "memory": Out(MemoryBus(c.addr_width, lay.mem_width)),
            "counters": Out(ChipCounters(c.sae.counter_width)),
            "error": Out(RouterError), "idle": Out(1),
        })


class System(wiring.Component):
    """``config.chips`` chips and their fabric (module docstring). ``stall`` and
    ``flits`` are the fabric's (:class:`~mixgcn.hdl.fabric.ExchangeFabric`)."""

    def __init__(self, config: SystemConfig):
        if not isinstance(config, SystemConfig):
            raise TypeError(f"expected a SystemConfig, got {config!r}")
        self.config = config
        P = config.chips
        self.chip_list = [Chip(config.chip, loopback=False) for _ in range(P)]
        self.fabric = ExchangeFabric(config)
        super().__init__({
            "chips": Out(ChipPorts(self.chip_list[0])).array(P),
            "route": In(route_layout(P, config.chip.lanes)),
            "stall": In(P * P),
            "flits": Out(self.fabric.flits.shape()),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fabric = fabric = self.fabric
        m.d.comb += [fabric.route.eq(self.route), fabric.stall.eq(self.stall),
                     self.flits.eq(fabric.flits)]
        for p, chip in enumerate(self.chip_list):
            m.submodules[f"chip{p}"] = chip
            ports = self.chips[p]
            wiring.connect(m, wiring.flipped(ports.desc), chip.desc)
            wiring.connect(m, chip.status, wiring.flipped(ports.status))
            wiring.connect(m, chip.memory, wiring.flipped(ports.memory))
            wiring.connect(m, chip.xchg_o, fabric.src[p])
            wiring.connect(m, fabric.dst[p], chip.xchg_i)
            wiring.connect(m, chip.counters, wiring.flipped(ports.counters))
            m.d.comb += [ports.error.eq(chip.error), ports.idle.eq(chip.idle)]
        return m
