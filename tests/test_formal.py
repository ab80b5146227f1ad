"""Formal proofs of the chip's streams and invariants (sim/verify/proofs.py): each proves
by k-induction and reaches its covers from reset. ``make formal`` runs only these."""

from __future__ import annotations

import pytest

from mixgcn.sim.verify.formal import prove
from mixgcn.sim.verify.proofs import PROOFS, models, proof

# the 8-bit multiplier proof (every operand; about 40 s) with the slow tier: make test keeps
# the 5-bit one (every operand) and the 16-bit one (one-hot operands)
SLOW_PROOFS = {"dsp_multiplier_8"}


@pytest.mark.formal
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_PROOFS
                                  else n for n in PROOFS])
def test_proof(name, tmp_path):
    result = prove(name, proof(name), tmp_path, depth=PROOFS[name][1],
                    models=models(name))
    assert result.passed, f"{name}: {result.status}: {result.log}"
