"""Registers that exist for the clock: copies of control registers kept apart, and
FIFOs that put a register between two handshakes.

**Copies.** A control signal that steers thousands of flip-flops — the MAC array's
clear and drain, each accumulator's add, an output stage's shift amount — is one net
spread over the whole engine: on an FPGA its routing alone takes a clock cycle. So the
engines give each group of consumers (a MAC cell, a lane) its own registered copy,
and the net from the one register to its copies is the only long one. yosys merges
identical registers (``opt_merge``), which would give one net the fan-out of all of
them again; :func:`copy` marks each copy with :data:`KEEP_APART`, and the board flow
runs :data:`YOSYS_KEEP_APART` after reading the design, which sets yosys's ``keep``
on the flip-flops that drive marked signals. Simulation and ``make verilog`` see
ordinary registers.

**Input buffers.** An engine that decides in one cycle whether to take words from
several streams at once makes each stream's ``ready`` a function of all their
``valid``s; through the router, that reaches back into the memory readers, one
combinational path across the chip. :func:`input_buffer` puts a two-word skid buffer
in front, so the producer sees a ``ready`` that comes from a register.

**Output registers.** A FIFO held in block RAM hands its word straight from the RAM's
output, which on an ECP5 comes 5.8 ns after the clock (yosys does not use the block's
own output register; the board flow moves a reset-less register that directly
follows a RAM into it, :mod:`mixgcn.gen.netlist`, but amaranth's FIFOs pass the word
through logic first): whatever the word then crosses must fit in what is left of the
cycle. :class:`BlockRamFifo` is a FIFO whose RAM feeds such a register directly, so
its words leave from the block's own output register;
:func:`output_register` puts a register after any other stream. Where the
consumers are far from the RAM, the trip across the die does not fit beside the
RAM's 5.8 ns either: a second stage lets the placer put the register by the RAM. That
stage is an :func:`input_buffer`, not another output register: an output register passes
``ready`` straight through, and two in a row make the consumers' ``ready`` cross the
die back into the RAM's FIFO in one cycle.

**Collision-free memories.** A read port of amaranth's returns the old word when a
write to its address happens in the same cycle. An ECP5 block RAM does not promise
that between its two ports, so yosys builds it in logic beside the block: a comparator
and a multiplexer right after the RAM's slow output (on the `ecp5` chip, its slowest
path). Where the design never uses a word read in the cycle its address is written, a
memory from :func:`collision_free_memory` says so (:data:`COLLISION_FREE`), and the
board flow tells yosys that such a read may return anything
(:func:`relax_collisions`: ``COLLISION_X_MASK`` on its read ports). Simulation and
``make verilog`` keep amaranth's semantics, a refinement of "anything".

**One-hot state machines.** amaranth numbers a state machine's states in a binary
register, so every test of a state is a comparison of that register, and a state
machine that steers much (the host link's request executor, 24 states) spreads it
over many LUTs placed near what they steer: on the `ecp5` link top, paths from that
register across the die to the machine's own flags were the slowest of the build.
yosys would give each state a flip-flop of its own, but refuses a register with an
initial value (every amaranth register has one). A machine named by :func:`one_hot`
is marked for it by :data:`YOSYS_ONE_HOT`, which the board flow runs after reading the
design; the initial value then goes (yosys warns), which is safe on the boards, whose
reset is held from configuration until the clock's PLL locks
(:func:`mixgcn.hdl.board.ecp5_clock`). Simulation and ``make verilog`` see amaranth's
binary state register.
"""

from __future__ import annotations

import re

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["COLLISION_FREE", "KEEP_APART", "ONE_HOT", "YOSYS_KEEP_APART", "YOSYS_ONE_HOT",
           "BlockRamFifo", "RingBuffer", "SkidBuffer", "accept_buffer", "collision_free_memory",
           "copy", "input_buffer", "one_hot", "output_register", "relax_collisions"]

KEEP_APART = "mixgcn_keep_apart"

# the cells driving a marked signal through their Q port: the flip-flops
YOSYS_KEEP_APART = f"setattr -set keep 1 a:{KEEP_APART} %ci:+[Q]"


def copy(shape, *, name: str) -> Signal:
    """A signal of ``shape`` for a register, marked to be kept apart from its twins."""
    return Signal(shape, name=name, attrs={KEEP_APART: 1})


ONE_HOT = "_one_hot"

# amaranth names a state machine's register "<its name>_state"
YOSYS_ONE_HOT = f'setattr -set fsm_encoding "one-hot" w:*{ONE_HOT}_state'


def one_hot(name: str) -> str:
    """The name for a state machine (``m.FSM(name=...)``) the board flow builds one-hot."""
    return f"{name}{ONE_HOT}"


COLLISION_FREE = "mixgcn_collision_free"


def collision_free_memory(*, shape, depth: int) -> memory.Memory:
    """A memory (no initial contents) whose reads are never used in the cycle a write
    to their address happens; the caller says why in a comment."""
    return memory.Memory(shape=shape, depth=depth, init=[], attrs={COLLISION_FREE: 1})


_MEMORY = re.compile(r"^\s*memory .* (\S+)$")
_MEMID = re.compile(r'^\s*parameter \\MEMID "(.*)"$')
_MASK = re.compile(r"^(\s*parameter \\COLLISION_X_MASK )(\d+)'[01]+$")


def relax_collisions(rtlil: str) -> tuple[str, int]:
    """``rtlil`` (amaranth's RTLIL of a design) with the read ports of every memory
    marked :data:`COLLISION_FREE` free to return anything on a read/write collision
    (each bit of their ``COLLISION_X_MASK`` set); and how many read ports that is.
    Amaranth declares a module's memories, with their attributes, before its cells."""
    out, marked, relaxed = [], set(), 0
    pending = False  # the attributes being read mark the next object
    cell = None  # the lines of a $memrd_v2 cell being read
    for line in rtlil.splitlines():
        if cell is not None:
            cell.append(line)
            if line.strip() == "end":
                memid = next((mt.group(1) for x in cell if (mt := _MEMID.match(x))), None)
                if memid is not None and memid.replace("\\\\", "\\") in marked:
                    for i, x in enumerate(cell):
                        if mt := _MASK.match(x):
                            cell[i] = f"{mt.group(1)}{mt.group(2)}'{'1' * int(mt.group(2))}"
                            relaxed += 1
                out.extend(cell)
                cell = None
            continue
        if line.startswith("module "):
            marked = set()
        elif line.strip() == f"attribute \\{COLLISION_FREE} 1":
            pending = True
        elif (mt := _MEMORY.match(line)) and pending:
            marked.add(mt.group(1))
        elif line.strip().startswith("cell $memrd_v2 "):
            cell = [line]
            continue
        if not line.strip().startswith("attribute "):
            pending = False
        out.append(line)
    return "\n".join(out) + "\n", relaxed


class SkidBuffer(wiring.Component):
    """A two-word skid buffer: ``o`` offers the words ``i`` took, in order, one cycle
    later, at full rate, and ``i.ready`` is a flip-flop. The first word sits in the
    output register; a word that arrives while it is held waits in ``spare``, and
    ``i.ready`` falls until that one has moved on.

    The words' registers take their enables from copies of the two flags
    (``o_valid_copy``, ``spare_valid_copy``: flip-flops loaded with the flags' next
    values, so always equal to them from a cycle on; :func:`copy`). A wide buffer's
    registers sit by the logic that reads its words, its flags by the logic that
    decides ``o.ready``, and with one shared enable yosys made one LUT for both —
    placed by the words, so the consumer's ``ready`` crossed the die to it and its
    output crossed back to the flags in the same cycle (the `ecp5` link top's slowest
    path, docs/boards.md). The spare register takes the incoming word whenever it is
    free: it is read only once marked full, in the cycle it took the word it holds.
    """

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})
        self.spare = Signal(shape)
        # the flags and their copies, all four marked: yosys would otherwise merge an
        # unmarked flag into its marked twin
        self.o_valid_reg = copy(1, name="o_valid_reg")
        self.spare_valid = copy(1, name="spare_valid")
        self.o_valid_copy = copy(1, name="o_valid_copy")
        self.spare_valid_copy = copy(1, name="spare_valid_copy")

    def elaborate(self, platform):
        m = Module()
        i, o, spare = self.i, self.o, self.spare
        m.d.comb += [i.ready.eq(~self.spare_valid), o.valid.eq(self.o_valid_reg)]
        # the flags' next values: the output register takes a word, if any, when it is
        # empty or its word leaves; otherwise an arriving word waits in the spare
        take = ~self.o_valid_reg | o.ready
        o_valid_next = ~take | self.spare_valid | i.valid
        spare_valid_next = ~take & (self.spare_valid | i.valid)
        m.d.sync += [self.o_valid_reg.eq(o_valid_next), self.o_valid_copy.eq(o_valid_next),
                     self.spare_valid.eq(spare_valid_next),
                     self.spare_valid_copy.eq(spare_valid_next)]
        # the words, steered by the copies
        with m.If(~self.o_valid_copy | o.ready):
            m.d.sync += o.payload.eq(Mux(self.spare_valid_copy, spare, i.payload))
        with m.If(~self.spare_valid_copy):
            m.d.sync += spare.eq(i.payload)
        return m


class RingBuffer(wiring.Component):
    """A buffer of up to two words whose words never move: ``o`` offers the words ``i``
    took, in order, one cycle later, at full rate; ``i.ready`` and ``o.valid`` are
    flip-flops (the flags are a :class:`SkidBuffer`'s: ``o.valid``, and ``two``, two
    words held, whose inverse is ``i.ready``).

    The words live in three slots, written in turn at ``produce`` and read in turn at
    ``consume`` (one-hot rings). As at most two words are held, the slot at
    ``produce`` is always free: it takes the incoming word every cycle, valid or not,
    and ``produce`` moves on once one was taken (``i.valid`` and ``i.ready``, both
    flip-flops). So no word register is enabled by the consumer's ``ready``; it moves
    ``consume`` and the flags, five flip-flops, and ``o.payload`` is ``consume``'s
    choice of the slots, a LUT or two per bit in front of the consumer's own register.
    A skid buffer's output register takes its enable from ``o.ready``: where the
    consumer decides ``ready`` from several streams at once, that decision went to the
    clock enables of every bit of the word, placed by the words, across the die (the
    dense engine's A operand on the `ecp5` link top, docs/boards.md)."""

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})
        self.slots = [Signal(shape, name=f"slot{k}") for k in range(3)]
        self.produce = Signal(3, init=1)
        self.consume = Signal(3, init=1)
        self.two = Signal()

    def elaborate(self, platform):
        m = Module()
        i, o, two = self.i, self.o, self.two
        o_valid = Signal()
        m.d.comb += [i.ready.eq(~two), o.valid.eq(o_valid)]
        taken, left = i.valid & ~two, o_valid & o.ready
        # one word more, one fewer, or as many: ``two`` only when a word stays and
        # another one comes to it (or two were held and none leaves)
        m.d.sync += [o_valid.eq(two | i.valid | (o_valid & ~o.ready)),
                     two.eq(o_valid & ~o.ready & (two | i.valid))]
        with m.If(taken):
            m.d.sync += self.produce.eq(self.produce.rotate_left(1))
        with m.If(left):
            m.d.sync += self.consume.eq(self.consume.rotate_left(1))
        for k, slot in enumerate(self.slots):
            with m.If(self.produce[k]):
                m.d.sync += slot.eq(i.payload)
        m.d.comb += o.payload.eq(Mux(self.consume[0], self.slots[0],
                                     Mux(self.consume[1], self.slots[1], self.slots[2])))
        return m


def accept_buffer(m, name: str, port):
    """``port`` (a stream driven inside ``m``) through a :class:`RingBuffer` (submodule
    ``{name}_buffer``): the stream it becomes, for a consumer whose ``ready`` is a
    decision over several streams."""
    return _buffered(m, name, port, RingBuffer)


def input_buffer(m, name: str, port):
    """``port`` (an input stream of the module being elaborated in ``m``, or a stream
    driven inside it) through a :class:`SkidBuffer` (submodule ``{name}_buffer``): the
    stream it becomes, whose producer sees a ``ready`` that is a flip-flop. Flip-flops
    rather than a small FIFO in LUT RAM: they place freely beside the logic that reads
    them (docs/boards.md, step 25)."""
    return _buffered(m, name, port, SkidBuffer)


def _buffered(m, name: str, port, buffer):
    m.submodules[f"{name}_buffer"] = buf = buffer(port.payload.shape())
    m.d.comb += [buf.i.valid.eq(port.valid), buf.i.payload.eq(port.payload),
                 port.ready.eq(buf.i.ready)]
    return buf.o


def output_register(m, name: str, source):
    """``source`` (a stream driven inside ``m``) through a register: the stream it
    becomes, one cycle later, at full rate (``ready`` passes straight through: the
    register takes a word when it is empty or its word leaves)."""
    shape = source.payload.shape()
    out = stream.Signature(shape).create(path=(f"{name}_registered",))
    m.d.comb += source.ready.eq(~out.valid | out.ready)
    with m.If(source.valid & source.ready):
        m.d.sync += [out.valid.eq(1), out.payload.eq(source.payload)]
    with m.Elif(out.ready):
        m.d.sync += out.valid.eq(0)
    return out


class BlockRamFifo(wiring.Component):
    """A FIFO of ``depth`` words in a block RAM and two more in registers after it, at
    full rate: ``r_stream`` offers a word two cycles after ``w_stream`` took it into an
    empty FIFO. ``level``: the words held.

    The RAM's read register holds the oldest word not yet offered (``head``); the output
    register after it has no reset and takes only ``head``, so the board flow folds it
    into the block RAM (``REGMODE=OUTREG``) and the word leaves the RAM from a register
    rather than from its slow output. The RAM is collision-free: it is read only while
    it holds a word and written only while it has room, so a read and a write meet at
    one address only when it is empty or full, when one of them cannot happen."""

    def __init__(self, shape, depth: int):
        # depth ≥ 1: ChipConfig refuses a pipeline_depth below 1
        super().__init__({"w_stream": In(stream.Signature(shape)),
                          "r_stream": Out(stream.Signature(shape)),
                          "level": Out(range(depth + 3))})
        self.depth = depth
        self.storage = collision_free_memory(shape=shape, depth=depth)
        self.write_port = self.storage.write_port()
        self.read_port = self.storage.read_port(domain="sync")  # its data: the head
        self.produce = Signal(range(depth))  # where the next word is written
        self.consume = Signal(range(depth))  # where the next word is read
        self.stored = Signal(range(depth + 1))  # words in the RAM
        # `stored != depth` as a register: the producer's `ready` (the router's fork
        # decides on it, and its decision reaches across the die; docs/boards.md,
        # step 30)
        self.has_room = Signal(init=1)
        self.head_valid = Signal()  # the RAM's read register holds a word
        self.word = Signal(shape, reset_less=True)  # the output register

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = self.storage
        write_port, read_port = self.write_port, self.read_port
        w, r, depth = self.w_stream, self.r_stream, self.depth

        def next_address(addr):
            return Mux(addr == depth - 1, 0, addr + 1)

        write = w.valid & w.ready
        advance = self.head_valid & (~r.valid | r.ready)  # head → output register
        read = (self.stored != 0) & (~self.head_valid | advance)
        m.d.comb += [w.ready.eq(self.has_room),
                     write_port.addr.eq(self.produce), write_port.data.eq(w.payload),
                     write_port.en.eq(write),
                     read_port.addr.eq(self.consume), read_port.en.eq(read),
                     r.payload.eq(self.word),
                     self.level.eq(self.stored + self.head_valid + r.valid)]
        with m.If(write):
            m.d.sync += self.produce.eq(next_address(self.produce))
        with m.If(read):
            m.d.sync += self.consume.eq(next_address(self.consume))
        stored = self.stored + write - read
        m.d.sync += [self.stored.eq(stored), self.has_room.eq(stored != depth)]
        with m.If(read):
            m.d.sync += self.head_valid.eq(1)
        with m.Elif(advance):
            m.d.sync += self.head_valid.eq(0)
        with m.If(advance):
            m.d.sync += [self.word.eq(read_port.data), r.valid.eq(1)]
        with m.Elif(r.ready):
            m.d.sync += r.valid.eq(0)
        return m
