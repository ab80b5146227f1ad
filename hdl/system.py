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
from mixgcn.hdl.fabric import ExchangeFabric, FabricEnd, route_layout
from mixgcn.hdl.memport import MemoryBus
from mixgcn.hdl.router import RouterError

__all__ = ["ChipPorts", "System", "SystemNode"]


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


def connect_chip(m: Module, chip: Chip, ports) -> None:
    """A chip's host ports (those of :class:`ChipPorts`) to ``ports``, a component's."""
    wiring.connect(m, wiring.flipped(ports.desc), chip.desc)
    wiring.connect(m, chip.status, wiring.flipped(ports.status))
    wiring.connect(m, chip.memory, wiring.flipped(ports.memory))
    wiring.connect(m, chip.counters, wiring.flipped(ports.counters))
    m.d.comb += [ports.error.eq(chip.error), ports.idle.eq(chip.idle)]


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
            connect_chip(m, chip, self.chips[p])
            wiring.connect(m, chip.xchg_o, fabric.src[p])
            wiring.connect(m, fabric.dst[p], chip.xchg_i)
        return m


class SystemNode(wiring.Component):
    """Chip ``chip`` of a system with its :class:`~mixgcn.hdl.fabric.FabricEnd`: what a
    board holds when each chip of the system has its own (docs/boards.md). The ports of
    :class:`ChipPorts` and the fabric's ``route`` are the host's; ``flits[q]`` counts the
    flits of its link to chip q; ``to_q`` / ``from_q`` are its links' wires to and from
    the other boards."""

    def __init__(self, config: SystemConfig, chip: int):
        if not isinstance(config, SystemConfig):
            raise TypeError(f"expected a SystemConfig, got {config!r}")
        self.config, self.position = config, chip
        self.chip = Chip(config.chip, loopback=False)
        self.end = FabricEnd(config, chip)
        self.peers = self.end.peers
        members = dict(ChipPorts(self.chip).members)
        members["route"] = In(route_layout(config.chips, config.chip.lanes))
        members["flits"] = Out(self.end.flits.shape())
        for q in self.peers:
            members[f"to_{q}"] = self.end.signature.members[f"to_{q}"]
            members[f"from_{q}"] = self.end.signature.members[f"from_{q}"]
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.chip = chip = self.chip
        m.submodules.fabric_end = end = self.end
        connect_chip(m, chip, self)
        wiring.connect(m, chip.xchg_o, end.src)
        wiring.connect(m, end.dst, chip.xchg_i)
        m.d.comb += [end.route.eq(self.route), self.flits.eq(end.flits)]
        for q in self.peers:
            wiring.connect(m, getattr(end, f"to_{q}"), wiring.flipped(getattr(self, f"to_{q}")))
            wiring.connect(m, wiring.flipped(getattr(self, f"from_{q}")),
                           getattr(end, f"from_{q}"))
        return m
