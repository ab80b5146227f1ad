"""The resource estimate (gen/resources.py) lists the chip's memories as hdl/ builds
them: checked against the memories and read ports in the chip's RTLIL."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.gen.resources import (
    ECP5_PARTS,
    LUT_RAM_DEPTH,
    Memory,
    block_rams,
    chip_block_rams,
    memories,
    multipliers,
)


def _rtlil_memories(config) -> Counter:
    """(width, depth, read ports) of every memory in the chip's RTLIL deeper than the
    LUT RAM threshold."""
    from amaranth.back import rtlil

    from mixgcn.gen.verilog import signal_ports
    from mixgcn.hdl.chip import Chip

    chip = Chip(config)
    text = rtlil.convert(chip, ports=signal_ports(chip))
    shapes, reads = {}, Counter()
    module, in_read = None, False
    for line in text.splitlines():
        if m := re.match(r"^module (\S+)", line):
            module = m.group(1)
        elif m := re.match(r"^\s*memory width (\d+) size (\d+) (\S+)$", line):
            shapes[module, m.group(3)] = (int(m.group(1)), int(m.group(2)))
        elif re.match(r"^\s*cell \$memrd_v2 ", line):
            in_read = True
        elif in_read and (m := re.match(r'^\s*parameter \\MEMID "(.*)"$', line)):
            reads[module, m.group(1).replace("\\\\", "\\")] += 1
            in_read = False
    return Counter((w, d, reads[key]) for key, (w, d) in shapes.items() if d > LUT_RAM_DEPTH)


@pytest.mark.parametrize("preset", ["tiny", "ecp5"])
def test_the_memories_are_those_in_the_rtlil(preset):
    config = CHIP_PRESETS[preset]
    listed = Counter()
    for m in memories(config):
        listed[m.width, m.depth, m.reads] += m.count
    assert listed == _rtlil_memories(config)


def test_block_rams_and_multipliers():
    # the ecp5 chip: what yosys and nextpnr reported on the ULX3S (docs/boards.md)
    assert chip_block_rams(CHIP_PRESETS["ecp5"]) == 186
    assert multipliers(CHIP_PRESETS["ecp5"]) == 80
    # a 1024-deep 16-bit memory with two read ports: a block a copy
    assert block_rams(Memory("m", 16, 1024, reads=2)) == 2
    # 384 bits x 1024: 22 blocks of 1024 x 18
    assert block_rams(Memory("m", 384, 1024)) == 22
    assert ECP5_PARTS["ecp5-85f"].bram == 208 and ECP5_PARTS["ecp5-85f"].dsp == 156
