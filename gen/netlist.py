"""Passes over yosys's synthesised netlist (its JSON), run by the board flow between
synthesis and place and route.

**Block RAM output registers.** An ECP5 block RAM (DP16KD) has an output register of
its own (``REGMODE=OUTREG``) after the read latch. yosys's memory mapping never uses
it: a read's word leaves the block 5.83 ns after the clock (nextpnr's figure), and a
register the design puts right after the RAM sits in the fabric, where the placer
must put it near the RAM or lose that register's cycle to routing. Where every word
a RAM reads goes to exactly such a register and nowhere else — the register has no
reset, no set, and the RAM's clock — :func:`fold_ram_output_registers` moves the
register into the block: ``REGMODE_A``/``REGMODE_B`` become ``OUTREG``, the register's
clock enable drives ``OCEA``/``OCEB``, the RAM's outputs take the register's output
nets and the flip-flops are removed. The word appears in the same cycle as before
(the output register is the cycle the fabric register was), so the design is cycle
for cycle the same; nextpnr then times the RAM's outputs from its output register.
The RTL (simulation, ``make verilog``) keeps its register; the engines leave the
reset off the registers after their RAMs so that this applies
(:mod:`mixgcn.hdl.dce`, :mod:`mixgcn.hdl.sae`).

A DP16KD whose read words reach anything else (logic, two sinks, a register with a
reset or another clock), or whose resets are used, is left as it is.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

__all__ = ["fold_ram_output_registers", "fold_ram_output_registers_in"]

_OUTPUTS = tuple(f"DO{port}{i}" for port in "AB" for i in range(18))


def _param(cell: dict, name: str, default: str = "") -> str:
    return str(cell["parameters"].get(name, default)).strip()


def _plain_register(ff: dict, clock) -> bool:
    """A TRELLIS_FF that only samples DI on ``clock``'s rising edge (an optional
    clock enable): no reset or set reaches it, and it starts at 0 like the RAM's
    output register."""
    lsr = ff["connections"].get("LSR", ["0"])
    return (ff["connections"].get("CLK") == clock and _param(ff, "CLKMUX", "CLK") == "CLK"
            and lsr == ["0"] and _param(ff, "LSRMUX", "LSR") == "LSR"
            and _param(ff, "REGSET", "RESET") == "RESET"
            and _param(ff, "CEMUX", "CE") in ("1", "CE"))


def _enable(ff: dict) -> list:
    """The register's clock enable as a net (or the constant 1)."""
    if _param(ff, "CEMUX", "CE") == "1":
        return ["1"]
    return ff["connections"].get("CE", ["1"])


def fold_ram_output_registers(netlist: dict, top: str = "top") -> int:
    """Fold the register after each qualifying DP16KD of module ``top`` into the
    block (module docstring), in place; returns how many DP16KDs were changed."""
    module = netlist["modules"][top]
    cells = module["cells"]
    sinks = defaultdict(list)  # net bit -> [(cell, port)] reading it
    for name, cell in cells.items():
        directions = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if directions.get(port) != "output":
                for bit in bits:
                    if isinstance(bit, int):
                        sinks[bit].append((name, port))
    for port in module["ports"].values():  # a top-level output reads its bits too
        if port["direction"] != "input":
            for bit in port["bits"]:
                if isinstance(bit, int):
                    sinks[bit].append((None, None))

    folded = 0
    for cell in [c for c in cells.values() if c["type"] == "DP16KD"]:  # cells shrinks
        if {_param(cell, "REGMODE_A", "NOREG"), _param(cell, "REGMODE_B", "NOREG")} != {"NOREG"}:
            continue
        conn = cell["connections"]
        clock = conn.get("CLKB")
        if (conn.get("RSTA", ["0"]) != ["0"] or conn.get("RSTB", ["0"]) != ["0"]
                or _param(cell, "CLKBMUX", "CLKB") != "CLKB"):
            continue
        used = [p for p in _OUTPUTS if p in conn and isinstance(conn[p][0], int)
                and sinks[conn[p][0]]]
        # both halves' output registers on one clock (a 36-bit word uses DOA and DOB)
        if not used or (any(p.startswith("DOA") for p in used)
                        and (conn.get("CLKA") != clock
                             or _param(cell, "CLKAMUX", "CLKA") != "CLKA")):
            continue
        registers = {}
        for p in used:
            readers = sinks[conn[p][0]]
            if len(readers) != 1 or readers[0][1] != "DI":
                break
            ff = cells[readers[0][0]]
            if ff["type"] != "TRELLIS_FF" or not _plain_register(ff, clock):
                break
            registers[p] = readers[0][0]
        else:
            enables = {tuple(_enable(cells[r])) for r in registers.values()}
            if len(enables) != 1:
                continue
            enable = enables.pop()
            for p, reg in registers.items():
                conn[p] = list(cells[reg]["connections"]["Q"])
                del cells[reg]
            cell["parameters"]["REGMODE_A"] = cell["parameters"]["REGMODE_B"] = "OUTREG"
            conn["OCEA"] = conn["OCEB"] = list(enable)
            folded += 1
    if folded:
        _drop_dangling(module)
    return folded


def _drop_dangling(module: dict) -> None:
    """Netnames whose bits no cell or port touches any more (the RAM outputs' old
    nets) are removed, so nextpnr sees no driverless nets."""
    alive = set()
    for cell in module["cells"].values():
        for bits in cell["connections"].values():
            alive.update(b for b in bits if isinstance(b, int))
    for port in module["ports"].values():
        alive.update(b for b in port["bits"] if isinstance(b, int))
    for name in [n for n, net in module["netnames"].items()
                 if not any(isinstance(b, int) and b in alive for b in net["bits"])]:
        del module["netnames"][name]


def fold_ram_output_registers_in(path: Path, top: str = "top") -> int:
    """:func:`fold_ram_output_registers` on the JSON netlist at ``path``, rewritten."""
    netlist = json.loads(Path(path).read_text())
    folded = fold_ram_output_registers(netlist, top)
    if folded:
        Path(path).write_text(json.dumps(netlist))
    return folded
