"""Projection on paper (host/projection.py, ``mixgcn project``): the schedule it
assumes is the training loop's own, its cycles agree with the descriptor-level model
on graphs this machine holds, its bytes with the sharded backend's count, and bad
requests are refused naming the value."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.golden.backend import GoldenBackend
from mixgcn.golden.datasets import load_dataset
from mixgcn.golden.gcn import GCNConfig
from mixgcn.host.cli import main
from mixgcn.host.comm import InProcess
from mixgcn.host.projection import (
    PROJECTED_GRAPHS,
    GraphStats,
    epoch_calls,
    epoch_cycles,
    exchange_bytes,
    limits,
    memory_per_chip,
    modelled_epoch,
    project,
)
from mixgcn.host.train import Parallel, train

GRAPH = "synthetic:nodes=400,degree=6,features=60,classes=5"


class Recorder:
    """A backend in front of the golden model that records every call's method and
    sites, and its kernels' widths."""

    def __init__(self):
        self.backend, self.calls = GoldenBackend(), []

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def _w(self, a):
        return np.shape(a)[1]

    def spmm(self, s, x, stage, *, site=""):
        self.calls.append(("spmm", (site,), self._w(x)))
        return self.backend.spmm(s, x, stage, site=site)

    def gemm(self, form, x, w, stage, *, site=""):
        self.calls.append(("gemm", (site,), form))
        return self.backend.gemm(form, x, w, stage, site=site)

    def spmm_gemm(self, s, x, form, w, stages, *, sites=("", "")):
        self.calls.append(("spmm_gemm", tuple(sites), self._w(x)))
        return self.backend.spmm_gemm(s, x, form, w, stages, sites=sites)

    def gemm_spmm(self, form, x, w, s, stages, *, sites=("", "")):
        self.calls.append(("gemm_spmm", tuple(sites), np.shape(w)[1] if form == "xw"
                           else np.shape(w)[0]))
        return self.backend.gemm_spmm(form, x, w, s, stages, sites=sites)

    def spmm_and_gemm(self, s, h, form, x, w, stages, *, sites=("", "")):
        self.calls.append(("spmm_and_gemm", tuple(sites), self._w(h)))
        return self.backend.spmm_and_gemm(s, h, form, x, w, stages, sites=sites)


@pytest.mark.parametrize("hidden,layers", [(16, 2), (4, 2), (8, 3), (16, 1), (80, 2)])
def test_the_schedule_is_the_training_loops(hidden, layers):
    """epoch_calls lists what a training epoch calls, in order: recorded from a real
    run (combine-first and aggregate-first layers, one to three layers)."""
    ds = load_dataset(GRAPH)
    rec = Recorder()
    config = GCNConfig(epochs=2, hidden=hidden, layers=layers)
    marks = []
    train(ds, config, "fixed16", rec, progress=lambda _: marks.append(len(rec.calls)))
    dims = config.dims(ds.num_features, ds.num_classes)
    expected = epoch_calls(dims)
    # the second epoch's (the first runs every kernel alone: its pairs' output shifts
    # are not known yet)
    recorded = rec.calls[marks[0]:marks[1]]
    assert [(m, s) for m, s, _ in recorded] == [(c.method, c.sites) for c in expected]
    for (m, _, width), c in zip(recorded, expected, strict=True):
        if m in ("spmm", "spmm_gemm", "spmm_and_gemm", "gemm_spmm"):
            assert width == c.agg, (m, c)
        else:
            assert width == c.form


@pytest.mark.parametrize("chip,chips,parallelism", [
    ("tiny", 1, "mop"), ("tiny", 2, "mop"), ("tiny", 2, "partition"), ("ecp5", 1, "mop")])
def test_cycles_agree_with_the_descriptor_model(chip, chips, parallelism):
    """On a graph this machine holds (the tiny chip runs its SpMMs in column windows),
    the projected kernel cycles of an epoch are within 6 % of the descriptor-level
    model's (docs/projection.md quotes the bench's figures)."""
    ds = load_dataset("synthetic:nodes=3000,degree=8,features=60,classes=5")
    g = GraphStats.of(ds)
    real = modelled_epoch(ds, CHIP_PRESETS[chip], chips, parallelism)["kernel_cycles"]
    dims = GCNConfig().dims(g.features, g.classes)
    got = epoch_cycles(g, CHIP_PRESETS[chip], dims, chips, parallelism)["cycles"]
    assert abs(got - real) / real < 0.06, (got, real)


@pytest.mark.parametrize("chips", [2, 3, 4])
def test_mop_bytes_are_the_sharded_backends(chips):
    """MoP's exchanges move whole columns of N rows: the proxy's bytes, scaled to the
    graph's N, are what the sharded backend counts on the graph itself."""
    ds = load_dataset(GRAPH)
    r = train(ds, GCNConfig(epochs=2), "fixed16",
              InProcess([GoldenBackend() for _ in range(chips)]),
              parallel=Parallel(chips, "mop", "contiguous"))
    real = r["epoch_traffic"][1]["bytes_moved"]
    got = exchange_bytes(GraphStats.of(ds), chips, "mop")["bytes_total"]
    assert got == pytest.approx(real, rel=0.01)


def test_memory_per_chip():
    g = PROJECTED_GRAPHS["reddit"]
    mop = [memory_per_chip(g, p, "mop") for p in (1, 2, 8)]
    part = [memory_per_chip(g, p, "partition") for p in (1, 2, 8)]
    # MoP: every chip holds all of Â (6 bytes a non-zero, 4 an index pointer)
    assert {m["graph"] for m in mop} == {g.nnz * 6 + (g.nodes + 1) * 4}
    assert part[0]["graph"] > part[1]["graph"] > part[2]["graph"]
    assert mop[0]["features"] > mop[1]["features"] > mop[2]["features"] > 0
    r = project(PROJECTED_GRAPHS["ogbn-papers100M"], CHIP_PRESETS["ecp5"], chips=(1,),
                fmax_mhz=90.0, parallelisms=("mop",))
    assert r["kind"] == "model output"
    assert r["chips_needed"]["ulx3s-85f/mop"] is None  # 20 GB of Â on every chip


def test_limits_name_what_a_graph_exceeds():
    dims = GCNConfig().dims(602, 41)
    out = limits(PROJECTED_GRAPHS["reddit"], CHIP_PRESETS["ecp5"], dims, 4)
    assert any("SAEConfig.max_degree >= 232,965" in s for s in out)
    assert any("DCEConfig.max_rows >= 232,965" in s for s in out)
    cora = GraphStats.of(load_dataset("cora"))
    assert limits(cora, CHIP_PRESETS["ecp5"], GCNConfig().dims(1433, 7), 4) == []


def test_more_chips_partition_fewer_cycles():
    r = project(PROJECTED_GRAPHS["ogbn-products"], CHIP_PRESETS["ecp5"], chips=(1, 2, 4, 8),
                fmax_mhz=100.0, parallelisms=("partition",))
    cycles = [row["kernel_cycles"] for row in r["rows"]]
    assert cycles == sorted(cycles, reverse=True) and cycles[-1] < cycles[0] / 4
    assert all(row["epoch_seconds"] == pytest.approx(row["epoch_cycles"] / 100e6)
               for row in r["rows"])


@pytest.mark.parametrize("kwargs,match", [
    (dict(nodes=0), "nodes must be a positive integer, got 0"),
    (dict(nnz=5), "nnz=5 is below nodes=10"),
    (dict(feature_nnz=1000), "feature_nnz=1000 exceeds nodes x features = 40"),
])
def test_bad_statistics_are_refused(kwargs, match):
    args = dict(name="g", nodes=10, nnz=30, features=4, classes=2, feature_nnz=40) | kwargs
    with pytest.raises(ValueError, match=match):
        GraphStats(**args)


def test_bad_projection_requests_are_refused():
    g = PROJECTED_GRAPHS["reddit"]
    with pytest.raises(ValueError, match="fmax_mhz must be a positive clock, got 0"):
        project(g, CHIP_PRESETS["ecp5"], fmax_mhz=0)
    with pytest.raises(ValueError, match="chips must be integers in 1..4096, got 0"):
        project(g, CHIP_PRESETS["ecp5"], fmax_mhz=90.0, chips=(0,))


def test_cli_writes_a_labelled_projection(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["project", "--graph", GRAPH, "--fmax", "80", "--chips", "1,2",
                 "--json", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "model output, not measured" in text
    r = json.loads(out.read_text())
    assert r["kind"] == "model output" and r["fmax_mhz"] == 80
    assert [(row["chips"], row["parallelism"]) for row in r["rows"]] == [
        (1, "mop"), (2, "mop"), (1, "partition"), (2, "partition")]


@pytest.mark.parametrize("args,match", [
    (["--fmax", "0"], "--fmax must be a positive clock in MHz, got 0.0"),
    (["--fmax", "90", "--chips", "1,x"], "--chips must be comma-separated integers, got '1,x'"),
    (["--fmax", "90", "--chips", "0"], "--chips: 0 is not in 1..4096"),
    (["--fmax", "90", "--parallelism", "mop,foo"], "--parallelism: 'foo' is not one of"),
    (["--fmax", "90", "--graph", "nope"], "--graph 'nope': not one of reddit"),
    (["--fmax", "90", "--chip", "huge"], "unknown chip 'huge'"),
    (["--fmax", "90", "--memory", "ulx3s-litedram"],
     r"profiles \(ideal, ulx3s-sdram, ecpix5-ddr3, hbm\), not a DRAM controller"),
])
def test_cli_refuses_bad_requests(args, match):
    with pytest.raises(SystemExit, match=match):
        main(["project", *args])
