"""Training on the simulated engines gives exactly the golden fixed-point weights; the
cycle counts come from the engines' harness counters."""

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
    # every kernel kind ran on an engine and was counted
    assert set(rtl["cycles_per_op"]) == {"spmm", "gemm_xw", "gemm_xwt", "gemm_xtg",
                                         "gemm_xw_sparse", "gemm_xtg_sparse"}
    assert rtl["cycles"] == sum(rtl["cycles_per_op"].values()) > 0
    assert 0 < rtl["sae_busy_cycles"] <= rtl["cycles"]
    assert 0 < rtl["dce_busy_cycles"] <= rtl["cycles"]


@pytest.mark.sim
def test_rtl_matches_golden_fixed16_on_cora(tmp_path, cora_dir):
    args = ["--dataset", "cora", "--data-dir", str(cora_dir), "--epochs", "2", "--seed", "0"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", *args)
    gold = _run(tmp_path, "golden", "--backend", "golden", "--precision", "fixed16", *args)
    assert rtl["weights_sha256"] == gold["weights_sha256"]


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
