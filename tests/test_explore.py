"""Design-space exploration (host/explore.py, ``mixgcn explore``): every candidate fits
the part, the fastest on the performance model is chosen and written as a chip.json
the other commands accept, and bad requests are refused naming the value."""

from __future__ import annotations

import json

import pytest

from mixgcn.gen.config import load_chip
from mixgcn.gen.resources import ECP5_PARTS, Part, chip_block_rams, multipliers
from mixgcn.golden.datasets import load_dataset
from mixgcn.host.cli import main
from mixgcn.host.explore import candidates, explore

GRAPH = "synthetic:nodes=300,features=40"


def test_every_candidate_fits_the_part():
    part = ECP5_PARTS["ecp5-25f"]
    cands = candidates(part)
    assert cands
    for c in cands:
        assert c.multipliers == multipliers(c.config) <= part.dsp
        assert c.bram == chip_block_rams(c.config) <= part.bram
        assert c.config.sae.lanes == c.config.dce.rows == c.config.dce.cols


def test_a_share_of_the_multipliers_bounds_the_candidates():
    part = ECP5_PARTS["ecp5-85f"]
    every = candidates(part, dsp_fill=1.0)
    half = candidates(part, dsp_fill=0.5)
    assert {c.label() for c in half} < {c.label() for c in every}
    assert max(c.multipliers for c in half) <= 78 < max(c.multipliers for c in every)


@pytest.mark.parametrize("share", [0, -0.5, 1.5, float("nan"), True, "0.7"])
def test_a_bad_share_of_the_multipliers_is_refused(share):
    with pytest.raises(ValueError, match="must be in \\(0, 1\\], got"):
        candidates(ECP5_PARTS["ecp5-85f"], dsp_fill=share)


def test_the_fastest_on_the_model_comes_first():
    ranked = explore(load_dataset(GRAPH), ECP5_PARTS["ecp5-25f"])
    fits = [c for c in ranked if c.refused is None]
    assert fits and ranked[0] is fits[0]
    cycles = [c.epoch_cycles for c in fits]
    assert cycles == sorted(cycles) and cycles[0] > 0
    assert all(0 < c.utilisation <= 1 for c in fits)


def test_a_part_too_small_is_refused():
    with pytest.raises(ValueError, match="no configuration of the grid fits tiny-part"):
        explore(load_dataset(GRAPH), Part("tiny-part", lut4=100, dsp=1, bram=1))


def test_explore_writes_a_chip_the_other_commands_accept(tmp_path, capsys):
    out, report = tmp_path / "chip.json", tmp_path / "report.json"
    assert main(["explore", "--dataset", GRAPH, "--budget", "ecp5-25f", "--quiet",
                 "--out", str(out), "--json", str(report), "--top", "3"]) == 0
    _, chip = load_chip(str(out))
    rep = json.loads(report.read_text())
    assert rep["chosen"]["config"] == chip.to_dict()
    assert rep["chosen"]["epoch_cycles"] == min(
        c["epoch_cycles"] for c in rep["candidates"] if c["refused"] is None)
    assert "chosen:" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--budget", "ecp5-99f"], "unknown --budget 'ecp5-99f'"),
    (["--budget", "ecp5-25f", "--top", "0"], "--top must be at least 1, got 0"),
    (["--budget", "ecp5-25f", "--dsp-fill", "1.2"], "--dsp-fill must be in \\(0, 1\\], got 1.2"),
    (["--budget", "ecp5-25f", "--dsp-fill", "0"], "--dsp-fill must be in \\(0, 1\\], got 0.0"),
    (["--budget", "ecp5-25f", "--memory", "nope"], "nope"),
    (["--budget", "ecp5-25f", "--memory", "ulx3s-litedram"], "not a DRAM controller"),
    (["--budget", "ecp5-25f", "--dataset", "no-such-graph"], "no-such-graph"),
])
def test_bad_requests_are_refused(args, message):
    with pytest.raises(SystemExit, match=message):
        main(["explore", "--quiet", *args])
