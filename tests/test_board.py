"""Board builds with the open toolchain (docs/boards.md): one real build of the quickest
board and preset (the flow end to end: amaranth-boards, YoWASP yosys, nextpnr, the
packer, the report read from the tools), a real design too large for its part, and the
refusals that come before any tool runs."""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from amaranth import Cat, Module, Signal, Value
from amaranth.back import rtlil
from amaranth.hdl import Fragment
from amaranth.lib import io, memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from mixgcn.gen import board as board_flow
from mixgcn.gen.board import BOARDS, LINK_FIELDS, BoardError, board_plan, build_board, cabling
from mixgcn.gen.config import CHIP_PRESETS, FABRIC_PRESETS, SystemConfig
from mixgcn.hdl.board import ScanBridge, design_bits, ecp5_pll
from mixgcn.hdl.chip import Chip
from mixgcn.hdl.dce import DenseCombinationEngine
from mixgcn.hdl.host_link import RequestExecutor
from mixgcn.hdl.mac import Multiplier
from mixgcn.hdl.system import SystemNode
from mixgcn.hdl.timing import (
    YOSYS_KEEP_APART,
    YOSYS_ONE_HOT,
    SkidBuffer,
    collision_free_memory,
    relax_collisions,
)
from mixgcn.host.cli import main

REPORT_KEYS = {"board", "device", "chips", "chip", "lut4", "ff", "dsp", "bram", "fmax_mhz",
               "target_mhz", "timing_met", "seconds_per_stage"}


@pytest.mark.xdist_group("board")
def test_micro_chip_on_the_ulx3s_builds(tmp_path, capsys):
    """The whole flow, through the command line: a bitstream, and a report whose figures
    are nextpnr's own (its utilisation table and Fmax line in the log agree with them)."""
    out, js = tmp_path / "build", tmp_path / "report.json"
    assert main(["board", "--board", "ulx3s-85f", "--chip", "micro", "--out", str(out),
                 "--json", str(js)]) == 0
    report = json.loads(js.read_text())
    assert REPORT_KEYS <= report.keys()
    assert (report["board"], report["chip"], report["chips"]) == ("ulx3s-85f", "micro", 1)
    assert report["config"] == CHIP_PRESETS["micro"].to_dict()
    assert (out / "top.bit").stat().st_size > 100_000
    log = (out / "top.tim").read_text()
    util = dict((c, int(u)) for c, u in re.findall(r"^Info:\s+(\w+):\s+(\d+)/", log, re.M))
    assert report["lut4"] == util["TRELLIS_COMB"] > 1000
    assert report["ff"] == util["TRELLIS_FF"] > 1000
    # the micro chip: 2x2 DCE + 2 SAE multipliers
    assert report["dsp"] == util["MULT18X18D"] == 6
    assert report["bram"] == util["DP16KD"] > 0
    fmax = re.findall(r"Max frequency for clock '[^']+': ([\d.]+) MHz \((PASS|FAIL) at ([\d.]+)",
                      log)[-1]
    assert report["fmax_mhz"] == pytest.approx(float(fmax[0]), abs=0.01)
    assert report["target_mhz"] == pytest.approx(float(fmax[2])) == 100
    assert report["timing_met"] == (fmax[1] == "PASS")
    # the path that sets the Fmax: its delay is the clock's period at that Fmax
    path = report["slowest_path"]
    assert path["ns"] == pytest.approx(1000 / report["fmax_mhz"], abs=0.02)
    assert 0 < path["routing_ns"] < path["ns"] and path["nets"]
    shown = capsys.readouterr()
    assert f"slowest path: {path['from']} -> {path['to']}" in shown.out
    assert report["pll"]["fout_mhz"] == 100
    assert set(report["seconds_per_stage"]) == {"elaborate", "synth", "pnr", "pack"}
    # the registers after the engines' block RAMs went into the RAMs (gen/netlist.py)
    cells = json.loads((out / "top.json").read_text())["modules"]["top"]["cells"].values()
    outreg = [c for c in cells if c["type"] == "DP16KD"
              and c["parameters"]["REGMODE_B"] == "OUTREG"]
    assert report["ram_output_registers"] == len(outreg) > 0
    for stage in ("synth", "pnr", "pack"):
        assert f"[ulx3s-85f] {stage} done in" in shown.err


class _Counters(wiring.Component):
    """``n`` 16-bit counters, counter k stepping by 2k + 1 while ``i`` is high, their
    top bits XORed out: a design of about 16·n flip-flops (the steps differ, so
    synthesis cannot merge the counters)."""

    def __init__(self, n: int):
        self.n = n
        super().__init__({"i": In(1), "o": Out(1)})

    def elaborate(self, platform):
        m = Module()
        counters = [Signal(16, name=f"count{k}") for k in range(self.n)]
        with m.If(self.i):
            m.d.sync += [c.eq(c + 2 * k + 1) for k, c in enumerate(counters)]
        m.d.comb += self.o.eq(Cat(c[-1] for c in counters).xor())
        return m


@pytest.mark.xdist_group("board")
def test_a_design_too_large_for_its_part_is_one_line(tmp_path):
    """6,400 flip-flops on the iCEBreaker's UP5K (5,280 logic cells, one FF each),
    through the real tools: nextpnr's verdict, in one line naming the resource and both
    counts. (The micro chip's own verdict on this part is in ``make bench-boards``.)"""
    progress = []
    with pytest.raises(BoardError) as e:
        board_flow._build_one(BOARDS["icebreaker"], _Counters(400), out=tmp_path,
                              label="icebreaker", mhz=None, chips=1,
                              progress=progress.append, verbose=False)
    msg = str(e.value)
    assert "\n" not in msg
    m = re.search(r"does not fit: the design needs ([\d,]+) ICESTORM_LC, the part has 5,280",
                  msg)
    assert m and int(m.group(1).replace(",", "")) > 5280, msg
    assert "[icebreaker] synth done in" in "\n".join(progress)  # it got as far as pnr


@pytest.mark.xdist_group("board")
def test_place_and_route_stops_at_its_limit_saying_how_far_it_got(tmp_path, monkeypatch):
    """nextpnr has no time limit of its own: ``pnr_minutes`` stops it with a one-line
    error naming the limit and where it was, after showing its progress meanwhile."""
    monkeypatch.setattr(board_flow, "PROGRESS_EVERY", 0.5)
    progress = []
    t0 = time.monotonic()
    with pytest.raises(BoardError) as e:
        board_flow._build_one(BOARDS["ulx3s-85f"], _Counters(40), out=tmp_path,
                              label="ulx3s", mhz=100, chips=1, pnr_minutes=0.05,
                              progress=progress.append, verbose=False)
    msg = str(e.value)
    assert "\n" not in msg
    assert re.fullmatch(r"pnr stopped at its limit of 0.05 min without finishing: "
                        r"(starting|placing|routing, [\d,]+ arcs left at iteration [\d,]+) "
                        r"\(log in .*\)", msg), msg
    shown = [p for p in progress if p.startswith("[ulx3s] pnr: ")]
    assert len(shown) >= 2, progress  # every half second of the three
    assert "[ulx3s] synth done in" in "\n".join(progress)
    assert not (tmp_path / "top.config").exists()  # never finished
    assert time.monotonic() - t0 < 120


# a stand-in for a long tool: it notes its process id, then runs for a minute
_LONG_TOOL = "import os, time; open('tool.pid', 'w').write(str(os.getpid())); time.sleep(60)"

# the board flow running that tool, as `mixgcn board` runs nextpnr
_RUNNER = f"""
import sys
from pathlib import Path
from mixgcn.gen import board
board._run([sys.executable, "-c", {_LONG_TOOL!r}], Path(sys.argv[1]), "pnr", False)
"""


def _alive(pid: int) -> bool:
    try:
        return "(zombie)" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:  # no such process
        return False


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
def test_a_terminated_build_stops_its_tool(tmp_path):
    """``kill`` (SIGTERM) of a build while a tool runs ends the build and the tool:
    a place and route left running alone would hold a core for an hour."""
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, str(tmp_path)])
    try:
        pid_file = tmp_path / "tool.pid"
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert runner.poll() is None and time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        tool = int(pid_file.read_text())
        assert _alive(tool)
        runner.terminate()
        assert runner.wait(timeout=30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while _alive(tool) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(tool)
    finally:  # a failure above leaves no runner behind (its tool ends within a minute)
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_pnr_state_reads_nextpnrs_log():
    placing = "Info: Running main analytical placer, max placement attempts per cell = 9.\n"
    routing = placing + (
        "Info:     38000 |    11313      26686 |  273   727 |    151109|       9.42     135.79|\n"
        "Info:     45000 |    13186      31813 |  249   751 |    148186|       5.92     196.11|\n")
    assert board_flow.pnr_state("") == "starting"
    assert board_flow.pnr_state(placing) == "placing"
    assert board_flow.pnr_state(routing) == "routing, 148,186 arcs left at iteration 45,000"


def test_buffers_beyond_the_parts_block_ram_are_refused_before_synthesis(tmp_path):
    with pytest.raises(BoardError, match=r"block RAM — 1 x the SAE's feature buffer needs "
                                         r"524,288 bits .* the iCE40UP5K-SG48 has 122,880"):
        build_board("icebreaker", CHIP_PRESETS["tiny"], chip_name="tiny", out=tmp_path)
    with pytest.raises(BoardError, match=r"3 x the SAE's feature buffer needs 6,291,456"):
        build_board("ecpix5-85f", CHIP_PRESETS["ecp5"], chip_name="ecp5", chips=3,
                    out=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing was elaborated


@pytest.mark.parametrize("argv, message", [
    (["--board", "de0"], "unknown board 'de0': expected one of ulx3s-85f, ecpix5-85f, "
                         "icebreaker"),
    (["--board", "ulx3s-85f", "--chip", "huge"], "unknown chip 'huge'"),
    (["--board", "ulx3s-85f", "--chips", "0"], "--chips must be >= 1, got 0"),
    (["--board", "ulx3s-85f", "--mhz", "0.5"], "--mhz must be in 1..400, got 0.5"),
    (["--board", "ulx3s-85f", "--seed", "-1"], "--seed must be an integer in 0..2147483647, "
                                               "got -1"),
    (["--board", "icebreaker", "--chip", "micro", "--mhz", "24"],
     "runs the chip at its oscillator: --mhz is not supported there"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--fabric", "serial"],
     "--fabric serial joins boards: it needs --chips >= 2, got 1"),
    (["--board", "icebreaker", "--chip", "micro", "--chips", "2", "--fabric", "serial"],
     "icebreaker has no pins for links between boards"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--chips", "4", "--fabric", "serial"],
     "4 boards need 72 link pins on each ulx3s-85f, it has 52 free: at most 3 boards"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--chips", "2", "--top", "link"],
     "the link top holds one chip, got --chips 2"),
    (["--board", "ecpix5-85f", "--chip", "micro", "--top", "link"],
     "no controller is generated for ecpix5-85f's yet (only for ulx3s-85f)"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--baud", "115200"],
     "--baud applies to --top link only"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--top", "link", "--baud", "40000000"],
     "UART: a 100 MHz clock cannot make 40,000,000 baud"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--top", "link", "--mhz", "60"],
     "the chip's clock (60 MHz) is slower than the DRAM's (80 MHz)"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--pnr-minutes", "0"],
     "--pnr-minutes must be a number of minutes > 0, got 0.0"),
    (["--board", "ulx3s-85f", "--chip", "micro", "--pnr-minutes", "nan"],
     "--pnr-minutes must be a number of minutes > 0, got nan"),
])
def test_bad_options_are_one_line_errors(argv, message, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["board", *argv, "--out", str(tmp_path)])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_missing_fpga_extra_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(board_flow, "_YOWASP", {**board_flow._YOWASP,
                                                "nextpnr-ice40": "yowasp-nextpnr-nowhere"})
    with pytest.raises(SystemExit) as e:
        main(["board", "--board", "icebreaker", "--chip", "micro", "--out", str(tmp_path)])
    assert "yowasp-nextpnr-nowhere is not installed: install the fpga extra" in str(e.value)


def test_the_scan_chain_reaches_every_port():
    """Every input and output bit of the chip is on the chain (nothing optimised away
    for want of a pin), payload views included."""
    chip = Chip(CHIP_PRESETS["micro"])
    ins, outs = design_bits(chip)
    lay = chip.layouts
    assert sum(len(s) for s in ins) > lay.desc_layout.size + 6 * lay.mem_width
    assert sum(len(s) for s in outs) > lay.status_layout.size + 2 * lay.mem_width
    names = {s.name for s in ins + outs}
    assert {"desc__payload", "desc__valid", "status__payload"} <= names
    Fragment.get(chip, None)  # an elaboratable built is elaborated (no unused warning)


@pytest.mark.parametrize("fin, fout", [(25, 100), (25, 125), (100, 100), (25, 50)])
def test_ecp5_pll_settings_are_in_range(fin, fout):
    p = ecp5_pll(fin, fout)
    assert p["fout_mhz"] == pytest.approx(fout)
    assert 3.125 <= fin / p["CLKI_DIV"] <= 400
    assert 400 <= p["fout_mhz"] * p["CLKOP_DIV"] <= 800


@pytest.mark.parametrize("fin, fout, fsec", [(25, 100, 80), (25, 100, 50), (25, 125, 62.5)])
def test_ecp5_pll_second_output_beside_the_first(fin, fout, fsec):
    p = ecp5_pll(fin, fout, fsec)
    assert p["fout_mhz"] == pytest.approx(fout) and p["fsec_mhz"] == pytest.approx(fsec)
    vco = p["fout_mhz"] * p["CLKOP_DIV"]
    assert 400 <= vco <= 800 and vco / p["CLKOS_DIV"] == pytest.approx(fsec)


def test_a_second_clock_the_pll_cannot_make_is_refused_naming_it():
    from mixgcn.hdl.board import ecp5_clock

    platform, m = board_flow._platform(BOARDS["ulx3s-85f"]), Module()
    with pytest.raises(ValueError, match="no ECP5 PLL setting gives 77 MHz beside 100"):
        ecp5_clock(m, platform, 100, secondary=(77, Signal()))
    Fragment.get(m, None)  # nothing was added to it; elaborated, so no unused warning


def test_every_board_names_a_platform():
    for b in BOARDS.values():
        assert board_flow._platform(b).device in b.device


def test_ice40_flip_flops_are_counted_once():
    """yosys prints a netlist's statistics more than once; the count is one listing's."""
    listing = ("=== top ===\n\n   cells\n       6   SB_DFF\n     100   SB_DFFESR\n"
               "     500   SB_LUT4\n\n=== design hierarchy ===\n")
    assert board_flow.yosys_ff_count("log\n" + listing + "more\n" + listing) == 106
    assert board_flow.yosys_ff_count("no statistics") is None


@pytest.mark.parametrize("board", ["ulx3s-85f", "ecpix5-85f"])
def test_serial_board_tops_put_each_link_on_the_pins_the_cabling_names(board):
    """Three boards of a chip each: every board's top places its links' pins where the
    cabling table says, each pin once, none on the scan pins; the incoming clocks are
    constrained; the links are not on the scan chain, the bridges' overrun flags are."""
    P = 3
    config = SystemConfig(chip=CHIP_PRESETS["micro"], chips=P, fabric=FABRIC_PRESETS["serial"])
    b = BOARDS[board]
    platform = board_flow._platform(b)
    physical = {f"{c}{n} {pin}" if c == "pmod" else f"{c} {pin}":
                platform.connectors[c, n].mapping[pin] for c, n, pin in b.link_pins}
    scan = {platform.connectors[b.scan[0], b.scan[1]].mapping[pin] for pin in b.scan[2]}
    wires = cabling(board, P)
    assert len(wires) == P * (P - 1)
    for p in range(P):
        node = SystemNode(config, p)
        top, plan = board_plan(b, node, mhz=100.0, chips=P)
        lpf = plan.files["top.lpf"]
        placed = re.findall(r'LOCATE COMP "link_(?:tx|rx)_(\d+)__(\w+?)__io(\[\d+\])?" '
                            r'SITE "(\w+)"', lpf)
        pins = [site for *_, site in placed]
        assert len(pins) == len(set(pins)) == 2 * (P - 1) * 12
        assert not set(pins) & scan
        for w in wires:
            for way, who, peer, name in (("out", w["from"], w["to"], "tx"),
                                         ("in", w["to"], w["from"], "rx")):
                if who != p:
                    continue
                got = [site for q, field, bit, site in
                       sorted(re.findall(rf'LOCATE COMP "link_{name}_({peer})__(\w+?)__io'
                                         rf'(?:\[(\d+)\])?" SITE "(\w+)"', lpf),
                              key=lambda f: (LINK_FIELDS.index(f[1]), int(f[2] or 0)))]
                assert got == [physical[label] for label in w[way]], (p, w)
        for q in node.peers:
            assert f'FREQUENCY PORT "link_rx_{q}__clk__io" 100000000.0 HZ;' in lpf, lpf
        ins, outs = design_bits(node, skip=[f"{w}_{q}" for q in node.peers for w in ("to", "from")])
        assert top.bridge.in_bits == sum(len(x) for x in ins)
        assert top.bridge.out_bits == sum(len(x) for x in outs) + (P - 1)  # the overrun flags


class _Times3(wiring.Component):
    """A design for the scan chain: a 40-bit input, its triple a cycle later."""

    def __init__(self):
        super().__init__({"a": In(40), "b": Out(42)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.b.eq(self.a * 3)
        return m


def test_the_scan_chain_shifts_inputs_in_and_captured_outputs_out():
    """Bits shifted in on ``di`` become the design's inputs, in order; a ``load`` edge
    captures its outputs, which come out on ``do`` a bit per ``clk`` edge — across the
    enable tree's groups (40 and 42 bits: two groups each, the second partial)."""
    design = _Times3()
    pins = SimpleNamespace(clk=io.SimulationPort("i", 1), di=io.SimulationPort("i", 1),
                           load=io.SimulationPort("i", 1), do=io.SimulationPort("o", 1))
    top = Module()
    top.submodules.design = design
    top.submodules.scan = bridge = ScanBridge(design, pins)
    assert (bridge.in_bits, bridge.out_bits) == (40, 42)
    value = 0xB7_1234_5ACE
    got = []

    async def tb(ctx):
        async def pulse(pin):
            ctx.set(pin.i, 1)
            await ctx.tick().repeat(6)
            ctx.set(pin.i, 0)
            await ctx.tick().repeat(6)

        for bit in range(40):  # the first bit in ends at the chain's far end: bit 0
            ctx.set(pins.di.i, (value >> bit) & 1)
            await pulse(pins.clk)
        assert ctx.get(design.a) == value
        await pulse(pins.load)
        for _ in range(42):
            got.append(ctx.get(pins.do.o))
            await pulse(pins.clk)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert sum(b << i for i, b in enumerate(got)) == value * 3


@pytest.mark.parametrize("keep_apart", [True, False])
def test_the_mac_cells_keep_their_own_control_registers(tmp_path, keep_apart):
    """Each MAC cell's copies of the array's controls stay separate flip-flops through
    synthesis when the board flow's yosys command marks them (mixgcn.hdl.timing):
    without it yosys merges the identical copies into one register that steers every
    accumulator bit of the array."""
    dce = DenseCombinationEngine(dataclasses.replace(CHIP_PRESETS["tiny"].dce, rows=2, cols=2))
    ulx3s = board_flow._platform(BOARDS["ulx3s-85f"])
    (tmp_path / "top.il").write_text(rtlil.convert(dce, platform=ulx3s, name="top"))
    keep = f"{YOSYS_KEEP_APART}; " if keep_apart else ""
    subprocess.run([board_flow._tool("yosys"), "-q", "-p",
                    f"read_rtlil top.il; {keep}synth_ecp5 -top top; write_json top.json"],
                   cwd=tmp_path, check=True)
    nets = json.loads((tmp_path / "top.json").read_text())["modules"]["top"]["netnames"]
    for copy in ("clear_q", "shift_q", "o_valid", "p_valid"):
        bits = {tuple(n["bits"]) for name, n in nets.items()
                if ".mac" in name and name.endswith(f".{copy}")}
        assert len(bits) == (4 if keep_apart else 1), (copy, bits)


def _synthesised_alone(tmp_path, component, script: str = "") -> dict:
    """``component`` synthesised for an ECP5 on its own, its ports (less any constant
    ones) the top's, ``script`` run first: yosys's JSON of the top module."""
    ports = [Value.cast(v) for _, _, v in component.signature.flatten(component)]
    ports = [v for v in ports if isinstance(v, Signal)]
    (tmp_path / "top.il").write_text(rtlil.convert(component, name="top", ports=ports))
    subprocess.run([board_flow._tool("yosys"), "-q", "-p",
                    f"read_rtlil top.il; {script}; synth_ecp5 -top top; write_json top.json"],
                   cwd=tmp_path, check=True, capture_output=True)
    return json.loads((tmp_path / "top.json").read_text())["modules"]["top"]


def test_a_skid_buffers_words_are_steered_by_copies_of_its_flags(tmp_path):
    """Through the board flow's yosys command, a skid buffer keeps its two flags and
    their two copies as four flip-flops, and its output word's enable is a LUT that
    reads the copy, not the flag (mixgcn.hdl.timing.SkidBuffer: one shared enable was
    placed by the words, far from the flags)."""
    top = _synthesised_alone(tmp_path, SkidBuffer(32), YOSYS_KEEP_APART)
    bit = {n: top["netnames"][n]["bits"][0]
           for n in ("o_valid_reg", "o_valid_copy", "spare_valid", "spare_valid_copy")}
    assert len(set(bit.values())) == 4
    cells = list(top["cells"].values())
    ffs = [c for c in cells if c["type"] == "TRELLIS_FF"]
    assert {c["connections"]["Q"][0] for c in ffs} >= set(bit.values())
    driver = {b: c for c in cells for p, v in c["connections"].items()
              if c["port_directions"][p] == "output" for b in v}
    words = set(top["netnames"]["o__payload"]["bits"])
    enables = {c["connections"]["CE"][0] for c in ffs
               if c["connections"]["Q"][0] in words and "CE" in c["connections"]}
    assert len(enables) == 1
    lut = driver[enables.pop()]
    inputs = {b for p, v in lut["connections"].items()
              if lut["port_directions"][p] == "input" for b in v}
    assert bit["o_valid_copy"] in inputs and bit["o_valid_reg"] not in inputs


@pytest.mark.parametrize("marked", [True, False])
def test_the_request_executor_is_built_one_hot(tmp_path, marked):
    """The link's request executor has a flip-flop per state once synthesised through
    the board flow's script (mixgcn.hdl.timing): yosys recodes its state register,
    which it leaves binary (amaranth's) without the mark. The flow's script carries the
    mark."""
    _, plan = board_plan(BOARDS["ulx3s-85f"], board_flow.linked_design(
        CHIP_PRESETS["micro"], BOARDS["ulx3s-85f"], 100.0, 3_000_000), mhz=100.0, chips=1)
    script = plan.files["top.ys"]
    assert script.index(YOSYS_ONE_HOT) < script.index("synth_ecp5")
    nets = _synthesised_alone(tmp_path, RequestExecutor(CHIP_PRESETS["micro"]),
                              YOSYS_ONE_HOT if marked else "")["netnames"]
    state = nets["request_one_hot_state"]["bits"]
    assert len(state) == (24 if marked else 5)  # its 24 states


def test_an_ecp5_multiplier_is_one_dsp_block_holding_its_registers(tmp_path):
    """Built for an ECP5 board, a multiplier is one MULT18X18D with its operand and
    product registers inside: yosys's synth_ecp5 leaves none of it in fabric. (That the
    block computes what the generic form does is the dsp_multiplier proofs'.) Without
    an ECP5, or past the block's 18 bits, it stays generic."""
    ulx3s = board_flow._platform(BOARDS["ulx3s-85f"])
    (tmp_path / "top.il").write_text(rtlil.convert(Multiplier(16), platform=ulx3s, name="top"))
    subprocess.run([board_flow._tool("yosys"), "-q", "-p",
                    "read_rtlil top.il; synth_ecp5 -top top; write_json top.json"],
                   cwd=tmp_path, check=True)
    cells = json.loads((tmp_path / "top.json").read_text())["modules"]["top"]["cells"]
    assert [c["type"] for c in cells.values()] == ["MULT18X18D"]
    params = next(iter(cells.values()))["parameters"]
    for reg in ("INPUTA", "INPUTB", "OUTPUT"):
        assert params[f"REG_{reg}_CLK"] == "CLK0"
    assert "MULT18X18D" not in rtlil.convert(Multiplier(16), name="top")
    assert "MULT18X18D" not in rtlil.convert(Multiplier(19), platform=ulx3s, name="top")
    icebreaker = board_flow._platform(BOARDS["icebreaker"])
    assert "MULT18X18D" not in rtlil.convert(Multiplier(16), platform=icebreaker, name="top")
    with pytest.raises(ValueError, match="19-bit multiplier does not fit"):
        Multiplier(19, target="ecp5")
    with pytest.raises(ValueError, match="unknown multiplier target 'xilinx'"):
        Multiplier(16, target="xilinx")


def test_the_flow_hides_indexed_wire_names_before_synthesis():
    _, plan = board_plan(BOARDS["ulx3s-85f"], board_flow.design_for(CHIP_PRESETS["micro"], 1),
                           mhz=100.0, chips=1)
    script = plan.files["top.ys"]
    assert script.index(board_flow.YOSYS_HIDE_INDEXED) < script.index("synth_ecp5")


@pytest.mark.slow
@pytest.mark.xdist_group("board")
def test_the_ecp5_board_top_synthesises(tmp_path):
    """The `ecp5` chip's ULX3S top through the flow's own yosys script (about a minute).
    Without the flow's renaming of indexed wire names, yosys 0.70's ABC9 step failed an
    internal assertion on this design."""
    _, plan = board_plan(BOARDS["ulx3s-85f"], board_flow.design_for(CHIP_PRESETS["ecp5"], 1),
                           mhz=100.0, chips=1)
    plan.extract(tmp_path)
    cmd = json.loads(plan.files["build_top.json"])["commands"][0]
    assert cmd[0] == "yosys"
    r = subprocess.run([board_flow._tool("yosys"), *cmd[1:]], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, (tmp_path / "top.rpt").read_text()[-2000:]
    cells = json.loads((tmp_path / "top.json").read_text())["modules"]["top"]["cells"]
    kinds = [c["type"] for c in cells.values()]
    # 128 block RAMs for the feature buffer (2 banks x 2 read replicas x 8 lanes x 4
    # blocks of 4,096 x 4 bits), 36 for the FIFOs and memories, 22 for the SAE's partial
    # sums (1,024 rows x 8 lanes x 48 bits: 22 blocks of 1,024 x 18 bits side by side)
    assert kinds.count("MULT18X18D") == 80 and kinds.count("DP16KD") == 186


def test_collision_free_memories_are_relaxed_for_synthesis_only():
    """The SAE's feature buffer and partial sums, the DCE's weight store and the
    router's pipeline FIFO are marked collision-free (the proofs show why they may be):
    the board flow's RTLIL lets their read ports return anything on a read/write
    collision (no logic after the block RAM); every other memory keeps amaranth's
    old-word reads."""
    chip = CHIP_PRESETS["micro"]
    _, plan = board_plan(BOARDS["ulx3s-85f"], board_flow.design_for(chip, 1), mhz=100.0, chips=1)
    sae = chip.sae
    il = plan.files["top.il"]
    masks = re.findall(r"COLLISION_X_MASK (\d+)'([01]+)", il)
    relaxed = [bits for _, bits in masks if "0" not in bits]
    assert len(relaxed) == (2 * sae.lanes * sae.edges + (1 if sae.partial_rows else 0)
                            + chip.dce.rows + 1)
    assert len(masks) > len(relaxed)  # amaranth's FIFOs' memories are untouched
    # a marked memory's two read ports, in a module of its own; an unmarked one beside
    m = Module()
    marked = collision_free_memory(shape=8, depth=16)
    plain = memory.Memory(shape=8, depth=16, init=[])
    m.submodules.marked, m.submodules.plain = marked, plain
    a, d = Signal(4), Signal(8)
    outs = []
    for mem in (marked, plain):
        w = mem.write_port()
        m.d.comb += [w.addr.eq(a), w.data.eq(d)]
        for k in range(2):
            r = mem.read_port()
            o = Signal(8)
            m.d.comb += [r.addr.eq(a + k), o.eq(r.data)]
            outs.append(o)
    text, count = relax_collisions(rtlil.convert(m, ports=[a, d, *outs]))
    assert count == 2
    reads = [(re.search(r'MEMID "\\\\(\w+)"', cell)[1],
              re.search(r"COLLISION_X_MASK 1'(\d)", cell)[1])
             for cell in text.split("cell $memrd_v2")[1:]]
    assert sorted(reads) == [("marked", "1"), ("marked", "1"), ("plain", "0"), ("plain", "0")]


def test_the_link_top_puts_the_chip_on_the_uart_and_the_sdram():
    """`--top link`: the chip behind its host link on the ULX3S's FTDI serial pins, its
    memory on the board's SDRAM through the bridge and LiteDRAM's controller with its
    PHY on the SDRAM's pins (the controller's Verilog added to the build); no scan
    chain."""
    pytest.importorskip("litedram", reason="the dram extra is not installed")
    board = BOARDS["ulx3s-85f"]
    design = board_flow.linked_design(CHIP_PRESETS["micro"], board, 100.0, 3_000_000)
    top, plan = board_plan(board, design, mhz=100.0, chips=1)
    assert "module mixgcn_dram" in plan.files["mixgcn_dram.v"]
    assert "read_verilog" in plan.files["top.ys"] and "mixgcn_dram.v" in plan.files["top.ys"]
    lpf = plan.files["top.lpf"]
    pins = {"M1": "uart_0__rx", "L4": "uart_0__tx", "F19": "sdram_0__clk",
            "F20": "sdram_0__clk_en", "P20": "sdram_0__cs", "J16": "sdram_0__dq__io[0]",
            "G19": "sdram_0__a__io[12]", "U19": "sdram_0__dqm__io[0]"}
    for site, port in pins.items():
        assert re.search(rf'LOCATE COMP "{re.escape(port)}[^"]*" SITE "{site}"', lpf), port
    assert "scan" not in lpf
    assert not hasattr(top, "bridge") and top.pll["fout_mhz"] == 100.0
    # the DRAM's controller on the PLL's second output, at the part's own clock
    assert top.pll["fsec_mhz"] == pytest.approx(80.0)
    assert "CLKOS_DIV" in plan.files["top.il"] or "CLKOS" in plan.files["top.il"]
