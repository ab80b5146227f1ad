"""Training on P chips (Mixture of Parallelism and the partition-parallel baseline):
the same weights whatever P and the parallelism, on golden and in RTL, in one process
or over MPI; the words that change chips counted exactly; bad input refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.golden.backend import GoldenBackend, Stage
from mixgcn.golden.datasets import make_synthetic as synthetic
from mixgcn.golden.gcn import GCNConfig
from mixgcn.golden.graph import normalized_adjacency
from mixgcn.host.cli import main
from mixgcn.host.comm import Call, InProcess, invoke
from mixgcn.host.sharded import ShardedBackend
from mixgcn.host.sharding import Layout, NodePartition, column_slices, transfer
from mixgcn.host.train import Parallel, train

TWO_EPOCHS = GCNConfig(epochs=2, seed=0)


def _golden_chips(p: int) -> InProcess:
    return InProcess([GoldenBackend() for _ in range(p)])


def _graph(n=60, seed=1):
    ds = synthetic(nodes=n, degree=4, features=24, classes=3, seed=seed)
    return ds, normalized_adjacency(ds.edge_index, ds.num_nodes)


def _mants(rng, shape, lo=-300, hi=300):
    return rng.integers(lo, hi, size=shape).astype(np.int64)


# ------------------------------------------------------------ exactness on golden

@pytest.mark.parametrize("parallelism,partitioner", [("mop", "contiguous"),
                                                     ("partition", "contiguous"),
                                                     ("partition", "metis")])
def test_cora_weights_do_not_depend_on_chips(cora, parallelism, partitioner):
    one = train(cora, TWO_EPOCHS, "fixed16")["weights_sha256"]
    for p in (1, 2, 3, 4):  # 3: slices of uneven size
        run = train(cora, TWO_EPOCHS, "fixed16", _golden_chips(p),
                    parallel=Parallel(p, parallelism, partitioner))
        assert run["weights_sha256"] == one, (p, parallelism, partitioner)
        assert run["chips"] == p and min(run["kernel_runs_per_chip"]) > 0
        assert len(run["bytes_per_chip"]) == p and len(run["memory_per_chip"]) == p
        assert (run["bytes_moved"] == 0) == (p == 1)


def test_three_layers_agg_first_and_narrow_tensors():
    """Aggregate-first layers (F_in ≤ F_out), and 5 chips for a 3-class
    output (two chips idle for the narrowest kernels): still the one-chip weights."""
    ds = synthetic(nodes=90, degree=5, features=6, classes=3, seed=4)
    cfg = GCNConfig(layers=3, hidden=8, epochs=3, seed=2)
    one = train(ds, cfg, "fixed16")["weights_sha256"]
    for parallelism in ("mop", "partition"):
        run = train(ds, cfg, "fixed16", _golden_chips(5), parallel=Parallel(5, parallelism))
        assert run["weights_sha256"] == one, parallelism


# ------------------------------------------------------------- what is counted

def test_alltoall_volume_per_layout_switch():
    """A GEMM (node rows) feeding an SpMM (feature columns): the switch moves
    N·F·(P−1)/P words when P divides N and F, never more than N·F, exactly the blocks
    [R_q, S_p] of p ≠ q otherwise."""
    rng = np.random.default_rng(0)
    for n, f, p in ((60, 12, 4), (60, 12, 3), (61, 7, 4), (50, 5, 2)):
        _, a = _graph(n)
        s = _mants(rng, (n, n)) * (a.toarray() != 0)
        s = sp.csr_array(s)
        x, w = _mants(rng, (n, 9)), _mants(rng, (9, f))
        be = ShardedBackend(_golden_chips(p), NodePartition.build(a, p), "mop")
        stages = (Stage(10), Stage(12))
        pair = be.gemm_spmm("xw", x, w, s, stages, sites=("L0.fwd.comb", "L0.fwd.agg"))
        gold = GoldenBackend().gemm_spmm("xw", x, w, s, stages)
        assert np.array_equal(pair.second.rows, gold.second.rows)
        assert pair.second.stats == gold.second.stats
        words = be.bytes_per_op["alltoall"] / 2
        rows = [len(r) for r in np.array_split(np.arange(n), p)]
        cols = [len(c) for c in column_slices(f, p)]
        blocks = sum(rows[q] * cols[k] for q in range(p) for k in range(p) if q != k)
        assert words == blocks <= n * f
        if n % p == 0 and f % p == 0:
            assert words == n * f * (p - 1) / p


def test_transfer_counts_the_sets():
    _, a = _graph(40, seed=3)
    nodes = NodePartition.build(a, 3, "metis")
    f = 5
    halo = transfer(Layout.NODE, Layout.HALO, (40, f), nodes)
    outside = sum(len(c) - len(r) for r, c in zip(nodes.rows, nodes.halo_rows, strict=True))
    assert halo.sum() == outside * f and np.all(np.diag(halo) == 0)
    there = transfer(Layout.NODE, Layout.FEATURE, (40, f), nodes)
    back = transfer(Layout.FEATURE, Layout.NODE, (40, f), nodes)
    assert np.array_equal(there, back.T)  # what p sends q one way, q sends p the other
    gather = transfer(Layout.FEATURE, Layout.FULL, (40, f), nodes)
    assert np.array_equal(gather.sum(axis=0), [40 * (f - len(s)) for s in
                                               column_slices(f, 3)])
    assert not transfer(Layout.FULL, Layout.NODE, (40, f), nodes).any()


def test_output_statistics_are_reduced_across_chips():
    """max|acc| and the saturation count of a sharded kernel are one chip's."""
    rng = np.random.default_rng(5)
    _, a = _graph(30)
    s = sp.csr_array(_mants(rng, (30, 30), -3000, 3000) * (a.toarray() != 0))
    x = _mants(rng, (30, 10), -30000, 30000)
    stage = Stage(4, relu=True)  # a small shift: many outputs saturate
    gold = GoldenBackend().spmm(s, x, stage)
    assert gold.stats.saturated > 0
    for parallelism in ("mop", "partition"):
        be = ShardedBackend(_golden_chips(3), NodePartition.build(a, 3), parallelism)
        out = be.spmm(s, x, stage, site="L0.fwd.agg")
        assert out.stats == gold.stats and np.array_equal(out.rows, gold.rows)


def test_partition_counts_halo_and_metis_cuts_it(cora):
    a = normalized_adjacency(cora.edge_index, cora.num_nodes)
    runs = {m: train(cora, TWO_EPOCHS, "fixed16", _golden_chips(4),
                     parallel=Parallel(4, "partition", m)) for m in ("contiguous", "metis")}
    assert 0 < runs["metis"]["bytes_per_op"]["halo"] < runs["contiguous"]["bytes_per_op"]["halo"]
    nodes = NodePartition.build(a, 4, "contiguous")
    boundary = sum(len(c) - len(r) for r, c in zip(nodes.rows, nodes.halo_rows, strict=True))
    assert runs["contiguous"]["bytes_per_op"]["halo"] % (boundary * 2) == 0  # Σ|B_p|·F words


def test_invoke_reports_what_the_call_took():
    rng = np.random.default_rng(0)
    out = invoke(GoldenBackend(), Call("gemm", ("xw", _mants(rng, (4, 3)),
                                                _mants(rng, (3, 2)), Stage(0)), {}))
    assert out.result.rows.shape == (4, 2) and out.cycles is None
    with pytest.raises(ValueError, match="not a kernel call: 'close'"):
        invoke(GoldenBackend(), Call("close", (), {}))


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize(("args", "message"), [
    (["--chips", "0", "--precision", "fixed16"], "--chips 0: the number of chips must be an "
                                                 "integer >= 1, got 0"),
    (["--chips", "2"], "--chips 2: chips compute in fixed point; add --precision fixed16"),
    (["--chips", "2", "--precision", "float32"], "chips compute in fixed point"),
    (["--chips", "11", "--precision", "fixed16", "--dataset",
      "synthetic:nodes=10,degree=2,features=30,classes=2"], "11 chips for 10 nodes"),
    (["--chips", "5", "--precision", "fixed16", "--dataset",
      "synthetic:nodes=40,degree=2,features=4,classes=2"], "5 chips for 4 input features"),
    (["--chips", "2", "--precision", "fixed16", "--link-gbps", "0"],
     "--link-gbps must be a finite number > 0, got 0"),
])
def test_bad_parallel_options_are_refused(args, message):
    with pytest.raises(SystemExit, match=message):
        main(["train", "--quiet", "--epochs", "1", *args])


def test_metis_without_pymetis_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)  # import fails
    with pytest.raises(SystemExit,
                       match=r"METIS \(--partitioner metis, --reorder metis\) needs pymetis"):
        main(["train", "--quiet", "--epochs", "1", "--precision", "fixed16", "--chips", "2",
              "--parallelism", "partition", "--partitioner", "metis"])


def test_mpiexec_ranks_must_match_chips(monkeypatch):
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(SystemExit, match="mpiexec started 2 ranks but --chips is 3"):
        main(["train", "--quiet", "--precision", "fixed16", "--chips", "3"])


# ----------------------------------------------------------------- RTL and MPI

def _mpiexec() -> str:
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("mpiexec not installed (pip install 'mixgcn[parallel]')")
    return exe


def _cli(tmp_path, name, *args, ranks=None):
    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "mixgcn", "train", "--quiet", "--json", str(out), *args]
    if ranks:
        cmd = [_mpiexec(), "-n", str(ranks), *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def test_two_mpi_ranks_equal_in_process_on_golden(tmp_path, cora_dir):
    args = ["--dataset", "cora", "--data-dir", str(cora_dir), "--epochs", "2",
            "--precision", "fixed16", "--chips", "2"]
    here = _cli(tmp_path, "here", *args)
    mpi = _cli(tmp_path, "mpi", *args, ranks=2)
    assert mpi["transport"] == "mpi" and here["transport"] == "in-process"
    assert mpi["kernel_runs_per_chip"][1] > 0  # rank 1 computed its share
    for key in ("weights_sha256", "bytes_moved", "bytes_per_chip", "bytes_per_op"):
        assert mpi[key] == here[key], key


@pytest.fixture(scope="module")
def default_chips():
    from mixgcn.host.backends import open_rtl

    chips = []
    try:
        for p in range(4):
            chips.append(open_rtl(chip=CHIP_PRESETS["default"], index=p))
        yield chips
    finally:
        for c in chips:
            c.close()


@pytest.mark.sim
@pytest.mark.slow  # make test: Cora on two tiny chips in RTL, and on 1-4 chips on golden
@pytest.mark.xdist_group("default-chip")  # with test_rtl_backend's default chip: one build
def test_cora_in_rtl_on_p_chips_equals_golden(cora, default_chips):
    one = train(cora, TWO_EPOCHS, "fixed16")["weights_sha256"]
    for p in (1, 2, 3, 4):
        for parallelism in ("mop", "partition"):
            run = train(cora, TWO_EPOCHS, "fixed16", InProcess(default_chips[:p], owned=False),
                        parallel=Parallel(p, parallelism))
            assert run["weights_sha256"] == one, (p, parallelism)
            assert len(run["cycles_per_chip"]) == p and min(run["cycles_per_chip"]) > 0
            # an epoch costs each step's slowest chip plus the exchanges
            steps = sum(v for k, v in run["cycles_per_op"].items()
                        if not k.startswith("exchange_"))
            assert run["cycles"] == steps + run["exchange_cycles"]
            assert max(run["cycles_per_chip"]) <= steps


@pytest.mark.sim
@pytest.mark.parametrize("case", [
    # a quick one in `make test`; Cora on the default chip with the slow tier
    "tiny-synthetic", pytest.param("default-cora", marks=pytest.mark.slow)])
def test_two_mpi_ranks_equal_in_process_in_rtl(tmp_path, request, case):
    if case == "tiny-synthetic":
        args = ["--dataset", "synthetic:nodes=300", "--chip", "tiny"]
    else:
        cora_dir = request.getfixturevalue("cora_dir")  # skips when Cora is missing
        args = ["--dataset", "cora", "--data-dir", str(cora_dir), "--chip", "default"]
    args += ["--epochs", "1", "--backend", "rtl", "--chips", "2"]
    here = _cli(tmp_path, "here", *args)
    mpi = _cli(tmp_path, "mpi", *args, ranks=2)
    assert mpi["transport"] == "mpi" and mpi["kernel_runs_per_chip"][1] > 0
    for key in ("weights_sha256", "cycles", "cycles_per_chip", "bytes_per_chip",
                "memory_per_chip"):
        assert mpi[key] == here[key], key


@pytest.mark.sim
def test_cora_on_two_tiny_chips_in_column_windows_equals_golden(tmp_path, cora_dir):
    # tiny's buffer holds 2,048 of Cora's 2,708 rows (test_tiling: Cora's Â runs in
    # windows): every chip's SpMMs run in column windows, under MoP and partitions
    args = ["--dataset", "cora", "--data-dir", str(cora_dir), "--epochs", "2", "--seed", "0"]
    golden = _cli(tmp_path, "golden", *args, "--precision", "fixed16")
    for parallelism in ("mop", "partition"):
        rtl = _cli(tmp_path, parallelism, *args, "--backend", "rtl", "--chip", "tiny",
                   "--chips", "2", "--parallelism", parallelism)
        assert rtl["weights_sha256"] == golden["weights_sha256"], parallelism
