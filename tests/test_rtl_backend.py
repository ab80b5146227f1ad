"""Training on a simulated chip gives exactly the golden fixed-point weights, on any chip
configuration; the cycle counts come from the chip's counters; a graph a chip cannot
hold is refused, naming the limit, before anything is built."""

from __future__ import annotations

import json
import time

import pytest

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.host.cli import main


def _run(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    assert main(["train", "--quiet", "--json", str(out), *args]) == 0
    return json.loads(out.read_text())


def _golden(tmp_path, *args):
    return _run(tmp_path, "golden", "--backend", "golden", "--precision", "fixed16", *args)


@pytest.mark.sim
def test_tiny_chip_matches_golden_on_synthetic(tmp_path):
    args = ["--dataset", "synthetic", "--epochs", "2", "--seed", "0"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", "tiny", *args)
    assert rtl["weights_sha256"] == _golden(tmp_path, *args)["weights_sha256"]
    assert rtl["chip"] == "tiny" and rtl["chip_config"] == CHIP_PRESETS["tiny"].to_dict()
    # 16 hidden features do not fit 4 lanes: no layer pipelines its SpMM and GEMM
    assert {s["pairing"] for s in rtl["cycles_per_site"].values()} == {"alone", "beside"}


@pytest.mark.sim
def test_the_chip_is_exact_on_memory_with_bandwidth_and_latency(tmp_path):
    """The memory profiles change when words arrive, never which: the same weights
    as golden and the same words moved, in more cycles than on the ideal memory (the
    profile is played)."""
    args = ["--dataset", "synthetic:nodes=120,features=24", "--epochs", "1", "--seed", "3",
            "--backend", "rtl", "--chip", "tiny"]
    gold = _golden(tmp_path, *args[:6])["weights_sha256"]
    ideal = _run(tmp_path, "ideal", *args)
    assert ideal["memory_profile"] == "ideal" and ideal["weights_sha256"] == gold
    for name in ("ulx3s-sdram", "hbm"):
        run = _run(tmp_path, name, *args, "--memory", name)
        assert run["memory_profile"] == name
        assert run["weights_sha256"] == gold, name
        assert run["cycles"] > ideal["cycles"], (name, run["cycles"], ideal["cycles"])
        # the chip asks for the same words whatever answers them
        for key in ("chip_words_read", "chip_words_written", "chip_words_read_per_op",
                    "chip_words_read_distinct_per_op"):
            assert run[key] == ideal[key], (name, key)
    assert ideal["chip_words_read"] == sum(ideal["chip_words_read_per_op"].values()) > 0
    # the SpMMs' passes over the features read the CSR beats again: fewer distinct words
    assert 0 < ideal["chip_words_read_distinct"] < ideal["chip_words_read"]
    # every row the chip writes, the host reads back (no pipelined pair on this chip)
    assert ideal["chip_words_written"] == ideal["memory_words_read"] > 0


@pytest.mark.sim
def test_micro_chip_trains_exactly(tmp_path):
    """The smallest preset (2 lanes, 6 multipliers, 24-bit counters, 42-bit
    accumulators: what an iCE40 UP5K might have held) still trains, bit for bit."""
    args = ["--dataset", "synthetic:nodes=200,features=32", "--epochs", "2", "--seed", "0"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", "micro", *args)
    assert rtl["weights_sha256"] == _golden(tmp_path, *args)["weights_sha256"]
    assert rtl["chip_config"]["lanes"] == 2


# a chip's simulator is built once, for all the tests of its group: on one worker, so
# that the other never waits for the build (the default chip's with test_parallel's P
# chips, in the slow tier; the ecp5 chip's with Cora on it)
ECP5_CHIP = pytest.mark.xdist_group("ecp5-chip")


@pytest.mark.sim
# ecp5's 8 lanes pipeline both pairs at a hidden width of 8; the default chip's 16 at 16
@pytest.mark.parametrize(("chip", "hidden"), [
    pytest.param("ecp5", 8, marks=ECP5_CHIP),
    pytest.param("default", 16, marks=[pytest.mark.slow, pytest.mark.xdist_group("default-chip")])])
def test_chip_matches_golden_and_counts_cycles(tmp_path, chip, hidden):
    args = ["--dataset", "synthetic", "--hidden", str(hidden), "--epochs", "2", "--seed", "0"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", chip, *args)
    gold = _golden(tmp_path, *args)
    assert rtl["weights_sha256"] == gold["weights_sha256"]
    assert rtl["test_accuracy"] == gold["test_accuracy"]
    assert rtl["backend"] == "rtl" and rtl["precision"] == "fixed16"
    assert rtl["chip"] == chip
    # every kernel kind ran on the chip and was counted; from the second epoch on the
    # layer's SpMM and GEMM run as pipelined pairs; layer 1's weight gradient always runs
    # beside layer 0's aggregation
    assert set(rtl["cycles_per_op"]) == {"spmm", "gemm_xw", "gemm_xwt", "gemm_xw_sparse",
                                         "gemm_xtg_sparse", "gemm_xw+spmm", "spmm+gemm_xwt",
                                         "spmm|gemm_xtg"}
    assert rtl["cycles"] == sum(rtl["cycles_per_op"].values()) > 0
    assert rtl["cycles"] == sum(s["cycles"] for s in rtl["cycles_per_site"].values())
    pairs = {s["pairing"]: s["sites"] for s in rtl["cycles_per_site"].values()}
    assert pairs["beside"] == ["L0.bwd.agg", "L1.bwd.wgrad"]
    assert 0 < rtl["sae_busy_cycles"] <= rtl["cycles"]
    assert 0 < rtl["dce_busy_cycles"] <= rtl["cycles"]
    assert len(rtl["epoch_cycles"]) == 2 and sum(rtl["epoch_cycles"]) < rtl["cycles"]
    assert rtl["memory_words_written"] > 0 and rtl["memory_words_read"] > 0

    # the same run with every kernel alone: the same bits, more cycles
    alone = _run(tmp_path, "alone", "--backend", "rtl", "--chip", chip, "--no-pipeline", *args)
    assert alone["weights_sha256"] == gold["weights_sha256"]
    assert {s["pairing"] for s in alone["cycles_per_site"].values()} == {"alone"}
    assert "gemm_xtg" in alone["cycles_per_op"]
    assert alone["epoch_cycles"][0] > rtl["epoch_cycles"][0]  # the side-by-side pair
    assert alone["epoch_cycles"][1] > rtl["epoch_cycles"][1]


@pytest.mark.sim
def test_tiny_chip_matches_golden_reordered_with_three_layers(tmp_path):
    args = ["--dataset", "synthetic:nodes=300", "--epochs", "2", "--seed", "3",
            "--reorder", "rcm", "--layers", "3", "--hidden", "20"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", "tiny", *args)
    assert rtl["weights_sha256"] == _golden(tmp_path, *args)["weights_sha256"]
    assert rtl["reorder"] == "rcm"


@pytest.mark.sim
def test_sparse_features_aggregated_first(tmp_path):
    # 14 features < 16 hidden: layer 0 aggregates the sparse features first (Â·X, X
    # sparse in the sparse engine's buffer), then its weight gradient is (Â·X)ᵀ·G
    args = ["--dataset", "synthetic:nodes=200,features=14", "--epochs", "2", "--seed", "1"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", "tiny", *args)
    assert rtl["weights_sha256"] == _golden(tmp_path, *args)["weights_sha256"]


@pytest.mark.sim
# Cora on one default chip is also test_parallel's P = 1 case: here in the slow tier
@pytest.mark.parametrize("chip", [pytest.param("default", marks=pytest.mark.slow),
                                  pytest.param("ecp5", marks=ECP5_CHIP), "tiny"])
def test_cora_matches_golden(tmp_path, cora_dir, chip):
    # tiny's buffer holds 2,048 rows of Cora's 2,708: its SpMMs run in column windows
    args = ["--dataset", "cora", "--data-dir", str(cora_dir), "--epochs", "2", "--seed", "0"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", chip, *args)
    assert rtl["weights_sha256"] == _golden(tmp_path, *args)["weights_sha256"]
    assert rtl["chip"] == chip


@pytest.mark.sim
def test_a_graph_wider_than_the_buffer_trains_exactly_with_fused_pairs(tmp_path):
    # 2,500 nodes on tiny's 2,048-row buffer: every SpMM in column windows; hidden 2 and
    # 3 classes make layer 1 aggregate first, its SpMM feeding the GEMM through the
    # exchange (from the second epoch on) while later blocks still run
    args = ["--dataset", "synthetic:nodes=2500,classes=3,features=40", "--hidden", "2",
            "--epochs", "3", "--seed", "1"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", "tiny", *args)
    assert rtl["weights_sha256"] == _golden(tmp_path, *args)["weights_sha256"]
    assert "spmm+gemm_xw" in rtl["cycles_per_op"]


@pytest.mark.sim
def test_chip_from_the_generators_json(tmp_path):
    from mixgcn.gen.verilog import main as verilog_main

    assert verilog_main(["--out", str(tmp_path / "v"), "--preset", "tiny"]) == 0
    chip = tmp_path / "v" / "tiny" / "chip.json"
    args = ["--dataset", "synthetic:nodes=150", "--epochs", "1", "--seed", "2"]
    rtl = _run(tmp_path, "rtl", "--backend", "rtl", "--chip", str(chip), *args)
    assert rtl["weights_sha256"] == _golden(tmp_path, *args)["weights_sha256"]
    assert rtl["chip"] == str(chip)


# ------------------------------------------------------------------------- refusals
# Each limit of the chip, checked on the chip's own layout code before anything is
# built: the build folder stays empty and the refusal takes well under a second.

# a preset, or (preset, changes to its configuration): written as a chip JSON file
LIMITS = [
    ("nodes", ["--dataset", "synthetic:nodes=1100"], "micro",
     "1100 nodes; the chip's sparse-engine buffer holds 1024 rows .* keeps no partial sums"),
    ("features", ["--dataset", "synthetic:nodes=300,features=3000"],
     ("tiny", {"sae": {"partial_rows": 0}}),
     r"gathers from 3000 rows of X; the sparse engine's buffer holds 2048 "
     r"\(SAEConfig.max_nodes\) and it keeps no partial sums"),
    ("CSR beats", ["--dataset", "synthetic:nodes=2000,degree=64"],
     ("tiny", {"addr_width": 16}),
     r"takes \d+ CSR beats; the chip's memory keeps 32768 words for sparse operands"),
    ("degree", ["--dataset", "synthetic:nodes=2000,degree=16"],
     ("tiny", {"sae": {"max_degree": 40}}),
     r"a row of S has \d+ non-zeros; .* sized for 40 \(SAEConfig.max_degree\)"),
    ("reduction", ["--dataset", "synthetic:nodes=100,features=50", "--hidden", "260"],
     "tiny", "a reduction over 260 values exceeds the dense engine's weight store of 256"),
    ("memory", ["--dataset", "synthetic:nodes=300", "--hidden", "300"],
     ("tiny", {"addr_width": 16}),
     "the batch's operands and results need 37500 memory words; the lower half of the "
     "chip's memory holds 32768"),
]


@pytest.mark.parametrize(("what", "args", "chip", "message"), LIMITS,
                         ids=[x[0] for x in LIMITS])
def test_a_graph_the_chip_cannot_hold_is_refused_before_any_build(
        tmp_path, monkeypatch, what, args, chip, message):
    monkeypatch.setenv("MIXGCN_BUILD", str(tmp_path / "build"))
    if isinstance(chip, tuple):
        preset, changes = chip
        d = CHIP_PRESETS[preset].to_dict()
        for key, value in changes.items():
            if isinstance(value, dict):
                d[key].update(value)
            else:
                d[key] = value
        chip = str(tmp_path / "chip.json")
        (tmp_path / "chip.json").write_text(json.dumps(d))
    t0 = time.perf_counter()
    with pytest.raises(SystemExit, match=message):
        main(["train", "--backend", "rtl", "--chip", chip, "--epochs", "1", "--quiet", *args])
    assert time.perf_counter() - t0 < 1.0, what
    assert not (tmp_path / "build").exists(), "something was built before the refusal"
