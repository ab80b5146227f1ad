"""Stream drivers for cocotb testbenches: sources that idle at random and a sink that
applies random backpressure, both packing payloads with the hardware's own layouts."""

from __future__ import annotations

from collections import deque

from cocotb.triggers import RisingEdge

from mixgcn.sim.build import CLOCK_PERIOD_NS

__all__ = ["Sink", "Source", "high"]


def high(signal) -> bool:
    """A one-bit signal is 1. X counts as 0 (before reset nothing is driven yet)."""
    v = signal.value
    return v.is_resolvable and int(v) == 1


class Source:
    """Drives stream ``name`` of ``dut`` from a queue of words, idling with probability
    ``tb.idle`` each cycle (``tb.rng`` draws). ``layout`` packs a word (None: int)."""

    def __init__(self, tb, name, layout):
        self.tb, self.layout = tb, layout
        self.valid = getattr(tb.dut, f"{name}__valid")
        self.ready = getattr(tb.dut, f"{name}__ready")
        self.payload = getattr(tb.dut, f"{name}__payload")
        self.queue = deque()
        self.valid.value = 0

    def put(self, words):
        for w in words:
            self.queue.append(self.layout.const(w).as_bits() if self.layout else int(w))

    def clear(self):
        self.queue.clear()
        self.valid.value = 0

    async def run(self):
        dut = self.tb.dut
        while True:
            await RisingEdge(dut.clk)
            # nothing transfers in reset; clear() may empty the queue at this very edge
            if self.queue and high(self.valid) and high(self.ready) and not high(dut.rst):
                self.queue.popleft()
            if self.queue and self.tb.rng.random() >= self.tb.idle:
                self.payload.value = self.queue[0]
                self.valid.value = 1
            else:
                self.valid.value = 0


class Sink:
    """Collects stream ``name``'s words (unpacked by ``decode``), ready with probability
    ``tb.ready_p`` each cycle."""

    def __init__(self, tb, name, decode):
        self.tb, self.decode = tb, decode
        self.valid = getattr(tb.dut, f"{name}__valid")
        self.ready = getattr(tb.dut, f"{name}__ready")
        self.payload = getattr(tb.dut, f"{name}__payload")
        self.received = []
        self.ready.value = 0

    async def run(self):
        dut = self.tb.dut
        while True:
            await RisingEdge(dut.clk)
            if high(self.valid) and high(self.ready) and not high(dut.rst):
                self.received.append(self.decode(int(self.payload.value)))
            self.ready.value = int(self.tb.rng.random() < self.tb.ready_p)


class EngineTB:
    """An engine under test: clock, one :class:`Source` per input stream (``layouts``:
    name -> layout, None for plain ints), a :class:`Sink` on ``out`` decoding rows of
    ``lanes`` values plus ``last``, and a reset that also empties the sources.

    ``idle``: probability an input idles in a cycle; ``ready``: probability the output is
    ready in a cycle."""

    def __init__(self, dut, layouts: dict, out_layout, lanes: int, idle=0.0, ready=1.0,
                 seed=1):
        import cocotb
        import numpy as np
        from cocotb.clock import Clock

        self.dut, self.idle, self.ready_p = dut, idle, ready
        self.rng = np.random.default_rng(seed)
        self.sources = {name: Source(self, name, layout) for name, layout in layouts.items()}

        def decode(bits):
            row = out_layout.from_bits(bits)
            return [int(row.data[j]) for j in range(lanes)] + [int(row.last)]

        self.out = Sink(self, "out", decode)
        self.received = self.out.received
        dut.rst.value = 1  # held until reset(): no X reaches the testbench's reads
        Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
        for s in (*self.sources.values(), self.out):
            cocotb.start_soon(s.run())

    async def reset(self):
        from cocotb.triggers import ClockCycles

        self.dut.rst.value = 1
        for s in self.sources.values():
            s.clear()
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)
        self.received.clear()
