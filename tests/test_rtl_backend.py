"""Training on the simulated chip gives exactly the golden fixed-point weights; the
cycle counts come from the chip's counters."""

from __future__ import annotations

import json

import pytest

from mixgcn.host.cli import main


def _run(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    assert main(["train", "--quiet", "--json", str(out), *args]) == 0
    return json.loads(out.read_text())


@pytest.mark.sim
def test_rtl_matches_golden_fixed16_on_synthetic(tmp_path):
    args = ["--dataset", "synthetic:nodes=200", "--epochs", "2", "--seed", "3"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", *args)
    gold = _run(tmp_path, "golden", "--backend", "golden", "--precision", "fixed16", *args)
    assert rtl["weights_sha256"] == gold["weights_sha256"]
    assert rtl["test_accuracy"] == gold["test_accuracy"]
    assert rtl["backend"] == "rtl" and rtl["precision"] == "fixed16"
    # every kernel kind ran on the chip and was counted; from the second epoch on the
    # layer's SpMM and GEMM run as pipelined pairs; layer 1's weight gradient always runs
    # beside layer 0's aggregation
    assert set(rtl["cycles_per_op"]) == {"spmm", "gemm_xw", "gemm_xwt", "gemm_xw_sparse",
                                         "gemm_xtg_sparse", "gemm_xw+spmm", "spmm+gemm_xwt",
                                         "spmm|gemm_xtg"}
    assert rtl["cycles"] == sum(rtl["cycles_per_op"].values()) > 0
    assert rtl["cycles"] == sum(s["cycles"] for s in rtl["cycles_per_site"].values())
    assert 0 < rtl["sae_busy_cycles"] <= rtl["cycles"]
    assert 0 < rtl["dce_busy_cycles"] <= rtl["cycles"]
    assert len(rtl["epoch_cycles"]) == 2 and sum(rtl["epoch_cycles"]) < rtl["cycles"]

    # the same run with every kernel alone: the same bits, more cycles
    alone = _run(tmp_path, "alone", "--backend", "rtl", "--no-pipeline", *args)
    assert alone["weights_sha256"] == gold["weights_sha256"]
    assert not any("+" in kind or "|" in kind for kind in alone["cycles_per_op"])
    assert "gemm_xtg" in alone["cycles_per_op"]
    assert alone["epoch_cycles"][0] > rtl["epoch_cycles"][0]  # the side-by-side pair
    assert alone["epoch_cycles"][1] > rtl["epoch_cycles"][1]


@pytest.mark.sim
def test_rtl_matches_golden_fixed16_on_synthetic_default_and_reordered(tmp_path):
    for extra in ([], ["--reorder", "rcm"]):
        args = ["--dataset", "synthetic", "--epochs", "2", "--seed", "0", *extra]
        rtl = _run(tmp_path, "rtl", "--backend", "rtl", *args)
        gold = _run(tmp_path, "golden", "--backend", "golden", "--precision", "fixed16", *args)
        assert rtl["weights_sha256"] == gold["weights_sha256"], extra
        assert rtl["reorder"] == (extra[-1] if extra else "none")


@pytest.mark.sim
def test_rtl_matches_golden_fixed16_on_cora(tmp_path, cora_dir):
    args = ["--dataset", "cora", "--data-dir", str(cora_dir), "--epochs", "2", "--seed", "0"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", *args)
    gold = _run(tmp_path, "golden", "--backend", "golden", "--precision", "fixed16", *args)
    assert rtl["weights_sha256"] == gold["weights_sha256"]


def test_no_pipeline_is_refused_on_golden():
    with pytest.raises(SystemExit, match="--no-pipeline applies to --backend rtl only"):
        main(["train", "--no-pipeline", "--epochs", "1"])


@pytest.mark.parametrize("chips", ["0", "2"])
def test_more_chips_are_refused_for_now(chips):
    with pytest.raises(SystemExit, match=f"--chips {chips}: only one chip is supported"):
        main(["train", "--backend", "rtl", "--chips", chips, "--epochs", "1"])


def test_rtl_refuses_a_graph_larger_than_the_chip():
    with pytest.raises(SystemExit, match="has 9000 nodes; the simulated chip's SAE buffer "
                                         "holds 8192 rows"):
        main(["train", "--backend", "rtl", "--dataset", "synthetic:nodes=9000",
              "--epochs", "1"])


def test_rtl_refuses_float_precision():
    with pytest.raises(SystemExit, match="--precision float32 is not available"):
        main(["train", "--backend", "rtl", "--precision", "float32", "--epochs", "1"])


def test_rtl_arguments_are_absolute(tmp_path, monkeypatch):
    from mixgcn.golden.gcn import GCNConfig
    from mixgcn.host.cli import _parser, rtl_arguments

    monkeypatch.chdir(tmp_path)
    args = _parser().parse_args(["train", "--backend", "rtl", "--dataset", "g.npz",
                                 "--data-dir", "planetoid"])
    r = rtl_arguments(args, GCNConfig(epochs=3))
    assert r["dataset"] == str(tmp_path / "g.npz")
    assert r["data_dir"] == str(tmp_path / "planetoid")
    assert r["config"]["epochs"] == 3
    assert r["reorder"] == "none" and r["pipeline"] is True
