"""Formal proofs of the chip's streams and invariants (sim/verify/proofs.py): each proves
by k-induction and reaches its covers from reset. ``make formal`` runs only these."""

from __future__ import annotations

import pytest

from mixgcn.sim.verify.formal import prove
from mixgcn.sim.verify.proofs import PROOFS, models, proof


@pytest.mark.formal
@pytest.mark.parametrize("name", list(PROOFS))
def test_proof(name, tmp_path):
    result = prove(name, proof(name), tmp_path, depth=PROOFS[name][1],
                    models=models(name))
    assert result.passed, f"{name}: {result.status}: {result.log}"
