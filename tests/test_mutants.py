"""The mutation runner end to end on two of its mutants (``make mutants`` runs all):
the fence that once survived every chip test, and one a formal proof kills."""

from __future__ import annotations

import pytest

from mixgcn.sim.verify.mutants import MUTANTS, Mutant, run_mutants


def test_every_mutant_applies_once():
    from mixgcn.sim.verify.mutants import PACKAGE

    assert len(MUTANTS) >= 15 and len({m.name for m in MUTANTS}) == len(MUTANTS)
    for m in MUTANTS:
        assert (PACKAGE / m.file).read_text().count(m.original) == 1, m.name
        assert m.original != m.mutated and m.tests, m.name


@pytest.mark.formal
def test_two_mutants_are_killed():
    chosen = [m for m in MUTANTS if m.name in ("fence", "reader-room")]
    rows = run_mutants(chosen, log=lambda _: None)
    assert [(r["name"], r["killed"]) for r in rows] == [("fence", True), ("reader-room", True)]


def test_a_harmless_change_survives():
    # the runner can tell: a mutant that changes nothing (a comment) is not killed
    harmless = Mutant("harmless", "hdl/controller.py", "# the SAE unit whose command waits",
                      "# (changed) the SAE unit whose command waits",
                      ("tests/test_hdl_components.py::test_a_fence_waits_for_everything_before_it",),
                      "nothing")
    assert run_mutants([harmless], log=lambda _: None)[0]["killed"] is False
