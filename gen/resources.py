"""What a chip configuration needs of an ECP5's hard resources, before synthesis.

Design-space exploration (:mod:`mixgcn.host.explore`) must screen hundreds of
configurations; synthesis takes minutes each. Two of the three resources that bound a
chip on an ECP5 follow from the configuration alone:

- **Multipliers** (MULT18X18D): one per 16-bit product — the sparse engine's
  ``lanes × edges`` and the dense engine's ``rows × cols`` (the `ecp5` chip: 16 + 64 =
  80, as yosys maps it);
- **Block RAM** (DP16KD, 18 Kbit: 16384 × 1 … 512 × 36): the chip's memories, each
  packed the way yosys packs it — in the block shape that takes fewest blocks, one copy
  per read port (a block has one write and one read port here) — except the shallow
  ones (at most :data:`LUT_RAM_DEPTH` words), which go to LUT RAM. :func:`memories`
  lists them as hdl/ builds them; a test checks the list against the memories in the
  chip's RTLIL. The `ecp5` chip: 128 (feature buffer) + 22 (partial sums) + 32 (weight
  store) + 4 (the pipeline FIFO) = 186 DP16KD, what yosys and nextpnr reported.

LUTs depend on what synthesis makes of the logic: they are not estimated here; the
board flow (``mixgcn board``) reports them from the tools.
"""

from __future__ import annotations

from dataclasses import dataclass

from mixgcn.gen.config import ChipConfig

__all__ = ["ECP5_PARTS", "LUT_RAM_DEPTH", "Memory", "Part", "block_rams", "chip_block_rams",
           "memories", "multipliers"]

# a memory this shallow is cheaper in LUT RAM (DPR16X4) than in a block
LUT_RAM_DEPTH = 16
# DP16KD's shapes (width, depth) in a simple dual-port use
_SHAPES = ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512))


@dataclass(frozen=True)
class Part:
    """An FPGA's hard resources (Lattice's ECP5 family data sheet)."""

    name: str
    lut4: int
    dsp: int  # MULT18X18D
    bram: int  # DP16KD


ECP5_PARTS = {p.name: p for p in (
    Part("ecp5-85f", lut4=83_640, dsp=156, bram=208),
    Part("ecp5-45f", lut4=43_848, dsp=72, bram=108),
    Part("ecp5-25f", lut4=24_288, dsp=28, bram=56),
)}


@dataclass(frozen=True)
class Memory:
    """One of the chip's memories: ``count`` alike, ``depth`` words of ``width`` bits,
    ``reads`` read ports."""

    name: str
    width: int
    depth: int
    reads: int = 1
    count: int = 1


def memories(c: ChipConfig) -> list[Memory]:
    """The chip's memories deeper than :data:`LUT_RAM_DEPTH`, as hdl/ builds them."""
    s, d = c.sae, c.dce
    mems = [
        # the SAE's feature buffer: two banks of a memory a lane, a read port an edge
        # pipeline (hdl/sae.py)
        Memory("feature buffer", s.width, s.max_nodes, reads=s.edges, count=2 * s.lanes),
        # the DCE's weight store: a memory a row of the array, C weights a word
        Memory("weight store", d.cols * d.width, d.weight_depth, count=d.rows),
        # the pipeline FIFO between the engines (hdl/timing.py's BlockRamFifo)
        Memory("pipeline FIFO", s.lanes * s.width + 1, c.pipeline_depth),
        # the descriptor queue
        Memory("descriptor queue", _desc_bits(c), c.desc_depth - 1),
        # each engine's output FIFO (depth + 1 entries, one kept outside the RAM)
        Memory("SAE output FIFO", s.lanes * s.width + 1, s.out_fifo_depth),
        Memory("DCE output FIFO", d.cols * d.width + 1, d.out_fifo_depth),
    ]
    if s.partial_rows:  # kept row sums at accumulator width, every lane in one word
        mems.append(Memory("partial sums", s.lanes * s.acc_width, s.partial_rows))
    return [m for m in mems if m.depth > LUT_RAM_DEPTH]


def _desc_bits(c: ChipConfig) -> int:
    from mixgcn.hdl.chip import ChipLayouts

    return ChipLayouts(c).desc_layout.size


def block_rams(m: Memory) -> int:
    """DP16KD blocks for ``m``: its cheapest shape, a copy per read port."""
    per_copy = min(-(-m.width // w) * -(-m.depth // d) for w, d in _SHAPES)
    return per_copy * m.reads * m.count


def chip_block_rams(c: ChipConfig) -> int:
    """DP16KD blocks the chip takes."""
    return sum(block_rams(m) for m in memories(c))


def multipliers(c: ChipConfig) -> int:
    """MULT18X18D the chip takes: one per product."""
    return c.sae.lanes * c.sae.edges + c.dce.rows * c.dce.cols
