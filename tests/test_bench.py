"""The benchmark path end to end on the tiny chip: engines measured on the chip with a
golden check of every output row, figures that add up, and results that never carry
a section over from an older run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.host import bench

TINY = CHIP_PRESETS["tiny"]


@pytest.mark.sim
def test_dce_on_the_chip():
    cases = [dict(op="xw", n=50, k=7, m=3), dict(op="xwt", n=20, k=5, m=2),
             dict(op="xtg", n=40, k=4, m=3), dict(op="xw", n=60, k=64, m=4)]
    keys, _ = bench.bench_dce(TINY, cases)
    results = keys["dce_cases"]
    assert [r["op"] for r in results] == ["xw", "xwt", "xtg", "xw"]
    for r in results:
        assert r["verified"]
        assert r["cycles"] >= r["ideal_cycles"] > 0
        assert 0 < r["utilisation"] <= 1
    # 60 rows of 16 chunks each: the steady state dominates
    assert results[-1]["utilisation"] > 0.8
    assert keys["dce_utilisation"] == results[-1]["utilisation"]


@pytest.mark.sim
def test_sae_on_the_chip():
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((40, 40)) < 0.15, rng.integers(-3000, 3000, (40, 40)), 0)
    dense[5] = 0  # an empty row
    s = sp.csr_array(dense)
    keys, _ = bench.bench_sae(TINY, {"g": s}, edges=(TINY.sae.edges,))
    assert len(keys["sae_cases"]) == 2  # one pass and four
    for r in keys["sae_cases"]:
        assert r["verified"] and r["nnz"] == s.nnz
        assert r["cycles"] >= r["ideal_cycles"]
        assert 0 < r["utilisation"] <= 1


def test_results_are_complete_and_never_carried_over(tmp_path, monkeypatch):
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"dce_utilisation": 0.99, "sections": {}}))  # an old run

    def no_data():
        raise bench.NotRun("no Cora: not found")

    monkeypatch.setattr(bench, "SECTIONS", {"golden": lambda: ({"g": 1}, ["g"]),
                                            "dce": lambda: ({"d": 2}, ["d"]),
                                            "rtl": no_data})
    assert bench.main(["--out", str(out), "--only", "golden", "--only", "rtl"]) == 0
    r = json.loads(out.read_text())
    assert "dce_utilisation" not in r and "d" not in r and r["g"] == 1
    assert r["sections"]["golden"]["status"] == "measured"
    assert r["sections"]["dce"] == dict(status="not run", reason="not selected (--only)")
    assert r["sections"]["rtl"] == dict(status="not run", reason="no Cora: not found")
    assert "rtl: not run (no Cora: not found)" in out.with_suffix(".txt").read_text()


def test_results_md_and_plots_come_from_this_run_only(tmp_path, monkeypatch):
    out = tmp_path / "results.json"
    (tmp_path / "model.png").write_bytes(b"an older run's plot")
    util = dict(default=dict(useful_macs=100, cycles=1000, multipliers=4, utilisation=0.025,
                             sae_busy=600, dce_busy=100))
    monkeypatch.setattr(bench, "SECTIONS", {
        "golden": lambda: ({"golden_cora_test_accuracy_float32": 0.812}, ["golden table"]),
        "model": lambda: ({"chip_utilisation": util, "model_error_max": 0.0014}, ["m"]),
        "rtl": lambda: (_ for _ in ()).throw(bench.NotRun("no Cora: not found"))})
    monkeypatch.setattr(bench, "QUICK_SECTIONS", ("golden", "model", "rtl"))
    assert bench.main(["--out", str(out), "--quick"]) == 0
    md = (tmp_path / "RESULTS.md").read_text()
    assert "| Cora test accuracy, golden float32 (200 epochs) | 0.812 |" in md
    assert "| Performance model: worst error of any operation on Cora (ideal memory) | 0.14% |" \
        in md
    # a figure whose section did not run says why; none is invented
    assert "— (rtl: no Cora: not found)" in md
    assert "— (presets: not measured)" in md  # not a section of this run at all
    assert "golden table" in md
    assert (tmp_path / "utilisation.png").stat().st_size > 1000
    assert "![utilisation](utilisation.png)" in md
    assert not (tmp_path / "model.png").exists()  # the older run's plot is gone


def test_quick_and_only_together_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--only", "golden"])
    assert "--quick and --only choose the sections two ways" in capsys.readouterr().err


def test_peers_say_why_they_did_not_run_without_torch(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(bench.NotRun, match="the peers extra is not installed"):
        bench.bench_peers()
    assert "peers" in bench.SLOW_SECTIONS  # never in make bench or make test


def test_a_named_run_keeps_its_report_apart(tmp_path, monkeypatch):
    (tmp_path / "RESULTS.md").write_text("the main run's")
    (tmp_path / "utilisation.png").write_bytes(b"the main run's plot")
    monkeypatch.setattr(bench, "SECTIONS", {"golden": lambda: ({"g": 1}, ["g"])})
    assert bench.main(["--out", str(tmp_path / "peers.json"), "--only", "golden"]) == 0
    assert "g" in (tmp_path / "peers.md").read_text()
    assert (tmp_path / "RESULTS.md").read_text() == "the main run's"
    assert (tmp_path / "utilisation.png").read_bytes() == b"the main run's plot"


def test_an_implied_time_uses_only_a_report_of_the_same_chip(tmp_path, monkeypatch):
    """The chip's implied epoch time divides by the Fmax of a build of that very chip:
    a report of another configuration under the same name, or an unrouted build, gives
    the reason instead of a clock."""
    monkeypatch.chdir(tmp_path)
    ecp5 = CHIP_PRESETS["ecp5"]
    assert "no board report at" in bench._board_fmax("ecp5")["missing"]
    report = tmp_path / "build/board/ulx3s-85f-1xexplored/report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps(dict(fmax_mhz=97.5, config=ecp5.to_dict())))
    assert bench._board_fmax("explored", ecp5)["fmax_mhz"] == 97.5
    assert "is of another explored chip" in bench._board_fmax("explored", TINY)["missing"]
    report.write_text(json.dumps(dict(fmax_mhz=97.5)))  # made before reports named theirs
    assert "is of another explored chip" in bench._board_fmax("explored", ecp5)["missing"]
    report.write_text(json.dumps(dict(fmax_mhz=None, config=ecp5.to_dict())))
    assert "did not route" in bench._board_fmax("explored", ecp5)["missing"]
