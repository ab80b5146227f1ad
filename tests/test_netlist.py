"""The board flow's netlist pass (gen/netlist.py): a register straight after an ECP5
block RAM becomes the RAM's own output register, and only such a register; checked on
yosys's own netlist of a small design (the fpga extra)."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from mixgcn.gen import board as board_flow
from mixgcn.gen.board import BoardError
from mixgcn.gen.netlist import fold_ram_output_registers

# four 512 x 36 memories (one DP16KD each; no_rw_check: no collision logic after the
# RAM, as the flow's collision-free memories): read into a plain register (folds), a
# register with an enable (folds, the enable on OCE), a register with a reset (stays),
# and a plain register whose RAM output also feeds logic (stays)
DESIGN = """
module top(input clk, input rst, input en, input we, input [8:0] wa, input [8:0] ra,
           input [35:0] wd, output [35:0] o_plain, output [35:0] o_en,
           output [35:0] o_rst, output [35:0] o_fan, output [35:0] o_fan_logic);
  (* no_rw_check *) reg [35:0] m_plain [0:511];
  (* no_rw_check *) reg [35:0] m_en [0:511];
  (* no_rw_check *) reg [35:0] m_rst [0:511];
  (* no_rw_check *) reg [35:0] m_fan [0:511];
  reg [35:0] r_plain, r_en, r_rst, r_fan, q_plain, q_en, q_rst, q_fan;
  always @(posedge clk) begin
    if (we) begin
      m_plain[wa] <= wd; m_en[wa] <= wd; m_rst[wa] <= wd; m_fan[wa] <= wd;
    end
    r_plain <= m_plain[ra]; r_en <= m_en[ra]; r_rst <= m_rst[ra]; r_fan <= m_fan[ra];
    q_plain <= r_plain;
    if (en) q_en <= r_en;
    if (rst) q_rst <= 0; else q_rst <= r_rst;
    q_fan <= r_fan;
  end
  assign o_plain = q_plain, o_en = q_en, o_rst = q_rst, o_fan = q_fan;
  assign o_fan_logic = r_fan ^ {36{en}};
endmodule
"""


@pytest.fixture(scope="module")
def netlist(tmp_path_factory):
    try:
        yosys = board_flow._tool("yosys")
    except BoardError as e:
        pytest.skip(str(e))
    d = tmp_path_factory.mktemp("netlist")
    (d / "top.v").write_text(DESIGN)
    subprocess.run([yosys, "-q", "-p", "read_verilog top.v; synth_ecp5 -top top -json top.json"],
                   cwd=d, check=True, capture_output=True, timeout=300)
    return json.loads((d / "top.json").read_text())


def _rams(module):
    """Each DP16KD by the output port its read words end up on."""
    ports = {bit: name for name, p in module["ports"].items() for bit in p["bits"]
             if isinstance(bit, int)}
    found = {}
    for name, cell in module["cells"].items():
        if cell["type"] == "DP16KD":
            # follow DOB0 through its register to a top-level output
            bit = cell["connections"]["DOB0"][0]
            ff = [c for c in module["cells"].values()
                  if c["type"] == "TRELLIS_FF" and c["connections"]["DI"] == [bit]]
            found[ports[ff[0]["connections"]["Q"][0]]] = name
    return found


def test_a_register_straight_after_a_ram_folds_into_it(netlist):
    before = netlist["modules"]["top"]
    after_netlist = copy.deepcopy(netlist)
    assert fold_ram_output_registers(after_netlist) == 2
    after = after_netlist["modules"]["top"]
    rams = _rams(before)
    assert set(rams) == {"o_plain", "o_en", "o_rst", "o_fan"}

    cells_b, cells_a = before["cells"], after["cells"]
    removed = set(cells_b) - set(cells_a)
    assert not set(cells_a) - set(cells_b)  # nothing added
    ffs = [n for n in removed if cells_b[n]["type"] == "TRELLIS_FF"]
    assert len(ffs) == len(removed) == 2 * 36  # one register of 36 bits per folded RAM

    for out, ram in rams.items():
        b, a = cells_b[ram], cells_a[ram]
        folded = out in ("o_plain", "o_en")
        assert a["parameters"]["REGMODE_A"] == a["parameters"]["REGMODE_B"] == (
            "OUTREG" if folded else "NOREG"), out
        if not folded:
            assert a == b, out  # untouched
            continue
        # each read word's bit now drives exactly what its register's output drove,
        # and the RAM's output register has the register's enable
        for port, bits in b["connections"].items():
            if port.startswith("DO") and isinstance(bits[0], int):
                ff = next(n for n in ffs if cells_b[n]["connections"]["DI"] == bits)
                assert a["connections"][port] == cells_b[ff]["connections"]["Q"], port
            elif port not in ("OCEA", "OCEB"):
                assert a["connections"][port] == bits, port
        enable = ["1"] if out == "o_plain" else before["ports"]["en"]["bits"]
        assert a["connections"]["OCEA"] == a["connections"]["OCEB"] == enable, out
        assert {k: v for k, v in a["parameters"].items() if not k.startswith("REGMODE")} \
            == {k: v for k, v in b["parameters"].items() if not k.startswith("REGMODE")}

    # every other cell is as it was; no netname is left naming only dead nets
    for name in cells_a:
        if cells_a[name]["type"] != "DP16KD":
            assert cells_a[name] == cells_b[name], name
    alive = {b for c in cells_a.values() for bits in c["connections"].values() for b in bits
             if isinstance(b, int)} | {b for p in after["ports"].values() for b in p["bits"]}
    assert all(any(b in alive for b in net["bits"] if isinstance(b, int))
               or not any(isinstance(b, int) for b in net["bits"])
               for net in after["netnames"].values())


def test_folding_twice_changes_nothing_more(netlist):
    once = copy.deepcopy(netlist)
    fold_ram_output_registers(once)
    twice = copy.deepcopy(once)
    assert fold_ram_output_registers(twice) == 0
    assert twice == once
